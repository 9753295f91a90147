"""An emulated ADB device: aiot's adbd on a loopback port, attached to the real adb server.

The device is reached exactly like a phone in wireless debugging: the adb server connects to
``127.0.0.1:PORT`` and everything (adbutils, the ``adb`` CLI, aiot) goes through the server.
Shell commands run on this machine, with a ``getprop`` stand-in first on ``PATH`` that
answers with the properties below; the device's workdir is a folder of the emulator.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from aiot.core import arch
from aiot.core.paths import state_dir
from aiot.host.devices.entry import DeviceEntry
from aiot.host.emulator import android
from aiot.host.emulator.ssh import free_port, wait_for_port
from aiot.host.transports import adb as adb_transport

# The adb server probes 127.0.0.1:5555..5585 on start and grabs anything there as an
# "emulator-NNNN"; our devices stay outside that range and are connected explicitly.
_SERVER_SCAN = range(5554, 5587)

_GETPROP = """#!/bin/sh
# getprop stand-in of an aiot emulated ADB device: no argument lists all, one prints one value.
props="$(dirname "$0")/../props.txt"
if [ $# -eq 0 ]; then cat "$props"; exit 0; fi
while IFS= read -r line; do
  case "$line" in "[$1]: ["*) v=${line#"[$1]: ["}; printf '%s\\n' "${v%]}"; exit 0;; esac
done < "$props"
echo
"""


def device_props(name: str, machine: str | None = None) -> dict[str, str]:
    """What ``getprop`` answers on the emulated device; honest about being an emulator.

    ``machine`` is the CPU architecture its programs run as (this machine's by default).
    """
    machine = arch.canonical(machine) if machine else arch.native()
    return {
        "ro.product.name": "aiot_emulated",
        "ro.product.model": f"aiot-adbd {name}",
        "ro.product.device": "aiot_emulated",
        "ro.product.manufacturer": "aiot (emulated)",
        "ro.product.cpu.abi": arch.android_abi(machine),
        "ro.hardware": machine,
        "ro.aiot.emulated": "1",
    }


def _free_port_outside_scan() -> int:
    while True:
        port = free_port()
        if port not in _SERVER_SCAN:
            return port


def write_device_files(folder: Path, name: str, machine: str | None = None) -> None:
    """``props.txt`` and ``bin/getprop`` for the emulator in ``folder``."""
    props = device_props(name, machine)
    (folder / "props.txt").write_text("".join(f"[{k}]: [{v}]\n" for k, v in sorted(props.items())))
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "getprop").write_text(_GETPROP)
    (bin_dir / "getprop").chmod(0o755)


def launch_adbd(folder: Path, port: int, auth_keys: Path | None = None,
                shell_v2: bool = True) -> subprocess.Popen:
    """Start the adbd process for ``folder`` on ``port`` and wait until it listens.

    A folder with ``enter.sh`` is an emulated Android phone: commands run inside its ``root``.
    """
    argv = [sys.executable, "-m", "aiot.host.emulator.adbd", "--port", str(port),
            "--props", str(folder / "props.txt")]
    if (folder / "enter.sh").exists():
        argv += ["--root", str(folder / "root"), "--enter", str(folder / "enter.sh")]
    else:
        argv += ["--bin", str(folder / "bin")]
    if auth_keys is not None:
        argv += ["--auth-keys", str(auth_keys)]
    if not shell_v2:
        argv.append("--no-shell-v2")
    log = open(folder / "adbd.log", "ab")
    proc = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    wait_for_port(port, 15, proc)
    return proc


def start_adb_device(name: str, folder: Path, port: int | None = None, auth_keys: Path | None = None,
                     shell_v2: bool = True, python: str | None = None,
                     machine: str | None = None) -> tuple[subprocess.Popen, int, DeviceEntry]:
    """Start emulator ``name`` in ``folder``; returns (process, port, inventory entry).

    ``python`` is the device's agent Python and ``machine`` its CPU architecture (this
    machine's by default); an emulated arm64 device passes its aarch64 ``bin/python3``, which
    is then also the ``python3`` first on the device shell's PATH.
    The device is connected to the adb server (started if needed) before this returns.
    """
    write_device_files(folder, name, machine)
    workdir = folder / "fs" / "data" / "local" / "tmp" / "aiot"
    workdir.mkdir(parents=True, exist_ok=True)
    proc, port, serial = _serve(folder, port, auth_keys, shell_v2)
    entry = DeviceEntry(
        name=name, transport="adb", serial=serial, workdir=str(workdir),
        # The emulated device runs on this machine, so its agent uses this Python and runtimes.
        python=python or sys.executable,
        labels={"emulated": "adb", "board": "aiot emulator (adbd on loopback via the adb server)"},
    )
    return proc, port, entry


def start_android_phone(name: str, folder: Path, cache: Path, props: dict[str, str],
                        port: int | None = None) -> tuple[subprocess.Popen, int, DeviceEntry]:
    """Start an emulated Android phone ``name`` in ``folder`` (see
    :mod:`aiot.host.emulator.android`); returns (process, port, inventory entry).

    The entry names no Python the phone has: ``aiot devices setup NAME`` pushes aiot's runtime
    and records its ``bin/python3``, as for a real phone.
    """
    (folder / "props.txt").write_text("".join(f"[{k}]: [{v}]\n" for k, v in sorted(props.items())))
    android.check_phone(android.build_phone(folder, cache, props))
    proc, port, serial = _serve(folder, port)
    entry = DeviceEntry(name=name, transport="adb", serial=serial, workdir=android.WORKDIR,
                        labels=android.describe(props))
    return proc, port, entry


def _serve(folder: Path, port: int | None, auth_keys: Path | None = None,
           shell_v2: bool = True) -> tuple[subprocess.Popen, int, str]:
    """adbd for ``folder`` on ``port`` (a free one by default), connected to the adb server
    (started if none runs; :func:`release_server` stops it again with the last emulator)."""
    port = port or _free_port_outside_scan()
    proc = launch_adbd(folder, port, auth_keys, shell_v2)
    serial = f"127.0.0.1:{port}"
    starts_server = not adb_transport.server_running()
    try:
        adb_transport.connect_tcp(serial)
    except BaseException:
        proc.kill()
        raise
    if starts_server:
        _server_marker().parent.mkdir(parents=True, exist_ok=True)
        _server_marker().write_text("started by aiot emulator start\n", encoding="utf-8")
    return proc, port, serial


def _server_marker() -> Path:
    """Says that aiot started the adb server on this port for an emulator (state dir)."""
    return state_dir() / f"adb-server-{adb_transport.server_port()}.started"


def release_server(other_emulators: int) -> int | None:
    """Stop the adb server an emulator start started, once no emulator uses it
    (``other_emulators`` adb emulators still run) and it serves no other device (a phone
    plugged in since keeps it); returns its port when it was stopped. A server the user
    started is never stopped."""
    marker = _server_marker()
    if not marker.exists():
        return None
    if not adb_transport.server_running():
        marker.unlink(missing_ok=True)
        return None
    if other_emulators or adb_transport.device_states():
        return None
    try:
        adb_transport.client().server_kill()
    except Exception:  # noqa: BLE001 - adbutils reads the closed socket as an error
        pass
    marker.unlink(missing_ok=True)
    return adb_transport.server_port()


__all__ = ["device_props", "launch_adbd", "release_server", "start_adb_device",
           "start_android_phone", "write_device_files"]
