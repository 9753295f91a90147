"""``aiot devices setup``: give a board's Python the agent's runtimes without internet on the board.

The host asks the device's Python for its version, CPU architecture and glibc, downloads
matching manylinux wheels (numpy, onnxruntime, ai-edge-litert and their dependencies, pinned
to the host's versions where the host has them) with pip, pushes them content-addressed, and
unpacks them on the device into ``<workdir>/runtime/site`` with a few lines of standard-library
Python. The agent then runs with that folder on ``PYTHONPATH``. Android phones have no Python:
they get aiot's own aarch64 runtime instead (:mod:`aiot.host.devices.android_runtime`, see
:func:`setup_phone`), and NNAPI/GPU delegates stay with native benchmark binaries.
"""

from __future__ import annotations

import hashlib
import json
import logging
import posixpath
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from aiot.host.devices.deploy import push_file, require_space, unpack_failure
from aiot.core.errors import AiotError, DeviceCommandError
from aiot.host.transports.base import Transport
from aiot.host.transports.quoting import quote

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
NATIVE_ONLY = ("adb",)  # transports whose devices have no Python: aiot pushes its own
COMPLETE = ".complete"
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


def runtime_site(transport: Transport) -> str:
    """Where the unpacked runtimes live on the device."""
    return posixpath.join(transport.workdir(), "runtime", "site")


def agent_env(transport: Transport) -> dict[str, str]:
    """Extra environment for the agent: the set-up runtimes, if this device has them."""
    site = runtime_site(transport)
    return {"PYTHONPATH": site} if transport.exists(posixpath.join(site, COMPLETE)) else {}


def describe_python(transport: Transport) -> DevicePython:
    """Version, architecture and glibc of the device's agent Python."""
    result = transport.shell([transport.python(), "-c", FACTS_SCRIPT], timeout=60)
    if not result.ok:
        raise AiotError(f"'{transport.name}' cannot run its Python '{transport.python()}': "
                        f"{result.stderr.strip().splitlines()[-1] if result.stderr.strip() else result.exit_code}",
                        f"install python3 on the device or set its path: aiot devices add {transport.name} "
                        "--python PATH --replace")
    return parse_facts(result.stdout)


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
    from aiot.core.errors import UsageError

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
    """Wheels for ``python`` in a cache folder keyed by platform and requirements."""
    reqs = requirements()
    optional = optional_requirements(python, extras)
    key = hashlib.sha256(json.dumps([python.version, python.machine, python.glibc, reqs,
                                     *([optional] if optional else [])]).encode())
    folder = cache / "device-wheels" / f"cp{python.version.replace('.', '')}-{python.machine}-{key.hexdigest()[:12]}"
    marker = folder / COMPLETE
    if not marker.exists():
        folder.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--quiet",
                "--only-binary=:all:", "--implementation", "cp", "--python-version", python.version,
                "-d", str(folder)]
        for tag in platform_tags(python):
            argv += ["--platform", tag]
        log.info("downloading %s for %s", " ".join(reqs + optional), python)
        _pip_download(argv, reqs, python)
        if optional:
            _pip_download([*argv, "--no-deps"], optional, python)
        marker.write_text("\n".join(reqs + optional) + "\n")
    return sorted(folder.glob("*.whl"))


def _pip_download(argv: list[str], reqs: list[str], python: DevicePython) -> None:
    done = subprocess.run([*argv, *reqs], capture_output=True, text=True)
    if done.returncode != 0:
        reason = [line for line in done.stderr.splitlines() if line.startswith("ERROR")] or ["pip failed"]
        raise AiotError(f"no wheels for Python {python.version} on {python.machine}: {reason[0]}",
                        "check the network to PyPI, or install the runtimes on the device yourself")


def setup_device(transport: Transport, cache: Path,
                 on_step: Callable[[str], None] = lambda step: None,
                 extras: tuple[str, ...] = ()) -> dict:
    """Install the agent's runtimes (and optional ``extras``) on the device; returns what was
    installed.

    Raises:
        AiotError: the device cannot take Python wheels (phone, musl) or a step failed.
    """
    if transport.kind in NATIVE_ONLY:
        return setup_phone(transport, cache, on_step, extras)
    on_step("asking the device's Python")
    python = describe_python(transport)
    on_step(f"downloading wheels for Python {python.version} on {python.machine}")
    wheels = download_wheels(python, cache, extras)
    require_space(transport, sum(w.stat().st_size + _unpacked_bytes(w) for w in wheels),
                  f"{len(wheels)} wheels and their unpacked files")
    on_step(f"pushing {len(wheels)} wheels")
    pushed = [push_file(transport, wheel) for wheel in wheels]
    on_step("unpacking on the device")
    site = runtime_site(transport)
    unpack = transport.shell([transport.python(), "-c", UNPACK_SCRIPT, site, *(p.remote for p in pushed)],
                             timeout=600)
    if not unpack.ok:
        raise unpack_failure(transport, unpack)
    marker = transport.shell(["touch", posixpath.join(site, COMPLETE)])
    if not marker.ok:
        raise DeviceCommandError(transport.name, marker)
    return {"python": python.__dict__, "site": site,
            "requirements": requirements() + optional_requirements(python, extras),
            "wheels": [w.name for w in wheels], "sent_bytes": sum(p.size for p in pushed if p.sent)}


def _unpacked_bytes(wheel: Path) -> int:
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        return sum(info.file_size for info in archive.infolist())


def setup_phone(transport: Transport, cache: Path,
                on_step: Callable[[str], None] = lambda step: None,
                extras: tuple[str, ...] = ()) -> dict:
    """Give an Android phone aiot's aarch64 runtime and make it the device's agent Python.

    The runtime is cut from the arm64 userland of ``aiot emulator start --arch arm64`` (built
    once on this host), pushed as one content-addressed archive, checked by hash and unpacked
    on the phone; the inventory then names its ``bin/python3`` as the device's Python, so every
    command starts the agent through it. A second set-up sends nothing.

    Raises:
        AiotError: not an aarch64 phone, not in the inventory, or the runtime does not start.
    """
    from aiot.host.devices import android_runtime
    from aiot.host.devices import inventory
    from aiot.host.emulator import arm64

    machine = _phone_machine(transport)
    if machine != "aarch64":
        raise AiotError(f"'{transport.name}' is a {machine} device: aiot's phone runtime is "
                        "aarch64 (arm64-v8a)", "time this device with a native benchmark "
                        "binary (--native)")
    entries = inventory.load()
    if transport.name not in entries:
        raise AiotError(f"'{transport.name}' is not in the inventory, where its runtime is kept",
                        f"add it: aiot devices add {transport.name} --transport adb --serial SERIAL")
    on_step("building the aarch64 runtime (cached after the first time)")
    userland = arm64.ensure_userland(cache, on_step, extras)
    archive = android_runtime.archive_runtime(userland, cache, extras)
    installed = android_runtime.install_runtime(transport, archive, on_step)
    on_step("starting it on the phone")
    platform_line = android_runtime.check_runtime(
        transport, installed["python"], tuple(RUNTIME_MODULES) + _extra_modules(extras))
    entry = entries[transport.name]
    if entry.python != installed["python"]:
        from dataclasses import replace

        inventory.add(replace(entry, python=installed["python"]), replace=True)
    return {"runtime": android_runtime.RUNTIME_NAME, "runtime_sha256": archive.sha256,
            "python": installed["python"], "site": installed["root"],
            "platform": platform_line, "requirements": requirements() + [f"+{e}" for e in extras],
            "wheels": [], "pushed_bytes": installed["pushed_bytes"],
            "sent_bytes": installed["pushed_bytes"], "archive_bytes": archive.size_bytes,
            "tree_bytes": archive.tree_bytes, "files": archive.files,
            "seconds": installed["seconds"]}


def require_agent_python(transport: Transport) -> None:
    """Refuse, before any run is planned, a phone whose agent has no Python to start with.

    Only ADB devices are asked (one ``command -v``): phones have no Python until
    :func:`setup_phone`; boards say so in their own runs' errors.

    Raises:
        NoAgentPython: naming ``aiot devices setup NAME``.
    """
    from aiot.core.errors import NoAgentPython

    if transport.kind not in NATIVE_ONLY:
        return
    python = transport.python()
    found = transport.shell(["sh", "-c", f"command -v {quote(python)} >/dev/null"], timeout=60)
    if not found.ok:
        raise NoAgentPython(transport.name, python)


def _phone_machine(transport: Transport) -> str:
    """The phone's CPU architecture as its kernel reports it (``uname -m``)."""
    done = transport.shell(["uname", "-m"], timeout=60)
    if not done.ok or not done.stdout.strip():
        raise DeviceCommandError(transport.name, done)
    return done.stdout.strip().splitlines()[-1]


def _extra_modules(extras: tuple[str, ...]) -> tuple[str, ...]:
    """What the optional runtimes must import on the phone."""
    modules = {"torch": ("torch",), "executorch": ("executorch.runtime",)}
    return tuple(m for extra in extras for m in modules.get(extra, ()))
