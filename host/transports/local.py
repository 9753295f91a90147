"""The embedded default device: this machine, reached without any network."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from aiot.core import environment
from aiot.core.errors import CommandTimeout, TransportError
from aiot.core.fileio import write_atomic
from aiot.core.paths import xdg_dir
from aiot.core.toolchains import runtime_python
from aiot.host.transports.base import FileStat, LineCallback, ShellResult, write_capped
from aiot.host.transports.probe import probe_linux
from aiot.host.transports.quoting import build_command
from aiot.host.transports.stream import LineFramer, LineStream


def _atomic_copy(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` through a temp file in dst's folder and a rename."""
    write_atomic(dst, lambda tmp: shutil.copyfile(src, tmp))


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the command's whole process group (sh, the agent and anything it started)."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _LocalStream(LineStream):
    """A local command's pipes; a thread per output pipe, the stdout one also reaps it."""

    def __init__(self, proc: subprocess.Popen, device: str, program: str) -> None:
        super().__init__(device, program)
        self._proc = proc
        self.pid = proc.pid  # exec replaced the shell: this is the program itself
        errors = threading.Thread(target=_pump, args=(proc.stderr, self._on_stderr), daemon=True)
        errors.start()
        threading.Thread(target=self._read, args=(errors,), daemon=True).start()

    def _read(self, errors: threading.Thread) -> None:
        _pump(self._proc.stdout, self._on_stdout)
        errors.join()
        self._on_end(self._proc.wait())

    def _write(self, data: bytes) -> None:
        self._proc.stdin.write(data)
        self._proc.stdin.flush()

    def _close_stdin(self) -> None:
        self._proc.stdin.close()

    def _kill(self) -> None:
        _kill_group(self._proc)

    def _release(self) -> None:
        try:
            self._proc.stdin.close()
        except OSError:
            pass  # a write was cut off by the command's end: nothing left to flush


def _pump(pipe, feed) -> None:
    """Copy a pipe to ``feed`` until EOF, then close it (the reader owns it)."""
    try:
        while chunk := os.read(pipe.fileno(), 65536):
            feed(chunk)
    except OSError:
        pass
    finally:
        pipe.close()


class LocalTransport:
    """Runs commands with ``/bin/sh`` on this machine and copies files on the local disk.

    Args:
        root: the device workdir (defaults to ``$AIOT_LOCAL_WORKDIR`` or ``~/.cache/aiot/device``).
    """

    kind = "local"

    def __init__(self, name: str = "local", root: str | os.PathLike | None = None) -> None:
        self.name = name
        default = environment.get("AIOT_LOCAL_WORKDIR") or xdg_dir("XDG_CACHE_HOME", ".cache") / "aiot" / "device"
        self._root = Path(root or default)

    def workdir(self) -> str:
        return str(self._root)

    def close(self) -> None:
        """Nothing to release for this machine."""

    def python(self, backend: str | None = None) -> str:
        """The interpreter the agent runs under: the one running aiot, which has its runtimes,
        except for a runtime that lives in a toolchain environment (LCE) when it is installed."""
        if backend is not None:
            found = runtime_python(backend)
            if found is not None:
                return str(found)
        return sys.executable

    def shell(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        on_line: LineCallback | None = None,
    ) -> ShellResult:
        command = build_command(argv, cwd=cwd, env=env)
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(
                ["/bin/sh", "-c", command],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                # Own process group: a timeout kills the command and its children, not just sh.
                start_new_session=True,
            )
        except OSError as exc:
            raise TransportError(f"cannot start /bin/sh on {self.name}: {exc}") from None
        try:
            stdout, stderr = self._communicate(proc, timeout, on_line, self.name, argv[0])
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()
            raise CommandTimeout(
                f"command on {self.name} timed out after {timeout:g} s: {argv[0]}",
                "raise --timeout or check that the device is not overloaded",
            ) from None
        except BaseException:
            _kill_group(proc)
            proc.wait()
            raise
        return ShellResult(command, proc.returncode, stdout, stderr, time.perf_counter() - start)

    @staticmethod
    def _communicate(proc, timeout, on_line, name: str = "local", program: str = "sh") -> tuple[str, str]:
        if on_line is None:
            return proc.communicate(timeout=timeout)
        # Stream stdout line by line; stderr is drained by a thread so neither pipe fills up,
        # and a watchdog kills the process at the deadline (a blocked readline cannot time out).
        err_chunks: list[str] = []
        drain = threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()), daemon=True)
        drain.start()
        expired = threading.Event()

        def on_deadline() -> None:
            expired.set()
            _kill_group(proc)

        watchdog = threading.Timer(timeout, on_deadline) if timeout else None
        if watchdog:
            watchdog.start()
        framer = LineFramer(name, program)
        try:
            out_lines = []
            # Raw reads, framed by the same code as every transport: a line past the limit
            # raises before it is kept (a text-mode readline would hold all of it).
            while chunk := os.read(proc.stdout.fileno(), 65536):
                for line in framer.feed(chunk):
                    out_lines.append(line)
                    on_line(line)
            if (rest := framer.flush()) is not None:
                out_lines.append(rest)
                on_line(rest)
            proc.wait()
        finally:
            if watchdog:
                watchdog.cancel()
        drain.join()
        if expired.is_set():
            raise subprocess.TimeoutExpired(proc.args, timeout)
        return "".join(line + "\n" for line in out_lines), "".join(err_chunks)

    def open_stream(self, argv: Sequence[str], *, cwd: str | None = None,
                    env: Mapping[str, str] | None = None) -> _LocalStream:
        command = build_command(argv, cwd=cwd, env=env, replace_shell=True)
        try:
            proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True)  # close() kills the whole group
        except OSError as exc:
            raise TransportError(f"cannot start /bin/sh on {self.name}: {exc}") from None
        return _LocalStream(proc, self.name, argv[0])

    def push(self, local: Path, remote: str) -> None:
        try:
            _atomic_copy(Path(local), Path(remote))
        except OSError as exc:
            raise TransportError(f"push of {local} to {self.name}:{remote} failed: {exc}") from None

    def pull(self, remote: str, local: Path, *, max_bytes: int | None = None) -> None:
        if max_bytes is None:
            copy = _atomic_copy
        else:
            def copy(src: Path, dst: Path) -> None:
                def chunks():
                    with open(src, "rb") as fh:
                        while chunk := fh.read(1 << 20):
                            yield chunk

                write_atomic(dst, lambda tmp: write_capped(chunks(), tmp, max_bytes, self.name, remote))
        try:
            copy(Path(remote), Path(local))
        except OSError as exc:
            raise TransportError(f"pull of {self.name}:{remote} failed: {exc}") from None

    def exists(self, remote: str) -> bool:
        return Path(remote).exists()

    def stat(self, remote: str) -> FileStat | None:
        try:
            st = Path(remote).stat()
        except OSError:
            return None
        return FileStat(remote, st.st_size, st.st_mtime, Path(remote).is_dir())

    def info(self) -> dict:
        facts = probe_linux(self)
        facts.update({"transport": "local", "python_path": self.python()})
        return facts
