"""Start, list and stop emulated devices; each one is also an inventory entry."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from aiot.core import arch as arch_names
from aiot.core.errors import UnknownName, UsageError
from aiot.core.paths import cache_dir
from aiot.host.devices import inventory
from aiot.host.devices.entry import check_name
from aiot.host.devices.wheels import OPTIONAL_RUNTIMES
from aiot.host.emulator import android
from aiot.host.emulator.adb import release_server, start_adb_device, start_android_phone
from aiot.host.emulator.arm64 import LABELS, prepare_device
from aiot.host.emulator.ssh import remove_folder, start_sshd
from aiot.host.emulator.state import EmulatorState, emulators_dir, load_all
from aiot.host.transports.adb import forget_tcp

KINDS = ("ssh", "adb")
ARCHES = ("x86_64", "arm64")


def _default_name(kind: str) -> str:
    taken = {s.name for s in load_all()} | set(inventory.load())
    n = 1
    while f"emu-{kind}-{n}" in taken:
        n += 1
    return f"emu-{kind}-{n}"


def _native_arch() -> str:
    return arch_names.option_name(arch_names.native())


def start(kind: str, name: str | None = None, arch: str | None = None,
          on_step: Callable[[str], None] = lambda step: None,
          extras: tuple[str, ...] = (), profile: str = "linux",
          props: Path | None = None) -> EmulatorState:
    """Start an emulated device in the background and add it to the inventory.

    ``arch`` other than this machine's runs the device's Python under qemu-user (arm64 only;
    see :mod:`aiot.host.emulator.arm64`); its first start builds a cached aarch64 userland.
    ``profile="android"`` (adb, arm64) is a phone without Python instead (see
    :mod:`aiot.host.emulator.android`); ``props`` a ``getprop`` dump it answers with.
    """
    if kind not in KINDS:
        raise UsageError(f"unknown emulator kind '{kind}'", f"use one of {', '.join(KINDS)}")
    if name is not None:
        # The name becomes a folder and an adb/inventory entry: refuse it before anything
        # (folders, servers, adb connections) exists that a late refusal would leave behind.
        check_name(name)
    phone_props = _phone_props(kind, arch, profile, props, extras)
    if phone_props is not None:
        arch = "arm64"
    arch = arch_names.option_name(arch) if arch else _native_arch()
    if arch not in ARCHES:
        raise UsageError(f"unknown --arch '{arch}'", f"use one of {', '.join(ARCHES)}")
    if arch != _native_arch() and arch != "arm64":
        raise UsageError(f"--arch {arch} cannot be emulated on this {_native_arch()} machine",
                         f"use --arch {_native_arch()} or arm64")
    unknown = [e for e in extras if e not in OPTIONAL_RUNTIMES]
    if unknown:
        raise UsageError(f"unknown optional runtime '{unknown[0]}'", f"known: {', '.join(OPTIONAL_RUNTIMES)}")
    if extras and arch == _native_arch():
        raise UsageError("--with adds runtimes to an emulated arm64 userland",
                         "a native emulator runs aiot's own Python, which has them already")
    name = name or _default_name(kind)
    existing = inventory.load()
    if name in existing:
        raise UsageError(f"device '{name}' is already in the inventory", "choose another --name")
    folder = emulators_dir() / name
    if folder.exists():
        raise UsageError(f"emulator folder {folder} already exists", f"run: aiot emulator stop {name}")
    folder.mkdir(parents=True)
    proc = port = None
    try:
        python = None
        if phone_props is not None:
            on_step("building the phone's root (busybox as toybox, getprop, /data/local/tmp)")
            proc, port, entry = start_android_phone(name, folder, cache_dir(), phone_props)
            return _register(EmulatorState(name=name, kind=kind, arch=arch, pid=proc.pid, port=port,
                                           folder=str(folder), extra={"profile": "android"}), entry)
        if arch != _native_arch():
            python = str(prepare_device(folder, cache_dir(), on_step, extras))
        on_step(f"starting the {kind} server")
        proc, port, entry = _start_server(kind, name, folder, python, arch)
        if python is not None:
            entry.labels.update(LABELS)
        return _register(EmulatorState(name=name, kind=kind, arch=arch, pid=proc.pid, port=port,
                                       folder=str(folder)), entry)
    except BaseException:
        # Half-started emulators leave nothing behind: no process, no folder, no entry, no
        # adb server entry retrying a dead port.
        if proc is not None:
            proc.kill()
        if kind == "adb" and port is not None:
            forget_tcp(f"127.0.0.1:{port}")
        remove_folder(folder)
        raise


def _register(state: EmulatorState, entry) -> EmulatorState:
    state.save()
    inventory.add(entry)
    return state


def _phone_props(kind: str, arch: str | None, profile: str, props: Path | None,
                 extras: tuple[str, ...]) -> dict[str, str] | None:
    """The properties of an Android phone to emulate, or None for a Linux device."""
    if profile not in android.PROFILES:
        raise UsageError(f"unknown --profile '{profile}'", f"use one of {', '.join(android.PROFILES)}")
    if profile == "linux":
        if props is not None:
            raise UsageError("--props describes an Android phone", "add --profile android")
        return None
    if kind != "adb" or (arch and arch_names.option_name(arch) != "arm64"):
        raise UsageError("--profile android is an ADB device with an arm64 CPU",
                         "run: aiot emulator start adb --arch arm64 --profile android")
    if extras:
        raise UsageError("an emulated phone has no runtimes of its own to add --with to",
                         "give them to its set-up: aiot devices setup NAME --with "
                         + ",".join(extras))
    return android.read_props_file(props) if props is not None else dict(android.DEFAULT_PROPS)


def _start_server(kind: str, name: str, folder, python: str | None, arch: str):
    if kind == "ssh":
        return start_sshd(name, folder, python=python)
    return start_adb_device(name, folder, python=python, machine=arch_names.canonical(arch))


def running() -> list[dict]:
    """Every known emulator with its state (running or dead)."""
    return [{"name": s.name, "kind": s.kind, "arch": s.arch, "profile": s.extra.get("profile", "linux"),
             "port": s.port, "pid": s.pid, "state": "running" if s.alive() else "dead",
             "folder": s.folder} for s in load_all()]


def stop(name: str) -> EmulatorState:
    """Stop emulator ``name``, remove it from the inventory and delete its files."""
    states = {s.name: s for s in load_all()}
    if name not in states:
        raise UnknownName("emulator", name, states)
    state = states[name]
    state.terminate()
    if state.kind == "adb":
        forget_tcp(f"127.0.0.1:{state.port}")  # or the adb server keeps retrying it
        others = [s for s in states.values() if s.kind == "adb" and s.name != name and s.alive()]
        stopped = release_server(len(others))
        if stopped is not None:  # the server aiot started for the emulators: none is left
            state.extra["adb_server_stopped"] = stopped
    if name in inventory.load():
        inventory.remove(name)
    remove_folder(emulators_dir() / name)
    return state
