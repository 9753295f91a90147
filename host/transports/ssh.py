"""Boards and Linux machines over SSH (paramiko): exec with exit status, SFTP files.

Host keys are always checked against a known_hosts file: an unknown key is refused until the
user trusts it explicitly (``aiot devices trust NAME``), a changed key is refused loudly.
Keys and passwords are never logged.
"""

from __future__ import annotations

import logging
import posixpath
import select
import socket
import stat as statmod
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from aiot.core.errors import CommandTimeout, FileTooLarge, MissingDependency, TransportError
from aiot.core.fileio import atomic_path
from aiot.core.paths import config_dir
from aiot.host.transports.base import FileStat, LineCallback, ShellResult
from aiot.host.transports.probe import probe_linux
from aiot.host.transports.quoting import build_command
from aiot.host.transports.stream import PID_MARKER, LineFramer, LineStream, reporting_pid

if TYPE_CHECKING:  # a transport is made from an inventory entry; it needs no inventory code
    from aiot.host.devices.entry import DeviceEntry

log = logging.getLogger(__name__)
KEEPALIVE_S = 15
CONNECT_TIMEOUT_S = 10


class SshSetupError(TransportError):
    """This host's SSH set-up for a device is wrong (its key file, known_hosts, a host key
    that is unknown or changed, a refused key): retrying the run cannot help."""

    transient = False  # read by aiot.core.errors.is_transient: no retries with backoff


def known_hosts_path(entry: DeviceEntry) -> Path:
    """The known_hosts file aiot checks for this device."""
    return Path(entry.known_hosts).expanduser() if entry.known_hosts else config_dir() / "known_hosts"


def host_key_name(entry: DeviceEntry) -> str:
    """``host`` for port 22, ``[host]:port`` otherwise (OpenSSH's known_hosts convention)."""
    port = entry.port or 22
    return entry.host if port == 22 else f"[{entry.host}]:{port}"


def _paramiko():
    try:
        import paramiko
    except ImportError:
        raise MissingDependency("paramiko (SSH support)", "ssh") from None
    _quiet_paramiko()
    return paramiko


def _quiet_paramiko() -> None:
    """paramiko logs every failed handshake as ERROR tracebacks from its own thread, over the
    progress bars; aiot reports that failure itself in one line. Kept with --verbose (root
    logger at DEBUG) or when someone set paramiko's level on purpose."""
    logger = logging.getLogger("paramiko")
    if logger.level == logging.NOTSET and logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        logger.setLevel(logging.CRITICAL)


class SshTransport:
    """A device reached over SSH, described by an inventory entry."""

    kind = "ssh"

    def __init__(self, entry: DeviceEntry) -> None:
        self.name = entry.name
        self.entry = entry
        self._client = None
        self._sftp = None

    # -- connection ------------------------------------------------------------------------

    def _connect(self):
        if self._client is not None and self._client.get_transport() and self._client.get_transport().is_active():
            return self._client
        paramiko = _paramiko()
        client = paramiko.SSHClient()
        load_known_hosts(self.entry, client.get_host_keys())
        if self.entry.key:
            check_key_file(self.entry)
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        where = f"{self.entry.user}@{self.entry.host}:{self.entry.port or 22}"
        try:
            client.connect(
                self.entry.host, port=self.entry.port or 22, username=self.entry.user,
                key_filename=str(Path(self.entry.key).expanduser()) if self.entry.key else None,
                look_for_keys=self.entry.key is None, allow_agent=self.entry.key is None,
                timeout=CONNECT_TIMEOUT_S, banner_timeout=CONNECT_TIMEOUT_S, auth_timeout=CONNECT_TIMEOUT_S,
            )
        except paramiko.BadHostKeyException:
            raise SshSetupError(
                f"host key of '{self.name}' ({where}) has CHANGED since it was trusted: refusing to connect",
                f"if the device was reinstalled, verify and run: aiot devices trust {self.name} --replace",
            ) from None
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):
                raise SshSetupError(
                    f"host key of '{self.name}' ({where}) is unknown",
                    f"verify the fingerprint and run: aiot devices trust {self.name}",
                ) from None
            if isinstance(exc, paramiko.AuthenticationException):
                raise SshSetupError(f"'{self.name}' refused the SSH key for {where}",
                                     "check --key and the device's authorized_keys") from None
            raise TransportError(f"SSH to '{self.name}' ({where}) failed: {exc}",
                                 "is an SSH server listening there? check the host and port: "
                                 "aiot devices list") from None
        except OSError as exc:
            raise TransportError(f"cannot reach '{self.name}' at {where}: {exc.strerror or exc}",
                                 "is the device on and the address right? see: aiot devices list") from None
        client.get_transport().set_keepalive(KEEPALIVE_S)
        # No Nagle, as OpenSSH does for interactive sessions: a request that ends in a small
        # packet would otherwise wait for the delayed ACK of the one before (~40 ms a request).
        client.get_transport().sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._client, self._sftp = client, None
        return client

    def check_setup(self) -> None:
        """Check, without the network, what a connection would fail on: the key file and
        known_hosts (so a sweep refuses before any conversion, not after)."""
        load_known_hosts(self.entry, _paramiko().HostKeys())
        if self.entry.key:
            check_key_file(self.entry)

    def _sftp_client(self):
        if self._sftp is None:
            self._sftp = self._connect().open_sftp()
        return self._sftp

    @contextmanager
    def _dropped_connection(self, what: str):
        """Turn a connection lost during an SFTP call into TransportError (OSError passes through).

        paramiko reports a dropped server as SSHException or EOFError, not as OSError.
        """
        paramiko = _paramiko()
        try:
            yield
        except (EOFError, paramiko.SSHException) as exc:
            self.close()
            raise TransportError(f"{what} on '{self.name}' failed: connection lost ({exc or type(exc).__name__})",
                                 "check the device; the next command reconnects") from None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = self._sftp = None

    # -- Transport ---------------------------------------------------------------------------

    def workdir(self) -> str:
        return self.entry.workdir

    def python(self, backend: str | None = None) -> str:
        return self.entry.python

    def shell(self, argv: Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None,
              timeout: float | None = None, on_line: LineCallback | None = None) -> ShellResult:
        command = build_command(argv, cwd=cwd, env=env)
        # sshd does not kill a command whose channel closes, so the command reports its PID
        # first (it replaces the shell, so $$ is its own) and a timeout kills it by that PID.
        wrapped = reporting_pid(build_command(argv, cwd=cwd, env=env, replace_shell=True))
        start = time.perf_counter()
        try:
            channel = self._connect().get_transport().open_session(timeout=CONNECT_TIMEOUT_S)
            channel.exec_command(wrapped)
            stdout, stderr = self._drain(channel, timeout, on_line, argv[0])
            code = channel.recv_exit_status()
        except (OSError, EOFError) as exc:
            self.close()
            raise TransportError(f"connection to '{self.name}' lost: {exc or type(exc).__name__}",
                                 "check the device; the next command reconnects") from None
        return ShellResult(command, code, stdout, _without_pid_line(stderr), time.perf_counter() - start)

    def open_stream(self, argv: Sequence[str], *, cwd: str | None = None,
                    env: Mapping[str, str] | None = None) -> _SshStream:
        # As in shell: sshd leaves a command running when its channel closes, so the command
        # reports its PID and close() kills it by that PID if it does not exit on its own.
        wrapped = reporting_pid(build_command(argv, cwd=cwd, env=env, replace_shell=True))
        paramiko = _paramiko()
        try:
            channel = self._connect().get_transport().open_session(timeout=CONNECT_TIMEOUT_S)
            channel.exec_command(wrapped)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            self.close()
            raise TransportError(f"connection to '{self.name}' lost: {exc or type(exc).__name__}",
                                 "check the device; the next command reconnects") from None
        return _SshStream(self, channel, argv[0])

    def _kill_remote(self, pid: int | None) -> None:
        """SIGKILL the timed-out command by the PID it reported (best effort)."""
        if pid is None:
            return
        try:
            kill = self._connect().get_transport().open_session(timeout=CONNECT_TIMEOUT_S)
            kill.exec_command(build_command(["kill", "-9", str(pid)]))
            kill.recv_exit_status()
        except (OSError, EOFError, TransportError):
            pass

    def _drain(self, channel, timeout, on_line, program) -> tuple[str, str]:
        """Read stdout (line by line to ``on_line``) and stderr until the command exits."""
        deadline = None if timeout is None else time.monotonic() + timeout
        out, err, framer = [], [], LineFramer(self.name, program)
        while True:
            select.select([channel], [], [], 0.05)
            while channel.recv_ready():
                chunk = channel.recv(65536)
                out.append(chunk)
                if on_line:
                    try:
                        for line in framer.feed(chunk):
                            on_line(line)
                    except Exception:  # a line past the limit, or one its reader refused
                        channel.close()
                        self._kill_remote(_reported_pid(b"".join(err)))
                        raise
            while channel.recv_stderr_ready():
                err.append(channel.recv_stderr(65536))
            if channel.exit_status_ready() and not channel.recv_ready() and not channel.recv_stderr_ready():
                break
            if not channel.get_transport().is_active():
                raise EOFError("SSH transport closed")
            if deadline is not None and time.monotonic() > deadline:
                channel.close()
                self._kill_remote(_reported_pid(b"".join(err)))
                raise CommandTimeout(f"command on {self.name} timed out after {timeout:g} s: {program}",
                                     "raise --timeout or check that the device is not overloaded")
        if on_line and (rest := framer.flush()) is not None:
            on_line(rest)
        return b"".join(out).decode(errors="replace"), b"".join(err).decode(errors="replace")

    def _mkdirs(self, sftp, folder: str) -> None:
        parts, path = folder.strip("/").split("/"), ""
        for part in parts:
            path += "/" + part
            try:
                sftp.stat(path)
            except OSError:
                sftp.mkdir(path)

    def push(self, local: Path, remote: str) -> None:
        tmp = f"{remote}.part-{uuid.uuid4().hex[:8]}"
        try:
            with self._dropped_connection(f"push to {remote}"):
                sftp = self._sftp_client()
                self._mkdirs(sftp, posixpath.dirname(remote))
                sftp.put(str(local), tmp)
                sftp.posix_rename(tmp, remote)
        except OSError as exc:
            self._try_remove(self._sftp_client(), tmp)
            raise TransportError(f"push of {local} to {self.name}:{remote} failed: {exc}",
                                 "check free space and permissions: aiot devices doctor " + self.name) from None

    @staticmethod
    def _try_remove(sftp, path: str) -> None:
        try:
            sftp.remove(path)
        except OSError:
            pass

    def pull(self, remote: str, local: Path, *, max_bytes: int | None = None) -> None:
        def capped(done: int, _total: int) -> None:  # paramiko calls it after each block
            if max_bytes is not None and done > max_bytes:
                raise FileTooLarge(self.name, remote, max_bytes)

        try:
            with self._dropped_connection(f"pull of {remote}"), atomic_path(Path(local)) as tmp:
                self._sftp_client().get(remote, str(tmp), callback=capped)
        except OSError as exc:
            raise TransportError(f"pull of {self.name}:{remote} failed: {exc}") from None

    def exists(self, remote: str) -> bool:
        return self.stat(remote) is not None

    def stat(self, remote: str) -> FileStat | None:
        try:
            with self._dropped_connection(f"stat of {remote}"):
                st = self._sftp_client().stat(remote)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise TransportError(f"stat of {self.name}:{remote} failed: {exc}") from None
        return FileStat(remote, st.st_size or 0, float(st.st_mtime or 0), statmod.S_ISDIR(st.st_mode or 0))

    def info(self) -> dict:
        facts = probe_linux(self)
        facts.update({"transport": "ssh", "address": f"{self.entry.host}:{self.entry.port or 22}",
                      "user": self.entry.user, "python_path": self.python(), "labels": dict(self.entry.labels)})
        return facts


class _SshStream(LineStream):
    """A command on an SSH channel: stdin by ``sendall``, EOF by ``shutdown_write``."""

    def __init__(self, transport: SshTransport, channel, program: str) -> None:
        super().__init__(transport.name, program, pid_on_stderr=True)
        self._transport, self._channel = transport, channel
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        channel = self._channel
        try:
            while True:
                select.select([channel], [], [], 0.2)
                while channel.recv_ready():
                    self._on_stdout(channel.recv(65536))
                while channel.recv_stderr_ready():
                    self._on_stderr(channel.recv_stderr(65536))
                if channel.exit_status_ready() and not channel.recv_ready() \
                        and not channel.recv_stderr_ready():
                    break
                if channel.closed or not channel.get_transport().is_active():
                    break
        except (OSError, EOFError, ValueError):  # ValueError: select() on a channel closed under it
            pass
        self._on_end(channel.recv_exit_status() if channel.exit_status_ready() else None)

    def _write(self, data: bytes) -> None:
        self._channel.sendall(data)

    def _close_stdin(self) -> None:
        self._channel.shutdown_write()

    def _kill(self) -> None:
        self._transport._kill_remote(self._wait_for_pid())
        self._channel.close()

    def _release(self) -> None:
        self._channel.close()


def _reported_pid(stderr: bytes) -> int | None:
    """The PID from the marker line the wrapped command prints first on stderr."""
    first, newline, _ = stderr.partition(b"\n")
    if not newline or not first.startswith(PID_MARKER.encode()):
        return None
    value = first[len(PID_MARKER):]
    return int(value) if value.isdigit() else None


def _without_pid_line(stderr: str) -> str:
    return stderr.split("\n", 1)[1] if stderr.startswith(PID_MARKER) else stderr


def load_known_hosts(entry: DeviceEntry, hosts) -> None:
    """Read ``entry``'s known_hosts into ``hosts`` (a paramiko HostKeys; none if absent).

    Raises:
        TransportError: a line paramiko cannot parse, by file and line number (paramiko
            would raise InvalidHostKey from deep inside, as a traceback).
    """
    paramiko = _paramiko()
    path = known_hosts_path(entry)
    if not path.exists():
        return
    try:
        hosts.load(str(path))
    except (paramiko.hostkeys.InvalidHostKey, paramiko.SSHException, ValueError, OSError) as exc:
        bad = getattr(exc, "line", None)
        where = f"{path}, line {_line_number(path, bad)}" if bad else str(path)
        raise SshSetupError(f"known_hosts file {where} is corrupt: {_reason(exc)}",
                             f"delete that line, then run: aiot devices trust {entry.name}") from None


def _line_number(path: Path, line: str) -> int | str:
    """The 1-based number of ``line`` in ``path`` ('?' if it cannot be found again)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "?"
    wanted = line.strip()
    return next((i for i, text in enumerate(lines, 1) if text.strip() == wanted), "?")


def _reason(exc: BaseException) -> str:
    """A short one-line reason: paramiko's InvalidHostKey wraps the real error in ``exc.exc``."""
    inner = getattr(exc, "exc", None) or exc
    text = str(inner).strip().splitlines()
    return text[0] if text else type(inner).__name__


def check_key_file(entry: DeviceEntry) -> None:
    """The SSH private key file of ``entry`` exists and is a key paramiko can read.

    paramiko would report a missing key as 'cannot reach' and a garbage one as a bare
    SSHException or ValueError; this names the file and what is wrong with it.

    Raises:
        TransportError: missing, unreadable, not a private key, or passphrase-protected.
    """
    paramiko = _paramiko()
    path = Path(entry.key).expanduser()
    fix = f"give a private key file: aiot devices add {entry.name} ... --key FILE --replace"
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "does not exist"
        raise SshSetupError(f"SSH key {path} of '{entry.name}' {what}", fix)
    try:
        paramiko.PKey.from_path(path)
    except paramiko.PasswordRequiredException:
        raise SshSetupError(f"SSH key {path} of '{entry.name}' is protected by a passphrase, "
                             "which aiot cannot ask for",
                             "load it into ssh-agent and drop the key from the entry, or use a key "
                             "without a passphrase") from None
    except (paramiko.SSHException, ValueError, TypeError, OSError):
        # paramiko's own words here are cryptography's PEM internals (and a URL): not useful.
        raise SshSetupError(f"SSH key {path} of '{entry.name}' is not a private key aiot can "
                             "read (damaged, a public key, or an unknown kind)", fix) from None


def fetch_host_key(entry: DeviceEntry):
    """The host key the server at ``entry`` presents (for the user to verify and trust)."""
    paramiko = _paramiko()
    import socket

    try:
        sock = socket.create_connection((entry.host, entry.port or 22), timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        raise TransportError(f"cannot reach '{entry.name}' at {entry.host}:{entry.port or 22}: {exc}") from None
    transport = paramiko.Transport(sock)
    try:
        transport.start_client(timeout=CONNECT_TIMEOUT_S)
        return transport.get_remote_server_key()
    except paramiko.SSHException as exc:
        raise TransportError(f"'{entry.name}' did not complete an SSH handshake: {exc}") from None
    finally:
        transport.close()


def trust_host_key(entry: DeviceEntry, key, replace: bool = False) -> bool:
    """Record ``key`` for ``entry`` in its known_hosts; returns False if it was already there.

    Raises:
        TransportError: a different key is recorded and ``replace`` is False.
    """
    paramiko = _paramiko()
    path = known_hosts_path(entry)
    hosts = paramiko.HostKeys()
    load_known_hosts(entry, hosts)
    name = host_key_name(entry)
    known = hosts.lookup(name) or {}
    current = known.get(key.get_name())
    if current is not None and current == key:
        return False
    if known and not replace:
        raise TransportError(f"a different host key is recorded for '{entry.name}' ({name})",
                             f"verify it, then run: aiot devices trust {entry.name} --replace")
    if replace and name in hosts:
        del hosts[name]
    hosts.add(name, key.get_name(), key)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        hosts.save(str(tmp))
    return True


def fingerprint(key) -> str:
    """``SHA256:...`` as OpenSSH prints it."""
    import base64
    import hashlib

    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")
