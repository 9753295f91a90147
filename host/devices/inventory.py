"""The device inventory: a TOML file of named devices and how to reach them.

Location: ``$AIOT_INVENTORY``, else ``$XDG_CONFIG_HOME/aiot/devices.toml`` (default
``~/.config/aiot/devices.toml``). One table per device::

    [devices.pi4]
    transport = "ssh"           # ssh | adb
    host = "192.168.1.20"       # ssh
    port = 22
    user = "pi"
    key = "~/.ssh/id_ed25519"
    workdir = "/home/pi/aiot"
    python = "python3"
    [devices.pi4.labels]
    soc = "BCM2711"

    [devices.pixel]
    transport = "adb"
    serial = "1A2B3C4D"
    workdir = "/data/local/tmp/aiot"
"""

from __future__ import annotations

import tomllib
from dataclasses import MISSING, fields
from pathlib import Path

from aiot.core.errors import TransportError, UnknownName, UsageError
from aiot.core.fileio import write_text_atomic
from aiot.host.devices.entry import DeviceEntry, InventoryError, inventory_path
from aiot.host.transports.ssh import check_key_file

__all__ = ["DeviceEntry", "InventoryError", "add", "inventory_path", "load", "remove", "save"]


def load(path: Path | None = None) -> dict[str, DeviceEntry]:
    """All inventoried devices by name (an absent file is an empty inventory).

    Raises:
        InventoryError: the file is unreadable, not of the inventory's shape (``devices`` not
            a table of tables), or an entry lacks a key, has an unknown one or a wrong type.
    """
    path = path or inventory_path()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InventoryError(f"inventory {path} is unreadable: {exc}", _FIX_HINT.format(path=path)) from None
    tables = raw.get("devices") or {}
    if not isinstance(tables, dict):
        raise InventoryError(f"inventory {path}: 'devices' is {_toml_type(tables)}, not a table "
                             "of devices ([devices.NAME] sections)", _FIX_HINT.format(path=path))
    devices = {}
    for name, table in tables.items():
        try:
            devices[name] = _checked(_entry(name, table))
        except UsageError as exc:
            raise InventoryError(f"inventory {path}: device '{_shown(name)}': {exc.message}",
                                 f"fix or remove [devices.{_shown(name)}] in {path}") from None
    return devices


#: The hint for an inventory aiot cannot use: ``devices add`` refuses to overwrite it too.
_FIX_HINT = "fix the file, or move it away ({path}.bad) and add the devices again with aiot devices add"


def _shown(name: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in str(name)[:64])


def _toml_type(value) -> str:
    names = {str: "a string", bool: "a boolean", int: "an integer", float: "a float",
             list: "an array", dict: "a table"}
    return names.get(type(value), f"a {type(value).__name__}")


#: What each key of a device table must be (TOML types), from :class:`DeviceEntry`'s fields.
_KEY_TYPES = {"port": (int,), "labels": (dict,), "binaries": (dict,)}


def _entry(name: str, table) -> DeviceEntry:
    """The :class:`DeviceEntry` of one ``[devices.NAME]`` table; UsageError naming a missing or
    unknown key or a value of the wrong type (never a Python signature)."""
    if not isinstance(table, dict):
        raise UsageError(f"is {_toml_type(table)}, not a table of settings")
    known = {f.name: f for f in fields(DeviceEntry) if f.name != "name"}
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise UsageError(f"unknown key(s) {', '.join(map(_shown, unknown))} "
                         f"(known: {', '.join(known)})")
    missing = [k for k, f in known.items()
               if k not in table and f.default is MISSING and f.default_factory is MISSING]
    if missing:
        raise UsageError(f"lacks the key(s) {', '.join(missing)}")
    for key, value in table.items():
        wanted = _KEY_TYPES.get(key, (str,))
        if isinstance(value, bool) or not isinstance(value, wanted):
            raise UsageError(f"'{key}' is {_toml_type(value)}, not "
                             f"{' or '.join(_toml_type(t()) for t in wanted)}")
        if isinstance(value, dict) and not all(isinstance(v, str) for v in value.values()):
            raise UsageError(f"'{key}' must map names to strings")
    return DeviceEntry(name=name, **table)


def _checked(entry: DeviceEntry) -> DeviceEntry:
    """``entry`` validated. Its ``binaries`` table is one of path strings (:func:`_entry`);
    whether its keys name native tools is the native tools' check, made where a run looks its
    tool up (:func:`aiot.host.native.config.binaries_from_table`): the inventory sits below them."""
    entry.validate()
    return entry


def save(devices: dict[str, DeviceEntry], path: Path | None = None) -> None:
    """Write the inventory atomically."""
    import tomli_w

    path = path or inventory_path()
    doc = {"devices": {name: e.to_toml() for name, e in sorted(devices.items())}}
    write_text_atomic(path, tomli_w.dumps(doc))


def add(entry: DeviceEntry, replace: bool = False, path: Path | None = None) -> None:
    """Add (or with ``replace`` overwrite) one device."""
    _checked(entry)
    if entry.transport == "ssh" and entry.key:
        try:  # a missing or garbage key is refused now, not at the first run
            check_key_file(entry)
        except TransportError as exc:  # here it is the user's input: exit 2
            raise UsageError(exc.message, exc.hint) from None
    devices = load(path)
    if entry.name in devices and not replace:
        raise UsageError(f"device '{entry.name}' is already in the inventory",
                         "remove it first or pass --replace")
    devices[entry.name] = entry
    save(devices, path)


def remove(name: str, path: Path | None = None) -> DeviceEntry:
    """Remove one device; UnknownName if it is not there."""
    devices = load(path)
    if name not in devices:
        raise UnknownName("device", name, devices)
    entry = devices.pop(name)
    save(devices, path)
    return entry
