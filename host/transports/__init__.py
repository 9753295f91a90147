"""Transports: one interface to reach a device (local now; ADB, SSH, emulated later)."""

from aiot.host.transports.base import FileStat, ShellResult, Transport
from aiot.host.transports.quoting import build_command, quote

__all__ = ["FileStat", "ShellResult", "Transport", "build_command", "quote"]
