"""The Transport interface every device implements."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from aiot.core.errors import FileTooLarge, TransportError


@dataclass(frozen=True)
class ShellResult:
    """Outcome of one command on the device."""

    command: str
    exit_code: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True)
class FileStat:
    """Size and modification time of a file on the device."""

    path: str
    size: int
    mtime: float
    is_dir: bool


LineCallback = Callable[[str], None]


def write_capped(chunks: Iterable[bytes], local: Path, max_bytes: int | None, device: str,
                 remote: str) -> int:
    """Write ``chunks`` (a pull's bytes as they arrive) to ``local``; returns the size.

    Raises:
        FileTooLarge: more than ``max_bytes`` arrived (stopped at once: a device that says a
            file is small and then sends for ever fills nothing).
    """
    size = 0
    try:
        with open(local, "wb") as fh:
            for chunk in chunks:
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    raise FileTooLarge(device, remote, max_bytes)
                fh.write(chunk)
    finally:
        if hasattr(chunks, "close"):  # a generator: its connection (adb sync) closes now
            chunks.close()
    return size


class StreamUnsupported(TransportError):
    """This device cannot keep a command's stdin open (e.g. an ADB device without shell v2)."""


@runtime_checkable
class Stream(Protocol):
    """A command running on the device with its stdin open: lines in, stdout lines out.

    Attributes:
        exit_code: its exit status once it ended, else None.
        pid: its PID on the device, once known (None where the transport cannot tell).
    """

    exit_code: int | None
    pid: int | None

    def send_line(self, line: str) -> None:
        """Write ``line`` plus a newline to stdin (raises TransportError once it ended)."""
        ...

    def read_line(self, timeout: float | None = None) -> str | None:
        """The next stdout line without its newline; None at the end of stdout.

        Raises:
            CommandTimeout: no line within ``timeout`` seconds.
        """
        ...

    def stderr(self) -> str:
        """What the command wrote on stderr so far (its tail)."""
        ...

    def close(self, grace: float = 3.0) -> None:
        """Close stdin, wait up to ``grace`` s for the command to exit, else kill it."""
        ...


@runtime_checkable
class Transport(Protocol):
    """How aiot reaches a device. Paths on the device are POSIX strings.

    Implementations: ``LocalTransport`` (this machine), ``SshTransport`` and ``AdbTransport``
    (emulated devices are SSH or ADB ones).
    """

    name: str
    kind: str  # "local", "adb", "ssh"

    def shell(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        on_line: LineCallback | None = None,
    ) -> ShellResult:
        """Run ``argv`` (quoted by :func:`~aiot.host.transports.quoting.build_command`).

        ``on_line`` receives stdout lines as they arrive, for live progress.

        Raises:
            TransportError: the device is unreachable or the command timed out.
        """
        ...

    def open_stream(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Stream:
        """Start ``argv`` (quoted as for :meth:`shell`) with its stdin open, for a dialogue.

        The command keeps running until it exits or the stream is closed; closing kills it
        if it is still running, as a timed-out :meth:`shell` command is killed.

        Raises:
            StreamUnsupported: this device cannot feed a command's stdin.
            TransportError: the device is unreachable.
        """
        ...

    def python(self, backend: str | None = None) -> str:
        """The Python interpreter the device agent runs under on this device.

        ``backend`` names the runtime a run needs; a device may keep a runtime in its own
        environment (aiot's host keeps LCE in the ``lce`` toolchain, for NumPy < 2).
        """
        ...

    def push(self, local: Path, remote: str) -> None:
        """Copy a local file to ``remote`` atomically (temp name + rename; parents created)."""
        ...

    def pull(self, remote: str, local: Path, *, max_bytes: int | None = None) -> None:
        """Copy ``remote`` to a local file, atomically (nothing is left at ``local`` on failure).

        Raises:
            FileTooLarge: it is larger than ``max_bytes`` (the transfer stops there).
            TransportError: it cannot be read, or the device was lost.
        """
        ...

    def exists(self, remote: str) -> bool:
        """Whether ``remote`` exists on the device."""
        ...

    def stat(self, remote: str) -> FileStat | None:
        """Size and mtime of ``remote``, or None if it does not exist."""
        ...

    def info(self) -> dict:
        """A probe of the device: CPU, cores, clusters, ABI, OS, memory, Python, runtimes."""
        ...

    def workdir(self) -> str:
        """The directory on the device where aiot keeps the agent, artifacts and data."""
        ...

    def close(self) -> None:
        """Release connections (a later call reconnects)."""
        ...
