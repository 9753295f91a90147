"""Android phones (and emulated ADB devices) through the adb server, with adbutils.

Commands use the shell protocol v2 where the device offers it (separate stdout and stderr,
exit code, stdin closed), else v1 with an exit-code marker. Files move with the sync
protocol; a push lands under a temporary name and is renamed, so a cut cable never leaves a
half-written artifact under its real name.

Devices reached over TCP (``host:port`` serials, e.g. phones in wireless debugging and aiot's
emulated devices) are reconnected on their own when the server shows them offline or lost.
"""

from __future__ import annotations

import logging
import os
import socket
import stat as statmod
import struct
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from aiot.core.errors import AiotError, CommandTimeout, MissingDependency, TransportError
from aiot.core.fileio import atomic_path
from aiot.host.transports.base import FileStat, LineCallback, ShellResult, StreamUnsupported, write_capped
from aiot.host.transports.probe import probe_linux
from aiot.host.transports.quoting import build_command
from aiot.host.transports.stream import LineFramer, LineStream, reporting_pid

if TYPE_CHECKING:  # a transport is made from an inventory entry; it needs no inventory code
    from aiot.host.devices.entry import DeviceEntry

log = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 5.0
EXIT_MARKER = "@@AIOT_EXIT:"
# Shell protocol v2 packet ids (adb's shell_protocol.h): host -> device stdin and close-stdin,
# device -> host stdout, stderr and exit.
SHELL_STDIN, SHELL_STDOUT, SHELL_STDERR, SHELL_EXIT, SHELL_CLOSE_STDIN = 0, 1, 2, 3, 4
STDIN_PACKET_MAX = 32 * 1024  # bytes of data per stdin packet: a long line goes as several


def _adbutils():
    try:
        import adbutils
    except ImportError:
        raise MissingDependency("adbutils (ADB support)", "adb") from None
    return adbutils


def server_port() -> int:
    """The adb server's port (``$ANDROID_ADB_SERVER_PORT``, default 5037)."""
    return int(os.environ.get("ANDROID_ADB_SERVER_PORT", "5037"))


def server_running(port: int | None = None) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port or server_port()), timeout=0.3):
            return True
    except OSError:
        return False


def ensure_server() -> None:
    """Start the adb server if none runs on our port.

    This is the one place aiot runs the ``adb`` binary, and only to start the server:
    adbutils would start it too, but would let the server's banner through to our stdout.
    """
    if server_running():
        return
    import subprocess

    adb = _adbutils().adb_path()
    try:
        started = subprocess.run([adb, "start-server"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TransportError(f"cannot start the adb server ({adb}): {exc}",
                             "install adb (apt-get install adb) or set ADBUTILS_ADB_PATH") from None
    if started.returncode != 0:
        raise TransportError(f"adb start-server failed: {started.stderr.strip() or started.stdout.strip()}")


def is_tcp_serial(serial: str) -> bool:
    """``host:port`` serials belong to devices the server reaches over TCP."""
    host, _, port = serial.rpartition(":")
    return bool(host) and port.isdigit()


def client():
    """An adbutils client for our server (started if needed)."""
    ensure_server()
    return _adbutils().AdbClient(host="127.0.0.1", port=server_port(), socket_timeout=30)


def device_states() -> dict[str, str]:
    """``{serial: state}`` as the server sees them (device, offline, unauthorized, ...)."""
    return {d.serial: d.state for d in client().list()}


def connect_tcp(serial: str, timeout: float = CONNECT_TIMEOUT_S) -> str:
    """``adb disconnect`` + ``adb connect`` a TCP serial and wait until it leaves ``offline``.

    Returns the state the device settled in (``device`` or ``unauthorized``).
    """
    adb = client()
    adb.disconnect(serial)
    answer = adb.connect(serial, timeout=timeout)
    deadline = time.monotonic() + timeout
    state = None
    while time.monotonic() < deadline:
        state = device_states().get(serial)
        if state in ("device", "unauthorized"):
            return state
        time.sleep(0.05)
    raise TransportError(f"ADB device {serial} did not come online: {answer.strip() or state}",
                         "is the device on and in wireless debugging? see: aiot devices list")


def forget_tcp(serial: str) -> None:
    """Disconnect a TCP serial so the server stops retrying it (no-op without a server)."""
    if server_running():
        try:
            client().disconnect(serial)
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass


class AdbTransport:
    """A device reached through the adb server, described by an inventory entry."""

    kind = "adb"

    def __init__(self, entry: DeviceEntry) -> None:
        self.name = entry.name
        self.entry = entry
        self.serial = entry.serial
        self._device = None
        self._features: set[str] = set()

    @classmethod
    def from_entry(cls, entry: DeviceEntry) -> AdbTransport:
        return cls(entry)

    # -- connection ------------------------------------------------------------------------

    def _ready_device(self):
        if self._device is not None:
            return self._device
        try:
            state = device_states().get(self.serial)
            if state != "device" and is_tcp_serial(self.serial):
                state = connect_tcp(self.serial)
        except TransportError:
            raise
        except Exception as exc:  # adbutils raises several unrelated types
            raise TransportError(f"adb server error for '{self.name}': {exc}") from None
        self._check_state(state)
        device = client().device(self.serial)
        self._features = set(device.get_features().split(","))
        self._device = device
        return device

    def _check_state(self, state: str | None) -> None:
        where = f"'{self.name}' ({self.serial})"
        if state == "device":
            return
        if state == "unauthorized":
            raise TransportError(f"{where} has not authorized this computer's ADB key",
                                 "unlock the phone and accept 'Allow USB debugging', then retry")
        if state is None:
            raise TransportError(f"{where} is not connected to the adb server",
                                 "check the cable or network and: aiot devices list")
        raise TransportError(f"{where} is {state}", "reconnect the device, then retry")

    def _lost(self, exc: BaseException, what: str) -> TransportError:
        self._device = None  # the next command checks the state again and reconnects
        return TransportError(f"{what} on '{self.name}' failed: {exc or type(exc).__name__}",
                              "check the device; the next command reconnects")

    def close(self) -> None:
        self._device = None

    # -- Transport ---------------------------------------------------------------------------

    def workdir(self) -> str:
        return self.entry.workdir

    def python(self, backend: str | None = None) -> str:
        return self.entry.python

    def shell(self, argv: Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None,
              timeout: float | None = None, on_line: LineCallback | None = None) -> ShellResult:
        command = build_command(argv, cwd=cwd, env=env)
        start = time.perf_counter()
        device = self._ready_device()
        v2 = "shell_v2" in self._features
        service = f"shell,v2,raw:{command}" if v2 else f"shell:{command}; echo {EXIT_MARKER}$?"
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            conn = device.open_transport(timeout=CONNECT_TIMEOUT_S)
            try:
                conn.send_command(service)
                conn.check_okay()
                reader = _ShellReader(conn.conn, deadline, on_line, LineFramer(self.name, argv[0]))
                code, out, err = reader.read_v2() if v2 else reader.read_v1()
            finally:
                conn.close()  # on a timeout this makes the device kill the command
        except _Deadline:
            raise CommandTimeout(f"command on {self.name} timed out after {timeout:g} s: {argv[0]}",
                                 "raise --timeout or check that the device is not overloaded") from None
        except AiotError:  # a line past the limit, or one the caller's reader refused
            raise
        except Exception as exc:  # noqa: BLE001 - adbutils, socket and protocol errors alike
            raise self._lost(exc, "command") from None
        return ShellResult(command, code, out, err, time.perf_counter() - start)

    def open_stream(self, argv: Sequence[str], *, cwd: str | None = None,
                    env: Mapping[str, str] | None = None) -> _AdbStream:
        """The command on a shell v2 stream: its stdin is fed with stdin packets.

        Raises:
            StreamUnsupported: the device has no shell v2 (Android < 7): v1 runs commands
                without stdin (or on a pty, which would echo and mangle the lines).
        """
        device = self._ready_device()
        if "shell_v2" not in self._features:
            raise StreamUnsupported(f"'{self.name}' has no ADB shell protocol v2 (Android < 7), "
                                    "so a command on it cannot read stdin",
                                    "one-shot commands still work on it")
        # adbd ends a command whose stream closes (the emulated one kills its process group);
        # the reported PID lets close() kill it outright wherever that is not enough.
        command = reporting_pid(build_command(argv, cwd=cwd, env=env, replace_shell=True))
        try:
            conn = device.open_transport(timeout=CONNECT_TIMEOUT_S)
            conn.send_command(f"shell,v2,raw:{command}")
            conn.check_okay()
        except Exception as exc:  # noqa: BLE001 - adbutils, socket and protocol errors alike
            raise self._lost(exc, "starting a command") from None
        return _AdbStream(self, conn, argv[0])

    def push(self, local: Path, remote: str) -> None:
        device = self._ready_device()
        tmp = f"{remote}.part-{uuid.uuid4().hex[:8]}"
        try:
            device.sync.push(str(local), tmp, mode=0o644)
        except Exception as exc:  # noqa: BLE001
            self._remove_quietly(tmp)
            raise TransportError(f"push of {local} to {self.name}:{remote} failed: {exc}",
                                 f"check free space and permissions: aiot devices doctor {self.name}") from None
        moved = self.shell(["mv", "-f", tmp, remote])
        if not moved.ok:
            self._remove_quietly(tmp)
            raise TransportError(f"push to {self.name}:{remote} failed: {moved.stderr.strip()}")

    def _remove_quietly(self, remote: str) -> None:
        try:
            self.shell(["rm", "-f", remote], timeout=CONNECT_TIMEOUT_S)
        except TransportError:
            pass

    def pull(self, remote: str, local: Path, *, max_bytes: int | None = None) -> None:
        if self.stat(remote) is None:
            raise TransportError(f"pull of {self.name}:{remote} failed: no such file")
        device = self._ready_device()
        try:
            with atomic_path(Path(local)) as tmp:
                write_capped(device.sync.iter_content(remote), tmp, max_bytes, self.name, remote)
        except TransportError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise self._lost(exc, f"pull of {remote}") from None

    def exists(self, remote: str) -> bool:
        return self.stat(remote) is not None

    def stat(self, remote: str) -> FileStat | None:
        device = self._ready_device()
        try:
            info = device.sync.stat(remote)
        except Exception as exc:  # noqa: BLE001
            raise self._lost(exc, f"stat of {remote}") from None
        if info.mode == 0:
            return None
        mtime = info.mtime.timestamp() if info.mtime else 0.0
        return FileStat(remote, info.size, mtime, statmod.S_ISDIR(info.mode))

    def info(self) -> dict:
        facts = probe_linux(self)
        facts.update({"transport": "adb", "serial": self.serial, "python_path": self.python(),
                      "adb_features": sorted(f for f in self._features if f),
                      "labels": dict(self.entry.labels)})
        return facts

    def __repr__(self) -> str:
        return f"AdbTransport({self.name!r}, serial={self.serial!r})"


def _packet(kind: int, data: bytes = b"") -> bytes:
    """One shell v2 packet: id, little-endian length, data."""
    return struct.pack("<BI", kind, len(data)) + data


class _AdbStream(LineStream):
    """A command on a shell v2 stream through the adb server's socket."""

    def __init__(self, transport: AdbTransport, conn, program: str) -> None:
        super().__init__(transport.name, program, pid_on_stderr=True)
        self._transport, self._conn = transport, conn
        self._sock = conn.conn
        self._sock.settimeout(None)
        # No Nagle: a request's last small segment would wait for a delayed ACK (~40 ms).
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        reader = _ShellReader(self._sock, None, None)
        code = None
        try:
            while True:
                kind, size = struct.unpack("<BI", reader._exact(5))
                data = reader._exact(size) if size else b""
                if kind == SHELL_STDOUT:
                    self._on_stdout(data)
                elif kind == SHELL_STDERR:
                    self._on_stderr(data)
                elif kind == SHELL_EXIT:
                    code = data[0] if data else None
                    break
        except OSError:  # ConnectionError included: the stream or the server went away
            pass
        self._on_end(code)

    def _write(self, data: bytes) -> None:
        packets = [_packet(SHELL_STDIN, data[start:start + STDIN_PACKET_MAX])
                   for start in range(0, len(data), STDIN_PACKET_MAX)]
        self._sock.sendall(b"".join(packets))

    def _close_stdin(self) -> None:
        self._sock.sendall(_packet(SHELL_CLOSE_STDIN))

    def _kill(self) -> None:
        pid = self._wait_for_pid()
        if pid is not None:
            try:
                if self._transport.shell(["kill", "-9", str(pid)], timeout=CONNECT_TIMEOUT_S).ok:
                    return  # its exit packet follows
            except TransportError:
                pass
        self._release()  # adbd ends a command whose stream closes

    def _release(self) -> None:
        self._conn.close()


class _Deadline(Exception):
    pass


class _ShellReader:
    """Reads a shell stream from the adb server socket, honouring a deadline."""

    def __init__(self, sock: socket.socket, deadline: float | None, on_line: LineCallback | None,
                 framer: LineFramer | None = None) -> None:
        self.sock, self.deadline, self.on_line = sock, deadline, on_line
        self._framer = framer or LineFramer("adb", "shell")

    def _recv(self, n: int) -> bytes:
        """Up to ``n`` bytes; b"" at end of stream."""
        while True:
            if self.deadline is not None:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    raise _Deadline()
                self.sock.settimeout(min(left, 1.0))
            else:
                self.sock.settimeout(None)
            try:
                return self.sock.recv(n)
            except socket.timeout:
                continue

    def _exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self._recv(n - len(data))
            if not chunk:
                raise ConnectionError("device closed the stream")
            data += chunk
        return data

    def _lines(self, chunk: bytes) -> None:
        if self.on_line is None:
            return
        for line in self._framer.feed(chunk):
            self.on_line(line)

    def _flush(self) -> None:
        if self.on_line and (rest := self._framer.flush()) is not None:
            self.on_line(rest)

    def read_v2(self) -> tuple[int, str, str]:
        out, err = [], []
        while True:
            kind, size = struct.unpack("<BI", self._exact(5))
            data = self._exact(size) if size else b""
            if kind == SHELL_STDOUT:
                out.append(data)
                self._lines(data)
            elif kind == SHELL_STDERR:
                err.append(data)
            elif kind == SHELL_EXIT:
                self._flush()
                return data[0], b"".join(out).decode(errors="replace"), b"".join(err).decode(errors="replace")

    def read_v1(self) -> tuple[int, str, str]:
        """v1 merges stderr into stdout; the exit code comes from a marker we append."""
        shown = self.on_line
        if shown is not None:
            def strip_marker(line: str) -> None:
                if line.startswith(EXIT_MARKER):
                    return
                shown(line.split(EXIT_MARKER, 1)[0])

            self.on_line = strip_marker
        chunks = []
        while chunk := self._recv(65536):
            chunks.append(chunk)
            self._lines(chunk)
        self._flush()
        output = b"".join(chunks)
        at = output.rfind(EXIT_MARKER.encode())
        if at < 0:
            raise ConnectionError("device closed the stream before the command finished")
        code = int(output[at + len(EXIT_MARKER):].strip() or b"255")
        return code, output[:at].decode(errors="replace"), ""


__all__ = ["AdbTransport", "client", "connect_tcp", "device_states", "ensure_server", "forget_tcp",
           "is_tcp_serial", "server_port", "server_running"]
