"""One inventoried device (:class:`DeviceEntry`): its name, how to reach it, where its files go;
and where the inventory file lives.

The transports need only this; reading and writing the inventory file is
:mod:`aiot.host.devices.inventory`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aiot.core import environment
from aiot.core.errors import AiotError, UsageError
from aiot.core.paths import config_dir

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


def inventory_path() -> Path:
    """Where the inventory lives (``$AIOT_INVENTORY`` overrides)."""
    return Path(environment.get("AIOT_INVENTORY") or config_dir() / "devices.toml")


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
        """Raise UsageError naming the first problem; returns self. (The ``binaries`` table is
        checked where entries are read and added: :mod:`aiot.host.devices.inventory`.)"""
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
        return self

    def to_toml(self) -> dict:
        data = {k: v for k, v in asdict(self).items() if v not in (None, {}) and k != "name"}
        return data
