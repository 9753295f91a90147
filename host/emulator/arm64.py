"""An emulated arm64 board: a Debian aarch64 userland run by qemu-user on this machine.

``aiot emulator start ssh|adb --arch arm64`` gives the emulated device an aarch64 CPython
(bookworm's, unpacked by ``mmdebstrap --variant=extract``) with aarch64 manylinux wheels of
the agent's runtimes, executed by ``qemu-aarch64-static``. The device's ``python3`` is a
small wrapper that starts it in a private mount namespace where ``/proc/cpuinfo`` describes an
aarch64 CPU: under qemu-user the guest otherwise reads the host's x86 cpuinfo, and
onnxruntime and LiteRT (through pytorch/cpuinfo) crash on it.

The userland is cached under ``<cache>/arm64-userland/<key>``, keyed by the Debian suite, its
packages and the runtime versions, so only the first start downloads anything. Timings under
emulation say nothing about ARM hardware (kernels run hundreds of times slower); such a
device is for correctness and for comparing outputs of one artifact across architectures.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from aiot.core.errors import AiotError
from aiot.core.fileio import staged_folder
from aiot.host.devices.wheels import (
    FACTS_SCRIPT,
    UNPACK_SCRIPT,
    build_lock,
    debian_mirror,
    download_wheels,
    parse_facts,
    requirements,
)
from aiot.host.transports.quoting import quote

log = logging.getLogger(__name__)

SUITE = "bookworm"
#: Enough Debian for numpy, onnxruntime and LiteRT: the interpreter, its stdlib, libstdc++.
PACKAGES = ("python3.11-minimal", "libpython3.11-stdlib", "libstdc++6")
GUEST_PYTHON = "/usr/bin/python3.11"
#: Where the runtimes go inside the userland: a folder Debian's Python has on sys.path.
GUEST_SITE = "usr/lib/python3/dist-packages"
TOOLS = {"qemu-aarch64-static": "qemu-user-static", "mmdebstrap": "mmdebstrap", "unshare": "util-linux"}
COMPLETE = ".complete"
#: Cores the fake cpuinfo describes; Cortex-A76 (part 0xd0b) as in a Raspberry Pi 5.
CORES = 4
#: The CPU qemu emulates, the one the fake cpuinfo describes, so the instructions the
#: runtimes pick from the hardware capabilities are those of a real board. qemu-user's
#: default, "max", offers every extension it knows, and under qemu 7.2 XNNPACK's int8
#: kernels chosen for it computed other outputs than on x86_64 and than the same build's
#: reference kernels (an int8 .tflite's outputs differed by up to 144 of 255 steps); with
#: Cortex-A76 all three agree.
QEMU_CPU = "cortex-a76"

_CPU_BLOCK = """processor\t: {n}
BogoMIPS\t: 108.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x4
CPU part\t: 0xd0b
CPU revision\t: 1

"""

_WRAPPER = """#!/bin/sh
# python3 of an aiot emulated arm64 device: aarch64 CPython under qemu-user, in a private
# mount namespace whose /proc/cpuinfo describes an aarch64 CPU (the host's x86 one crashes
# onnxruntime and LiteRT). exec all the way down, so the PID a caller sees is qemu's.
# The agent's session keeps the runtimes it imported for its children: under qemu an
# import is most of a run's CPU (torch ~20 s), and the timings here are the host's anyway.
export AIOT_AGENT_PRELOAD=1
exec unshare {unshare_flags} sh -c 'mount --bind "$1" /proc/cpuinfo && shift && exec "$@"' \\
  sh {cpuinfo} {qemu} -cpu {cpu} -L {root} {root}{python} "$@"
"""


def cpuinfo_text(cores: int = CORES) -> str:
    """A ``/proc/cpuinfo`` of an aarch64 CPU with ``cores`` cores."""
    return "".join(_CPU_BLOCK.format(n=n) for n in range(cores))


def missing_tools() -> list[str]:
    """Debian packages to install before arm64 emulation works (empty when all are there)."""
    return sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})


def check_tools() -> None:
    """Raise AiotError naming the packages to install, if any tool is missing."""
    missing = missing_tools()
    if missing:
        raise AiotError(f"arm64 emulation needs {', '.join(missing)}, which is not installed",
                        f"run: apt-get install {' '.join(missing)}  (or scripts/bootstrap.sh)")


def userland_key(requirements: list[str]) -> str:
    """Cache key of a userland: what it is built from."""
    facts = [SUITE, list(PACKAGES), requirements, CORES]
    return hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:16]


def write_wrapper(path: Path, userland: Path) -> Path:
    """Write the device's ``python3`` wrapper for ``userland`` at ``path`` (made executable)."""
    # Root can mount in a new mount namespace; anyone else needs a user namespace for it.
    flags = "--mount" if os.geteuid() == 0 else "--mount --map-root-user"
    path.write_text(_WRAPPER.format(unshare_flags=flags, cpuinfo=quote(str(userland / "cpuinfo")),
                                    qemu=quote(shutil.which("qemu-aarch64-static") or "qemu-aarch64-static"),
                                    root=quote(str(userland / "root")), python=GUEST_PYTHON,
                                    cpu=QEMU_CPU))
    path.chmod(0o755)
    return path


def ensure_userland(cache: Path, on_step: Callable[[str], None] = lambda step: None,
                    extras: tuple[str, ...] = ()) -> Path:
    """The cached aarch64 userland with the runtimes (and optional ``extras``, e.g. torch)
    installed; built on first use.

    Built in a temporary folder beside the cache entry and renamed into place when complete,
    so an interrupted build never leaves a half userland that a later start would trust; under
    :func:`~aiot.host.devices.wheels.build_lock`, so processes sharing the cache build it once.
    """
    check_tools()
    extras = tuple(sorted(set(extras)))
    folder = cache / "arm64-userland" / userland_key(requirements() + [f"+{e}" for e in extras])
    if (folder / COMPLETE).exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with build_lock(folder):
        if not (folder / COMPLETE).exists():
            _build_userland(folder, cache, on_step, extras)
    return folder


def _build_userland(folder: Path, cache: Path, on_step: Callable[[str], None], extras: tuple[str, ...]) -> None:
    with staged_folder(folder, prefix=".building-") as work:
        on_step(f"unpacking Debian {SUITE} arm64 (python3.11)")
        _debootstrap(work / "root")
        (work / "cpuinfo").write_text(cpuinfo_text())
        on_step("downloading aarch64 wheels of the runtimes" + (f" (+{', '.join(extras)})" if extras else ""))
        _install_runtimes(work, cache, extras)
        (work / COMPLETE).write_text(json.dumps({"suite": SUITE, "packages": PACKAGES,
                                                 "requirements": requirements(), "extras": extras}) + "\n")


def prepare_device(folder: Path, cache: Path, on_step: Callable[[str], None] = lambda step: None,
                   extras: tuple[str, ...] = ()) -> Path:
    """Give the emulator in ``folder`` an aarch64 ``bin/python3``; returns its path."""
    userland = ensure_userland(cache, on_step, extras)
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    return write_wrapper(bin_dir / "python3", userland)


LABELS = {"arch": "arm64", "cpu": "aarch64 under qemu-user: outputs are real, timings are not"}


def _debootstrap(root: Path) -> None:
    argv = ["mmdebstrap", "--variant=extract", "--architectures=arm64", f"--include={','.join(PACKAGES)}",
            SUITE, str(root), f"deb {debian_mirror()} {SUITE} main"]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.startswith("E:")] or ["mmdebstrap failed"]
        raise AiotError(f"could not build the arm64 userland: {errors[-1]}",
                        "check that this machine reaches its Debian mirror (AIOT_DEBIAN_MIRROR overrides it)")


def _install_runtimes(work: Path, cache: Path, extras: tuple[str, ...] = ()) -> None:
    """aarch64 wheels matching the guest Python, unpacked natively into its site folder."""
    wrapper = write_wrapper(work / "python3", work)
    facts = subprocess.run([str(wrapper), "-c", FACTS_SCRIPT], capture_output=True, text=True, timeout=120)
    if facts.returncode != 0:
        raise AiotError(f"the emulated aarch64 Python does not start: {facts.stderr.strip()[-300:]}",
                        "check that qemu-user-static is installed and unshare may create mount namespaces")
    python = parse_facts(facts.stdout)
    wheels = download_wheels(python, cache, extras)
    # The same unpacking the device does in `aiot devices setup`, run here at native speed.
    site = work / "root" / GUEST_SITE
    done = subprocess.run([sys.executable, "-c", UNPACK_SCRIPT, str(site), *map(str, wheels)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise AiotError(f"could not unpack the aarch64 wheels: {done.stderr.strip().splitlines()[-1:]}")
    wrapper.unlink()


__all__ = ["LABELS", "check_tools", "cpuinfo_text", "ensure_userland", "missing_tools", "prepare_device",
           "write_wrapper"]
