"""A device-side ADB daemon for emulated devices: the ADB wire protocol over TCP.

The real ``adb`` server connects to it (``adb connect 127.0.0.1:PORT``) exactly as to a phone
in TCP/IP mode, so adbutils, the ``adb`` CLI and aiot's AdbTransport all talk to it through the
real server. It implements what aiot and the adb CLI use:

* transport: CNXN, optional RSA AUTH (token signed by the host's adbkey), OPEN/OKAY/WRTE/CLSE
  with legacy flow control (one WRTE in flight per direction, each acknowledged by OKAY);
* services: ``shell:`` (v1, stdout and stderr merged, no exit code), ``shell,v2,...:``
  (separate streams, stdin, exit code), ``exec:`` and ``sync:`` (STAT/STA2/LST2/LIST/LIS2/
  SEND/RECV/QUIT, :mod:`aiot.host.emulator.adbd_sync`).

Commands run with the host's ``/bin/sh`` in a new session; closing the stream (host timeout,
``adb`` interrupted) kills the whole process group, as adbd does on a phone. A folder of small
stand-ins (``getprop``) can be put first on ``PATH``. An emulated Android phone instead has a
root of its own (``--root``): its commands run through ``--enter`` (chrooted into it, see
:mod:`aiot.host.emulator.android`), its ``pm``/``am``/``run-as`` are answered on this side
(:mod:`aiot.host.emulator.android_apps`) and sync paths lie inside it. Beyond aiot and the
standard library it needs only ``cryptography``, when ``--auth-keys`` is given.

Run: ``python -m aiot.host.emulator.adbd --port PORT [--props FILE] [--bin DIR] [--auth-keys FILE]
[--root DIR --enter SCRIPT]``.
"""

from __future__ import annotations

import argparse
import base64
import logging
import os
import posixpath
import queue
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import threading
from pathlib import Path

from aiot.host.emulator import android_apps
from aiot.host.emulator.adbd_sync import serve_sync

log = logging.getLogger("aiot.adbd")

A_CNXN, A_AUTH, A_OPEN, A_OKAY, A_CLSE, A_WRTE = (
    int.from_bytes(name, "little") for name in (b"CNXN", b"AUTH", b"OPEN", b"OKAY", b"CLSE", b"WRTE"))
VERSION = 0x01000001  # "checksums not verified" (the host still fills data_check; never reject it)
DEVICE_MAXDATA = 256 * 1024
AUTH_TOKEN, AUTH_SIGNATURE, AUTH_RSAPUBLICKEY = 1, 2, 3
# Advertise only what is implemented: adb switches protocols on these (e.g. sendrecv_v2).
FEATURES = ("shell_v2", "stat_v2", "ls_v2", "fixed_push_mkdir")

SHELL_STDIN, SHELL_STDOUT, SHELL_STDERR, SHELL_EXIT, SHELL_CLOSE_STDIN = 0, 1, 2, 3, 4


class StreamClosed(Exception):
    """The host closed the stream or the connection went away."""


def pack_message(command: int, arg0: int, arg1: int, data: bytes = b"") -> bytes:
    """One ADB message: 24-byte little-endian header plus payload."""
    check = sum(data) & 0xFFFFFFFF
    return struct.pack("<6I", command, arg0, arg1, len(data), check, command ^ 0xFFFFFFFF) + data


# -- RSA auth -----------------------------------------------------------------------------------

def load_android_pubkeys(path: Path) -> list:
    """RSA public keys from an ``adbkey.pub``-style file (one base64 key + comment per line).

    The binary layout is ``{u32 words=64, u32 n0inv, u32 n[64] LE, u32 rr[64], u32 e}``.
    """
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicNumbers

    keys = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        blob = base64.b64decode(line.split()[0])
        words = struct.unpack_from("<I", blob, 0)[0]
        modulus = int.from_bytes(blob[8:8 + 4 * words], "little")
        exponent = struct.unpack_from("<I", blob, 8 + 8 * words)[0]
        keys.append(RSAPublicNumbers(exponent, modulus).public_key())
    return keys


def signature_matches(keys: list, token: bytes, signature: bytes) -> bool:
    """Whether ``signature`` signs ``token`` with one of ``keys``.

    adb signs the random token as if it were a ready-made SHA-1 digest (PKCS#1 v1.5).
    """
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, utils

    for key in keys:
        try:
            key.verify(signature, token, padding.PKCS1v15(), utils.Prehashed(hashes.SHA1()))
            return True
        except InvalidSignature:
            continue
    return False


# -- streams ------------------------------------------------------------------------------------

class Stream:
    """One OPENed service: bytes in from the host, WRTEs out, acknowledged one at a time."""

    def __init__(self, conn: Connection, local_id: int, remote_id: int) -> None:
        self.conn, self.local_id, self.remote_id = conn, local_id, remote_id
        self.incoming: queue.Queue[bytes | None] = queue.Queue()
        self._acked = threading.Semaphore(1)
        self._write_lock = threading.Lock()
        self._buffer = b""
        self.closed = threading.Event()
        self.on_close: list = []

    # host -> device
    def feed(self, data: bytes) -> None:
        self.incoming.put(data)

    def read_chunk(self) -> bytes:
        """The next WRTE payload from the host (acknowledged once taken: backpressure)."""
        data = self.incoming.get()
        if data is None:
            raise StreamClosed()
        self.conn.send(A_OKAY, self.local_id, self.remote_id)
        return data

    def read_exact(self, n: int) -> bytes:
        while len(self._buffer) < n:
            self._buffer += self.read_chunk()
        data, self._buffer = self._buffer[:n], self._buffer[n:]
        return data

    # device -> host
    def write(self, data: bytes) -> None:
        """Send ``data`` as WRTEs no larger than the negotiated maximum."""
        with self._write_lock:
            step = self.conn.max_payload
            for start in range(0, len(data), step):
                while not self._acked.acquire(timeout=0.5):
                    if self.closed.is_set():
                        raise StreamClosed()
                if self.closed.is_set():
                    raise StreamClosed()
                self.conn.send(A_WRTE, self.local_id, self.remote_id, data[start:start + step])

    def acknowledged(self) -> None:
        self._acked.release()

    def host_closed(self) -> None:
        """The host sent CLSE (or vanished): stop producers and whatever they run."""
        if self.closed.is_set():
            return
        self.closed.set()
        self.incoming.put(None)
        for callback in self.on_close:
            callback()

    def finish(self) -> None:
        """The service is done: tell the host (once), and wake a reader still waiting for input
        (the stdin pump of a command that exited before its stdin was closed)."""
        if not self.closed.is_set():
            self.closed.set()
            self.conn.send(A_CLSE, self.local_id, self.remote_id)
        self.incoming.put(None)
        self.conn.forget(self.local_id)


# -- services -----------------------------------------------------------------------------------

def _kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _spawn(device: DeviceConfig, command: str, merge_stderr: bool) -> subprocess.Popen:
    if device.enter and android_apps.handles(command):  # pm/am: answered on the emulator's side
        argv = [sys.executable, "-m", "aiot.host.emulator.android_apps", "--root", device.root,
                "--enter", device.enter, command]
    elif device.enter:  # a phone of its own: the command runs inside its root
        argv = [device.enter, command]
    else:
        argv = ["/bin/sh", "-c", command] if command else ["/bin/sh"]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                            cwd="/", env=device.shell_env(), start_new_session=True)


def _pump(fd, send) -> None:
    """Copy a pipe to the stream until EOF."""
    while True:
        chunk = os.read(fd.fileno(), 65536)
        if not chunk:
            return
        send(chunk)


def serve_shell_v1(stream: Stream, device: DeviceConfig, command: str) -> None:
    """``shell:``/``exec:``: stdout and stderr merged, no exit code, EOF ends it."""
    proc = _spawn(device, command, merge_stderr=True)
    stream.on_close.append(lambda: _kill_group(proc))
    proc.stdin.close()
    try:
        _pump(proc.stdout, stream.write)
    finally:
        proc.stdout.close()
        _kill_group(proc)
        proc.wait()


def serve_shell_v2(stream: Stream, device: DeviceConfig, command: str) -> None:
    """``shell,v2:``: packets ``u8 id, u32 len, data`` both ways; exit code at the end."""
    proc = _spawn(device, command, merge_stderr=False)
    stream.on_close.append(lambda: _kill_group(proc))

    def packet(kind: int):
        return lambda data: stream.write(struct.pack("<BI", kind, len(data)) + data)

    def stdin_pump() -> None:
        try:
            while True:
                kind, size = struct.unpack("<BI", stream.read_exact(5))
                data = stream.read_exact(size)
                if kind == SHELL_STDIN:
                    proc.stdin.write(data)
                    proc.stdin.flush()
                elif kind == SHELL_CLOSE_STDIN:
                    break
        except (StreamClosed, OSError):
            pass
        finally:
            try:
                proc.stdin.close()
            except OSError:
                pass

    threads = [threading.Thread(target=stdin_pump, daemon=True),
               threading.Thread(target=_pump, args=(proc.stderr, packet(SHELL_STDERR)), daemon=True)]
    for thread in threads:
        thread.start()
    try:
        _pump(proc.stdout, packet(SHELL_STDOUT))
        threads[1].join()
        code = proc.wait()
        packet(SHELL_EXIT)(bytes([code & 0xFF if code >= 0 else 128 - code]))
    finally:
        _kill_group(proc)
        proc.wait()


def service_for(name: str, device: DeviceConfig):
    """The handler for an OPEN request, or None for a service we do not offer."""
    if name.startswith("shell,") or name.startswith("shell:"):
        options, _, command = name.partition(":")
        if "v2" in options.split(",")[1:] and device.shell_v2:
            return lambda stream: serve_shell_v2(stream, device, command)
        return lambda stream: serve_shell_v1(stream, device, command)
    if name.startswith("exec:"):
        return lambda stream: serve_shell_v1(stream, device, name[len("exec:"):])
    if name == "sync:":
        return lambda stream: serve_sync(stream, device)
    return None


# -- connection ---------------------------------------------------------------------------------

class DeviceConfig:
    """What the emulated device looks like: banner properties, PATH stand-ins, auth keys."""

    def __init__(self, props: dict[str, str], bin_dir: str | None, auth_keys: list | None,
                 shell_v2: bool = True, root: str | None = None, enter: str | None = None) -> None:
        self.props, self.bin_dir, self.auth_keys, self.shell_v2 = props, bin_dir, auth_keys, shell_v2
        self.root, self.enter = root, enter

    def host_path(self, path: str, with_mode: bool = False) -> str:
        """Where a device path lies on this machine: inside the phone's root, if it has one
        (``..`` cannot leave it). ``with_mode``: a SEND request's ``path,mode``."""
        if self.root is None:
            return path
        mode = ""
        if with_mode and "," in path:
            path, _, mode = path.rpartition(",")
            mode = "," + mode
        inside = posixpath.normpath(posixpath.join("/", path))
        return os.path.join(self.root, inside.lstrip("/")) + mode

    def banner(self) -> bytes:
        features = [f for f in FEATURES if self.shell_v2 or f != "shell_v2"]
        keys = ("ro.product.name", "ro.product.model", "ro.product.device")
        props = "".join(f"{k}={self.props[k]};" for k in keys if k in self.props)
        return f"device::{props}features={','.join(features)}".encode()

    def shell_env(self) -> dict[str, str]:
        if self.enter:  # the phone sets its own environment; enter.sh needs only a PATH
            return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        env = dict(os.environ)
        if self.bin_dir:
            env["PATH"] = f"{self.bin_dir}:{env.get('PATH', '/usr/bin:/bin')}"
        return env


class Connection:
    """One host (adb server) connection: message loop, auth state and open streams."""

    def __init__(self, sock: socket.socket, device: DeviceConfig) -> None:
        self.sock, self.device = sock, device
        self._send_lock = threading.Lock()
        self.streams: dict[int, Stream] = {}
        self._next_id = 1
        self.max_payload = DEVICE_MAXDATA
        self.online = device.auth_keys is None
        self._token = b""

    def send(self, command: int, arg0: int, arg1: int, data: bytes = b"") -> None:
        with self._send_lock:
            try:
                self.sock.sendall(pack_message(command, arg0, arg1, data))
            except OSError:
                pass  # the reader notices the dead socket and closes every stream

    def forget(self, local_id: int) -> None:
        self.streams.pop(local_id, None)

    def _recv_exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("host closed the connection")
            data += chunk
        return data

    def serve(self) -> None:
        try:
            while True:
                command, arg0, arg1, size, _check, magic = struct.unpack("<6I", self._recv_exact(24))
                if magic != command ^ 0xFFFFFFFF:
                    raise ConnectionError("bad message magic")
                self.dispatch(command, arg0, arg1, self._recv_exact(size) if size else b"")
        except (ConnectionError, OSError):
            pass
        finally:
            for stream in list(self.streams.values()):
                stream.host_closed()
            self.sock.close()

    def dispatch(self, command: int, arg0: int, arg1: int, data: bytes) -> None:
        if command == A_CNXN:
            self.max_payload = max(1024, min(arg1 or DEVICE_MAXDATA, DEVICE_MAXDATA))
            self._greet()
        elif command == A_AUTH:
            self._auth(arg0, data)
        elif not self.online:
            return
        elif command == A_OPEN:
            self._open(arg0, data.rstrip(b"\0").decode(errors="replace"))
        elif command == A_OKAY:
            stream = self.streams.get(arg1)
            if stream:
                stream.acknowledged()
        elif command == A_WRTE:
            stream = self.streams.get(arg1)
            if stream:
                stream.feed(data)
        elif command == A_CLSE:
            stream = self.streams.pop(arg1, None)
            if stream:
                stream.host_closed()

    def _greet(self) -> None:
        if self.online:
            self.send(A_CNXN, VERSION, DEVICE_MAXDATA, self.device.banner())
        else:
            self._token = os.urandom(20)
            self.send(A_AUTH, AUTH_TOKEN, 0, self._token)

    def _auth(self, kind: int, data: bytes) -> None:
        if kind == AUTH_SIGNATURE and signature_matches(self.device.auth_keys, self._token, data):
            self.online = True
            self.send(A_CNXN, VERSION, DEVICE_MAXDATA, self.device.banner())
        elif kind == AUTH_SIGNATURE:
            self._token = os.urandom(20)  # try the host's next key
            self.send(A_AUTH, AUTH_TOKEN, 0, self._token)
        # AUTH_RSAPUBLICKEY: a phone would ask its user; we stay unauthorized.

    def _open(self, remote_id: int, name: str) -> None:
        handler = service_for(name, self.device)
        if handler is None:
            log.info("refusing service %r", name)
            self.send(A_CLSE, 0, remote_id)
            return
        local_id, self._next_id = self._next_id, self._next_id + 1
        stream = Stream(self, local_id, remote_id)
        self.streams[local_id] = stream
        self.send(A_OKAY, local_id, remote_id)
        threading.Thread(target=self._run, args=(stream, handler, name), daemon=True).start()

    @staticmethod
    def _run(stream: Stream, handler, name: str) -> None:
        try:
            handler(stream)
        except StreamClosed:
            pass
        except Exception:  # one broken service must not take the device down
            log.exception("service %r failed", name)
        finally:
            stream.finish()


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(port: int, device: DeviceConfig, host: str = "127.0.0.1") -> None:
    """Accept adb server connections on host:port until killed."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            Connection(self.request, device).serve()

    with _Server((host, port), Handler) as server:
        log.info("adbd listening on %s:%d", host, port)
        server.serve_forever()


def read_props(path: Path | None) -> dict[str, str]:
    """``[key]: [value]`` lines (getprop's format) into a dict."""
    props = {}
    if path is None:
        return props
    for line in path.read_text().splitlines():
        if line.startswith("[") and "]: [" in line:
            key, _, value = line[1:].partition("]: [")
            props[key] = value.rstrip("]")
    return props


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--props", type=Path, help="getprop-style file; its product keys form the banner")
    parser.add_argument("--bin", help="folder put first on PATH for shell commands")
    parser.add_argument("--auth-keys", type=Path, help="adbkey.pub-style file; enables RSA auth")
    parser.add_argument("--no-shell-v2", action="store_true", help="behave like an old device")
    parser.add_argument("--root", help="the phone's filesystem: sync paths lie inside it")
    parser.add_argument("--enter", help="script that runs a shell command inside --root")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s adbd %(levelname)s %(message)s")
    keys = load_android_pubkeys(args.auth_keys) if args.auth_keys else None
    device = DeviceConfig(read_props(args.props), args.bin, keys, shell_v2=not args.no_shell_v2,
                          root=args.root, enter=args.enter)
    serve(args.port, device)


if __name__ == "__main__":
    main()
