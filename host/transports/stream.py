"""A command on the device with its stdin open: what every transport's stream shares.

A transport starts the command and feeds what it prints into a :class:`LineStream` from a
reader thread (``_on_stdout``, ``_on_stderr``, ``_on_end``); the caller sends lines and reads
stdout lines with a timeout. The reader drains stderr all along, so a chatty runtime can
never fill a pipe or an SSH window and stall the command.

Commands run through ``exec`` and report their PID first on stderr (:func:`reporting_pid`),
so a transport whose device does not kill a command when its connection closes (sshd) can
kill exactly that process.
"""

from __future__ import annotations

import queue
import threading

from aiot.core.errors import CommandTimeout, TransportError

PID_MARKER = "@@AIOT_PID "
#: Seconds ``close`` waits for the command to exit on its own after stdin closed.
CLOSE_GRACE_S = 3.0
#: Seconds to wait for a killed command's end to be reported before releasing the stream.
KILL_WAIT_S = 5.0
STDERR_KEEP = 64 * 1024  # bytes of stderr kept for error messages (the tail)


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
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._partial = b""
        self._err = bytearray()
        self._awaiting_pid = pid_on_stderr
        self._pid_known = threading.Event()
        self._ended = threading.Event()
        self._write_lock = threading.Lock()
        self._closed = False

    # -- fed by the reader thread ----------------------------------------------------------

    def _on_stdout(self, chunk: bytes) -> None:
        self._partial += chunk
        *lines, self._partial = self._partial.split(b"\n")
        for line in lines:
            self._lines.put(line.decode(errors="replace").rstrip("\r"))

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
        if self._partial:
            self._lines.put(self._partial.decode(errors="replace"))
            self._partial = b""
        self.exit_code = exit_code
        self._pid_known.set()
        self._ended.set()
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
        """
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise CommandTimeout(f"{self.program} on {self.device} printed nothing for {timeout:g} s",
                                 "check that the device is not overloaded") from None
        if line is None:
            self._lines.put(None)  # every later read sees the end too
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
