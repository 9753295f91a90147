"""Which device a command talks to, and how to reach it."""

from __future__ import annotations

import os

from aiot.core import environment, notices
from aiot.core.errors import UnknownName
from aiot.host.devices import inventory
from aiot.host.devices.reachability import adb_states
from aiot.host.transports.adb import AdbTransport
from aiot.host.transports.base import Transport
from aiot.host.transports.local import LocalTransport
from aiot.host.transports.ssh import SshTransport

LOCAL = "local"
ANDROID_WORKDIR = "/data/local/tmp/aiot"  # the one place every app may write on a stock phone


def known_devices() -> list[str]:
    """Names of the devices aiot knows: the embedded ``local`` device and the inventory."""
    return [LOCAL, *sorted(inventory.load())]


def resolve_name(explicit: str | None) -> str:
    """Device choice: ``--device`` > ``$AIOT_DEVICE`` > ``$ANDROID_SERIAL`` > the embedded ``local``.

    ``ANDROID_SERIAL`` names an ADB serial; it resolves to the inventory entry with that serial,
    or to the serial itself.
    """
    if explicit:
        return explicit
    if environment.get("AIOT_DEVICE"):
        return environment.get("AIOT_DEVICE")
    serial = os.environ.get("ANDROID_SERIAL")
    if serial:
        by_serial = [e.name for e in inventory.load().values() if e.serial == serial]
        name = by_serial[0] if by_serial else serial
        notices.say(f"device {name}: from $ANDROID_SERIAL={serial} (--device or $AIOT_DEVICE "
                    "names another)")
        return name
    return LOCAL


def emulation_warning(devices) -> str | None:
    """One line for the devices of a run that aiot emulates (``aiot emulator start``), said
    before it starts: their timings are this host's (under qemu for an arm64 one), not a
    phone's or a board's. None when every device is real."""
    entries = inventory.load()
    emulated = [d for d in devices if d in entries and entries[d].labels.get("emulated")]
    if not emulated:
        return None
    qemu = [d for d in emulated if entries[d].labels.get("arch") == "arm64"]
    how = (f" ({', '.join(qemu)} under qemu: several times slower)" if qemu else "")
    return (f"{', '.join(emulated)}: emulated on this host{how}; their timings test the "
            "pipeline, they are not a phone's or a board's")


def transport_for(entry: inventory.DeviceEntry) -> Transport:
    """The Transport for an inventory entry (paramiko and adbutils are imported only when a
    transport connects)."""
    if entry.transport == "ssh":
        return SshTransport(entry)
    return AdbTransport.from_entry(entry)


def open_transport(name: str | None = None) -> Transport:
    """A Transport for ``name`` (see :func:`resolve_name`).

    Raises:
        UnknownName: no such device, with close matches.
    """
    name = resolve_name(name)
    if name == LOCAL:
        return LocalTransport()
    entry = inventory.load().get(name) or _connected_phone(name)
    if entry is None:
        raise UnknownName("device", name, known_devices())
    return transport_for(entry)


def _connected_phone(serial: str) -> inventory.DeviceEntry | None:
    """An ad-hoc entry for a device the adb server sees but the inventory does not list."""
    if serial not in adb_states():
        return None
    return inventory.DeviceEntry(name=serial, transport="adb", serial=serial, workdir=ANDROID_WORKDIR)
