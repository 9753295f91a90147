"""The agent's runtimes as wheels for a device's Python: which ones (pinned to the host's
versions), for which platform, downloaded by pip into a cache, and the standard-library script
that unpacks them.

``aiot devices setup`` pushes them to a board (:mod:`aiot.host.devices.setup`); the emulated
arm64 userland unpacks them on this host (:mod:`aiot.host.emulator.arm64`), and a phone's runtime
is cut from that userland.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from aiot.core import environment
from aiot.core.errors import AiotError, UsageError
from aiot.core.fileio import staged_folder

try:
    import fcntl
except ImportError:  # Windows: no flock; concurrent builds there only repeat each other's work
    fcntl = None

log = logging.getLogger(__name__)

#: The agent's runtimes: import name -> pip distribution. Importing LiteRT's interpreter
#: module (not just the package) proves its native library loads.
RUNTIME_MODULES = {
    "numpy": "numpy",
    "onnxruntime": "onnxruntime",
    "ai_edge_litert.interpreter": "ai-edge-litert",
}
RUNTIMES = tuple(RUNTIME_MODULES.values())

#: Runtimes a device takes only when asked (``--with torch``), by machine: what to download
#: with ``--no-deps`` (pip evaluates a wheel's environment markers for *this* machine, so a
#: resolver run would ask for x86 CUDA packages). torch runs ``.ptl`` (PyTorch Mobile's lite
#: interpreter). PyPI's aarch64 torch 2.11-2.13 are CUDA builds (libtorch_cuda, nvidia-*
#: wheels for aarch64); 2.10.0 is the newest CPU aarch64 build there, and its lite interpreter
#: reads the bytecode (v8) that aiot's torch writes. ExecuTorch's Python runtime links against
#: torch, so the device takes the newest ExecuTorch that accepts torch 2.10 (1.1.0; 1.2 wants
#: torch >= 2.11) plus the two pure-Python modules its runtime imports beyond torch's. It
#: loads the programs aiot's ExecuTorch 1.5.1 writes (the record keeps both versions).
_TORCH_AARCH64 = ("torch==2.10.0", "filelock", "typing-extensions", "sympy", "mpmath", "networkx",
                  "jinja2", "markupsafe", "fsspec")
OPTIONAL_RUNTIMES = {
    "torch": {"aarch64": _TORCH_AARCH64},
    "executorch": {"aarch64": (*_TORCH_AARCH64, "executorch==1.1.0", "ruamel.yaml", "tabulate")},
}
COMPLETE = ".complete"


#: The ``devices setup --with`` extra that brings each optional backend's runtime.
SETUP_EXTRA = {"pytorch_mobile": "torch", "executorch": "executorch"}
#: Backends whose runtimes ``devices setup`` installs on every device (RUNTIME_MODULES).
SETUP_BACKENDS = ("onnxruntime", "litert")


def runtime_fix(device: str, backend: str, tools=(), source: str = "") -> str:
    """What gives ``device``'s agent the runtime of ``backend``, as one line a user types:
    ``devices setup`` (with its ``--with`` extra), else a native tool of ``tools`` that times
    the backend's format (LCE publishes no runtime aiot can install on a device), with where
    the first tool's binary comes from (``source``: aiot ships none)."""
    if backend in SETUP_EXTRA:
        return f"run: aiot devices setup {device} --with {SETUP_EXTRA[backend]}"
    if backend in SETUP_BACKENDS:
        return f"run: aiot devices setup {device}"
    if not tools:
        return ("aiot installs no such runtime on a device: time it with its native benchmark "
                "tool (--native, see aiot run --help), or choose a --format the device runs")
    origin = f"; {tools[0]} is {source}" if source else ""
    return (f"time it with --native {tools[0]} (add [devices.{device}.binaries] {tools[0]} = "
            f"\"/path\" to the inventory), or choose a --format the device runs{origin}")
OLDEST_MANYLINUX = 17  # manylinux2014 = glibc 2.17, the oldest tag these wheels use

#: Prints the facts a wheel must match as one JSON line; run by the device's Python.
FACTS_SCRIPT = ("import json, platform, sys; "
          "print(json.dumps({'version': '%d.%d' % sys.version_info[:2], 'machine': platform.machine(), "
          "'glibc': platform.libc_ver()[1]}))")

#: Unpacks wheels (zip files) into a folder; *.data/purelib|platlib go to the top, as pip does.
#: A failed unpack (a full disk) removes what it unpacked, so the device is not left full.
UNPACK_SCRIPT = """
import os, shutil, sys, zipfile
target = sys.argv[1]
shutil.rmtree(target, ignore_errors=True)
try:
    os.makedirs(target)
    for wheel in sys.argv[2:]:
        zipfile.ZipFile(wheel).extractall(target)
    for name in os.listdir(target):
        if name.endswith('.data'):
            for lib in ('purelib', 'platlib'):
                src = os.path.join(target, name, lib)
                if os.path.isdir(src):
                    shutil.copytree(src, target, dirs_exist_ok=True)
            shutil.rmtree(os.path.join(target, name))
except OSError as exc:
    shutil.rmtree(target, ignore_errors=True)
    sys.exit('unpacking failed, partial unpack removed: %s' % exc)
"""


@dataclass(frozen=True)
class DevicePython:
    """What the wheels must match."""

    version: str  # "3.11"
    machine: str  # "aarch64", "x86_64"
    glibc: str  # "2.36"; empty on musl or unknown


def parse_facts(stdout: str) -> DevicePython:
    """The :data:`FACTS_SCRIPT` output (its last line) as a DevicePython."""
    facts = json.loads(stdout.strip().splitlines()[-1])
    return DevicePython(facts["version"], facts["machine"], facts["glibc"])


def platform_tags(python: DevicePython) -> list[str]:
    """manylinux tags a wheel may carry to load on this device, newest glibc first."""
    if not python.glibc:
        raise AiotError(f"the device's Python reports no glibc ({python.machine}): musl and other libcs "
                        "have no manylinux wheels", "install the runtimes on the device yourself")
    major, minor = (int(p) for p in python.glibc.split(".")[:2])
    if major != 2:
        raise AiotError(f"unexpected glibc {python.glibc} on the device")
    tags = [f"manylinux_2_{m}_{python.machine}" for m in range(minor, OLDEST_MANYLINUX - 1, -1)]
    return [*tags, f"manylinux2014_{python.machine}"]


def requirements() -> list[str]:
    """The runtimes, pinned to the host's versions so host and device run the same code."""
    pinned = []
    for name in RUNTIMES:
        try:
            pinned.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pinned.append(name)
    return pinned


def optional_requirements(python: DevicePython, extras: tuple[str, ...]) -> list[str]:
    """Pinned packages of the optional runtimes ``extras`` for this device's machine.

    Raises:
        UsageError: unknown runtime, or none published for this machine.
    """
    reqs: list[str] = []
    for extra in extras:
        if extra not in OPTIONAL_RUNTIMES:
            raise UsageError(f"unknown optional runtime '{extra}'", f"known: {', '.join(OPTIONAL_RUNTIMES)}")
        by_machine = OPTIONAL_RUNTIMES[extra]
        if python.machine not in by_machine:
            raise UsageError(f"no {extra} wheels are set up for {python.machine} devices",
                             f"install {extra} on the device yourself (machines: {', '.join(by_machine)})")
        # --with torch,executorch: both list torch's wheels; download each once
        reqs += [r for r in by_machine[python.machine] if r not in reqs]
    return reqs


def download_wheels(python: DevicePython, cache: Path, extras: tuple[str, ...] = ()) -> list[Path]:
    """Wheels for ``python`` in a cache folder keyed by platform and requirements.

    Downloaded into a temporary folder and renamed into place when complete, under
    :func:`build_lock`: a cache shared by several processes gets each folder once and whole.
    """
    reqs = requirements()
    optional = optional_requirements(python, extras)
    key = hashlib.sha256(json.dumps([python.version, python.machine, python.glibc, reqs,
                                     *([optional] if optional else [])]).encode())
    folder = cache / "device-wheels" / f"cp{python.version.replace('.', '')}-{python.machine}-{key.hexdigest()[:12]}"
    if not (folder / COMPLETE).exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with build_lock(folder):
            if not (folder / COMPLETE).exists():
                _download_into(folder, python, reqs, optional)
    return sorted(folder.glob("*.whl"))


def _download_into(folder: Path, python: DevicePython, reqs: list[str], optional: list[str]) -> None:
    # 0o755: as a folder made with mkdir (mkdtemp's is private)
    with staged_folder(folder, prefix=".downloading-", mode=0o755) as work:
        argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--quiet",
                "--only-binary=:all:", "--implementation", "cp", "--python-version", python.version,
                "-d", str(work)]
        for tag in platform_tags(python):
            argv += ["--platform", tag]
        log.info("downloading %s for %s", " ".join(reqs + optional), python)
        _pip_download(argv, reqs, python)
        if optional:
            _pip_download([*argv, "--no-deps"], optional, python)
        (work / COMPLETE).write_text("\n".join(reqs + optional) + "\n")
        shutil.rmtree(folder, ignore_errors=True)  # a half download left by an older aiot


@contextmanager
def build_lock(entry: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<entry>.lock`` while cache entry ``entry`` is built, so
    that processes sharing the cache build it once (the others wait, then find it complete).
    The kernel drops the lock when its holder dies."""
    if fcntl is None:
        yield
        return
    with open(entry.parent / f".{entry.name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _pip_download(argv: list[str], reqs: list[str], python: DevicePython) -> None:
    done = subprocess.run([*argv, *reqs], capture_output=True, text=True)
    if done.returncode != 0:
        reason = [line for line in done.stderr.splitlines() if line.startswith("ERROR")] or ["pip failed"]
        raise AiotError(f"no wheels for Python {python.version} on {python.machine}: {reason[0]}",
                        "check the network to PyPI, or install the runtimes on the device yourself")


#: Where Debian packages come from without a mirror of this machine's (the emulated arm64
#: userland, the app's SDK tools).
DEFAULT_MIRROR = "http://deb.debian.org/debian"


def debian_mirror() -> str:
    """The Debian mirror this machine's apt uses (``AIOT_DEBIAN_MIRROR`` wins), else deb.debian.org."""
    if environment.get("AIOT_DEBIAN_MIRROR"):
        return environment.get("AIOT_DEBIAN_MIRROR")
    for source in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for line in source.read_text(errors="replace").splitlines():
            uri = line.partition("URIs:")[2].split()
            if line.startswith("URIs:") and uri and uri[0].rstrip("/").endswith("/debian"):
                return uri[0]
    return DEFAULT_MIRROR
