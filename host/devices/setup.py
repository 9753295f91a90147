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

import posixpath
import zipfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from aiot.core.errors import AiotError, DeviceCommandError, NoAgentPython
from aiot.host.devices import android_runtime, inventory
from aiot.host.devices.deploy import push_file, require_space, unpack_failure
from aiot.host.devices.wheels import (
    COMPLETE,
    FACTS_SCRIPT,
    RUNTIME_MODULES,
    UNPACK_SCRIPT,
    DevicePython,
    download_wheels,
    optional_requirements,
    parse_facts,
    requirements,
)
from aiot.host.transports.base import Transport
from aiot.host.transports.quoting import quote

NATIVE_ONLY = ("adb",)  # transports whose devices have no Python: aiot pushes its own


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


def setup_device(transport: Transport, cache: Path,
                 on_step: Callable[[str], None] = lambda step: None,
                 extras: tuple[str, ...] = (), userland=None) -> dict:
    """Install the agent's runtimes (and optional ``extras``) on the device; returns what was
    installed. ``userland``: what builds a phone's runtime (:func:`setup_phone`).

    Raises:
        AiotError: the device cannot take Python wheels (phone, musl) or a step failed.
    """
    if transport.kind in NATIVE_ONLY:
        return setup_phone(transport, cache, on_step, extras, userland)
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
    with zipfile.ZipFile(wheel) as archive:
        return sum(info.file_size for info in archive.infolist())


def setup_phone(transport: Transport, cache: Path,
                on_step: Callable[[str], None] = lambda step: None,
                extras: tuple[str, ...] = (), userland=None) -> dict:
    """Give an Android phone aiot's aarch64 runtime and make it the device's agent Python.

    The runtime is cut from the arm64 userland of ``aiot emulator start --arch arm64`` (built
    once on this host), pushed as one content-addressed archive, checked by hash and unpacked
    on the phone; the inventory then names its ``bin/python3`` as the device's Python, so every
    command starts the agent through it. A second set-up sends nothing. ``userland`` builds
    that userland, ``(cache, on_step, extras) -> folder``: the CLI passes
    :func:`aiot.host.emulator.arm64.ensure_userland` (the emulators sit above the devices).

    Raises:
        AiotError: not an aarch64 phone, not in the inventory, or the runtime does not start.
    """
    machine = _phone_machine(transport)
    if machine != "aarch64":
        raise AiotError(f"'{transport.name}' is a {machine} device: aiot's phone runtime is "
                        "aarch64 (arm64-v8a)", "time this device with a native benchmark "
                        "binary (--native)")
    entries = inventory.load()
    if transport.name not in entries:
        raise AiotError(f"'{transport.name}' is not in the inventory, where its runtime is kept",
                        f"add it: aiot devices add {transport.name} --transport adb --serial SERIAL")
    if userland is None:
        raise AiotError("setting up a phone needs the arm64 userland its runtime is cut from",
                        f"run: aiot devices setup {transport.name}")
    on_step("building the aarch64 runtime (cached after the first time)")
    root = userland(cache, on_step, extras)
    archive = android_runtime.archive_runtime(root, cache, extras)
    installed = android_runtime.install_runtime(transport, archive, on_step)
    on_step("starting it on the phone")
    platform_line = android_runtime.check_runtime(
        transport, installed["python"], tuple(RUNTIME_MODULES) + _extra_modules(extras))
    entry = entries[transport.name]
    if entry.python != installed["python"]:
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
