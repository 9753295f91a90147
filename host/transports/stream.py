"""A command on the device with its stdin open: what every transport's stream shares.

A transport starts the command and feeds what it prints into a :class:`LineStream` from a
reader thread (``_on_stdout``, ``_on_stderr``, ``_on_end``); the caller sends lines and reads
stdout lines with a timeout. The reader drains stderr all along, so a chatty runtime can
never fill a pipe or an SSH window and stall the command. Every transport splits a device's
output into lines with :class:`LineFramer` (here, and in their one-shot ``shell``): linear
time, and a line past ``AIOT_MAX_LINE_MB`` (64) fails the command in one line.

Commands run through ``exec`` and report their PID first on stderr (:func:`reporting_pid`),
so a transport whose device does not kill a command when its connection closes (sshd) can
kill exactly that process.
"""

from __future__ import annotations

import os
import queue
import threading

from aiot.core import environment
from aiot.core.errors import CommandTimeout, TransportError

PID_MARKER = "@@AIOT_PID "
#: Seconds ``close`` waits for the command to exit on its own after stdin closed.
CLOSE_GRACE_S = 3.0
#: Seconds to wait for a killed command's end to be reported before releasing the stream.
KILL_WAIT_S = 5.0
STDERR_KEEP = 64 * 1024  # bytes of stderr kept for error messages (the tail)


#: The longest line a device may print, in MiB (``AIOT_MAX_LINE_MB`` changes it). The longest
#: legitimate line is a ``result`` with every sample of a long run: ~7 bytes a sample, so a
#: 150 s run of a 20 µs model (7.5 M samples) is ~50 MiB; a ``predictions`` line of a 256-row
#: batch of 1000 float32 outputs is 1.3 MiB of base64.
MAX_LINE_MB = 64
MAX_LINE_ENV = "AIOT_MAX_LINE_MB"


def max_line_bytes() -> int:
    """The line length limit in bytes: ``AIOT_MAX_LINE_MB`` (a positive number), else
    ``MAX_LINE_MB``."""
    try:
        mb = float(environment.get(MAX_LINE_ENV) or MAX_LINE_MB)
    except ValueError:
        mb = MAX_LINE_MB
    return int((mb if mb > 0 else MAX_LINE_MB) * 1024 * 1024)


class LineTooLong(TransportError):
    """A device printed a line longer than the limit: it is not kept, and the command that
    printed it is stopped (retrying would print it again)."""

    transient = False

    def __init__(self, device: str, program: str, limit: int) -> None:
        mb = limit / 1024 / 1024
        super().__init__(f"the device sent a line longer than {mb:g} MiB (from "
                         f"{os.path.basename(program)} on {device}); it was stopped",
                         f"a runtime printing without newlines, or a device gone wrong; "
                         f"{MAX_LINE_ENV}=N raises the limit")


class LineFramer:
    """Splits a device's output into lines in time linear in its size, so a long line (or a
    runtime printing ``\\r`` progress without a newline) costs no more than its bytes: the
    partial line is a list of chunks, and only each new chunk is searched for a newline. A
    line longer than the limit raises :class:`LineTooLong` as soon as it passes it.
    """

    def __init__(self, device: str, program: str, limit: int | None = None) -> None:
        self.device, self.program = device, program
        self.limit = max_line_bytes() if limit is None else limit
        self._parts: list[bytes] = []
        self._size = 0

    def feed(self, chunk: bytes) -> list[str]:
        """The lines ``chunk`` completes (without newline or a trailing ``\\r``).

        Raises:
            LineTooLong: the line being read is longer than the limit (nothing of it is kept).
        """
        lines = []
        start = 0
        while (cut := chunk.find(b"\n", start)) >= 0:
            self._add(chunk[start:cut])
            lines.append(self._take())
            start = cut + 1
        if start < len(chunk):
            self._add(chunk[start:])
        return lines

    def flush(self) -> str | None:
        """The unterminated rest at the end of the output, or None."""
        return self._take() if self._parts else None

    def _add(self, piece: bytes) -> None:
        self._size += len(piece)
        if self._size > self.limit:
            self._parts, self._size = [], 0
            raise LineTooLong(self.device, self.program, self.limit)
        if piece:
            self._parts.append(piece)

    def _take(self) -> str:
        raw = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
        self._parts, self._size = [], 0
        return raw.decode(errors="replace").rstrip("\r")


def reporting_pid(command: str) -> str:
    """``command`` (built with ``replace_shell``) prefixed so it first prints its PID on stderr."""
    return f"echo {PID_MARKER}$$ >&2; {command}"


class LineStream:
    """Lines to a command's stdin, lines from its stdout; stderr kept for diagnostics.

    Subclasses implement ``_write(bytes)``, ``_close_stdin()``, ``_kill()`` and
    ``_release()`` (free the connection), and call ``_on_stdout``/``_on_stderr``/``_on_end``
    from their reader thread.

    Attributes:
        exit_code: the command's exit status once it ended (None while it runs, or when the
            transport could not tell, e.g. the connection dropped).
        pid: the command's PID on the device, once known.
    """

    def __init__(self, device: str, program: str, pid_on_stderr: bool = False) -> None:
        self.device, self.program = device, program
        self.exit_code: int | None = None
        self.pid: int | None = None
        self._lines: queue.SimpleQueue[str | LineTooLong | None] = queue.SimpleQueue()
        self._framer = LineFramer(device, program)
        self._overflow = False  # a line passed the limit: the rest of stdout is dropped
        self._err = bytearray()
        self._awaiting_pid = pid_on_stderr
        self._pid_known = threading.Event()
        self._ended = threading.Event()
        self._write_lock = threading.Lock()
        self._closed = False

    # -- fed by the reader thread ----------------------------------------------------------

    def _on_stdout(self, chunk: bytes) -> None:
        if self._overflow:
            return  # drained so the command never blocks, but nothing more is kept
        try:
            lines = self._framer.feed(chunk)
        except LineTooLong as exc:
            self._overflow = True
            lines = [exc]  # the reader raises it; ending the stream is the caller's
        for line in lines:
            self._lines.put(line)

    def _on_stderr(self, chunk: bytes) -> None:
        self._err += chunk
        if self._awaiting_pid and b"\n" in self._err:
            self._awaiting_pid = False
            first, _, rest = bytes(self._err).partition(b"\n")
            if first.startswith(PID_MARKER.encode()) and first[len(PID_MARKER):].isdigit():
                self.pid = int(first[len(PID_MARKER):])
                self._err = bytearray(rest)
            self._pid_known.set()
        del self._err[:-STDERR_KEEP]

    def _on_end(self, exit_code: int | None) -> None:
        rest = None if self._overflow else self._framer.flush()
        if rest is not None:
            self._lines.put(rest)
        self.exit_code = exit_code
        self._pid_known.set()
        self._ended.set()
        if not self._overflow:  # else the LineTooLong queued stays the last word
            self._lines.put(None)

    # -- the Stream interface --------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the command has not ended (as far as the transport knows)."""
        return not self._ended.is_set()

    def send_line(self, line: str) -> None:
        """Write ``line`` and a newline to the command's stdin.

        Raises:
            ValueError: ``line`` holds a newline.
            TransportError: the command ended or the connection is gone.
        """
        if "\n" in line:
            raise ValueError("a line sent to a stream cannot hold a newline")
        if self._closed or self._ended.is_set():
            raise TransportError(f"{self.program} on {self.device} has ended{self._exit_note()}")
        try:
            with self._write_lock:
                self._write(line.encode() + b"\n")
        except (OSError, EOFError) as exc:
            raise TransportError(f"cannot write to {self.program} on {self.device}: "
                                 f"{exc or type(exc).__name__}{self._exit_note()}") from None

    def read_line(self, timeout: float | None = None) -> str | None:
        """The next stdout line (without its newline), or None once stdout has ended.

        Raises:
            CommandTimeout: no line within ``timeout`` seconds (the command keeps running).
            LineTooLong: the command printed a line past the limit (every later read too).
        """
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise CommandTimeout(f"{self.program} on {self.device} printed nothing for {timeout:g} s",
                                 "check that the device is not overloaded") from None
        if line is None or isinstance(line, LineTooLong):
            self._lines.put(line)  # every later read sees the end too
        if isinstance(line, LineTooLong):
            raise line
        return line

    def stderr(self) -> str:
        """What the command wrote on stderr so far (the last 64 KiB)."""
        return self._err.decode(errors="replace")

    def close(self, grace: float = CLOSE_GRACE_S) -> None:
        """Close stdin, give the command ``grace`` seconds to exit, then kill it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            try:
                self._close_stdin()
            except (OSError, EOFError):
                pass  # already gone: the wait below returns at once
            if not self._ended.wait(grace):
                self._kill()
                self._ended.wait(KILL_WAIT_S)
        finally:
            self._release()

    def __enter__(self) -> LineStream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _exit_note(self) -> str:
        return "" if self.exit_code is None else f" (exit {self.exit_code})"

    def _wait_for_pid(self, timeout: float = KILL_WAIT_S) -> int | None:
        self._pid_known.wait(timeout)
        return self.pid

    # -- per transport ---------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        raise NotImplementedError

    def _close_stdin(self) -> None:
        raise NotImplementedError

    def _kill(self) -> None:
        raise NotImplementedError

    def _release(self) -> None:
        raise NotImplementedError
