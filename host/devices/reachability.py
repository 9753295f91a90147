"""A quick, side-effect-free state for each device in ``aiot devices list``."""

from __future__ import annotations

import socket

from aiot.host.devices.entry import DeviceEntry


def ssh_state(entry: DeviceEntry, timeout: float = 1.0) -> str:
    """``online`` if the SSH port accepts a TCP connection, else ``unreachable``.

    The full check (host key, login) is ``aiot devices info``; listing stays fast.
    """
    try:
        with socket.create_connection((entry.host, entry.port or 22), timeout=timeout):
            return "online"
    except OSError:
        return "unreachable"


# adb's own words for a device state, in the words `aiot devices list` uses for every transport.
_ADB_STATE = {"device": "online", "offline": "offline", "unauthorized": "unauthorized"}


def adb_states(adb_port: int | None = None) -> dict[str, str]:
    """``{serial: state}`` (online, offline, unauthorized, ...) from a running adb server.

    Empty when no server runs: listing devices never starts one, so it does not change the machine.
    """
    import os

    port = adb_port or int(os.environ.get("ANDROID_ADB_SERVER_PORT", "5037"))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.3):
            pass
    except OSError:
        return {}
    try:
        import adbutils
    except ImportError:
        return {}
    try:
        client = adbutils.AdbClient(host="127.0.0.1", port=port)
        return {d.serial: _ADB_STATE.get(d.state, d.state) for d in client.list()}
    except Exception:  # a confused server must not break `devices list`
        return {}
