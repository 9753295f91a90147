"""Transports: one interface to reach a device (local, SSH, ADB; emulated ones are SSH or ADB)."""

from aiot.host.transports.base import FileStat, ShellResult, Stream, StreamUnsupported, Transport
from aiot.host.transports.quoting import build_command, quote

__all__ = ["FileStat", "ShellResult", "Stream", "StreamUnsupported", "Transport", "build_command",
           "quote"]
