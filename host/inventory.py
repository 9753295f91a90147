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

import os
import re
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aiot.host.errors import AiotError, UsageError
from aiot.host.fileio import write_text_atomic

TRANSPORTS = ("ssh", "adb")
_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
RESERVED = ("local",)


def check_name(name: str) -> str:
    """``name`` if it is a safe device name (also a folder name: no '/', '..', spaces or
    overlong names), else UsageError; returns it for chaining."""
    if not _NAME_OK.fullmatch(name) or name in RESERVED:
        # Shown on one line: control characters replaced, an overlong name cut.
        shown = "".join(c if c.isprintable() else "?" for c in name[:64])
        shown += "…" if len(name) > 64 else ""
        raise UsageError(f"invalid device name '{shown}'",
                         "use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or "
                         "digit (and not 'local')")
    return name


class InventoryError(AiotError):
    """The inventory file is unreadable or holds an invalid entry."""


def config_dir() -> Path:
    """``$XDG_CONFIG_HOME/aiot`` (default ``~/.config/aiot``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "aiot"


def inventory_path() -> Path:
    """Where the inventory lives (``$AIOT_INVENTORY`` overrides)."""
    return Path(os.environ.get("AIOT_INVENTORY") or config_dir() / "devices.toml")


@dataclass(frozen=True)
class DeviceEntry:
    """One inventoried device."""

    name: str
    transport: str
    workdir: str
    serial: str | None = None
    host: str | None = None
    port: int | None = None
    user: str | None = None
    key: str | None = None
    known_hosts: str | None = None
    python: str = "python3"
    labels: dict[str, str] = field(default_factory=dict)
    binaries: dict[str, str] = field(default_factory=dict)  # native tool -> local path

    def validate(self) -> DeviceEntry:
        """Raise UsageError naming the first problem; returns self."""
        check_name(self.name)
        if self.transport not in TRANSPORTS:
            raise UsageError(f"device '{self.name}': unknown transport '{self.transport}'",
                             f"use one of {', '.join(TRANSPORTS)}")
        if self.transport == "ssh" and not (self.host and self.user):
            raise UsageError(f"ssh device '{self.name}' needs --host and --user")
        if self.transport == "adb" and not self.serial:
            raise UsageError(f"adb device '{self.name}' needs --serial")
        if self.port is not None and not 0 < int(self.port) < 65536:
            raise UsageError(f"device '{self.name}': port {self.port} is out of range")
        if not self.workdir.startswith("/"):
            raise UsageError(f"device '{self.name}': workdir must be an absolute path")
        if self.binaries:
            from aiot.host.native.config import binaries_from_table

            binaries_from_table(self.binaries, f"device '{self.name}'")  # known tools, paths
        return self

    def to_toml(self) -> dict:
        data = {k: v for k, v in asdict(self).items() if v not in (None, {}) and k != "name"}
        return data


def load(path: Path | None = None) -> dict[str, DeviceEntry]:
    """All inventoried devices by name (an absent file is an empty inventory)."""
    path = path or inventory_path()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InventoryError(f"inventory {path} is unreadable: {exc}",
                             "fix or move the file; `aiot devices add` recreates it") from None
    devices = {}
    for name, table in (raw.get("devices") or {}).items():
        try:
            devices[name] = DeviceEntry(name=name, **table).validate()
        except (TypeError, UsageError) as exc:
            detail = exc.message if isinstance(exc, UsageError) else str(exc)
            raise InventoryError(f"inventory {path}: device '{name}': {detail}") from None
    return devices


def save(devices: dict[str, DeviceEntry], path: Path | None = None) -> None:
    """Write the inventory atomically."""
    import tomli_w

    path = path or inventory_path()
    doc = {"devices": {name: e.to_toml() for name, e in sorted(devices.items())}}
    write_text_atomic(path, tomli_w.dumps(doc))


def add(entry: DeviceEntry, replace: bool = False, path: Path | None = None) -> None:
    """Add (or with ``replace`` overwrite) one device."""
    entry.validate()
    if entry.transport == "ssh" and entry.key:
        from aiot.host.errors import TransportError
        from aiot.host.transports.ssh import check_key_file

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
    from aiot.host.errors import UnknownName

    devices = load(path)
    if name not in devices:
        raise UnknownName("device", name, devices)
    entry = devices.pop(name)
    save(devices, path)
    return entry
