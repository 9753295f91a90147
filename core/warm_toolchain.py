"""Warm toolchain interpreters: one per toolchain, its heavy imports done once per aiot
process, forking a fresh child per command (see :mod:`aiot.core.warm_server`).

An LCE conversion starts the ``lce`` toolchain's Python to import TensorFlow (~7 s of CPU)
for a build of a few seconds; an ExecuTorch conversion starts the ``executorch`` one twice,
to lower (``import executorch.exir``: ~13 s) and to check parity. A campaign or a paper grid
converts dozens of models, each paying those imports again. Here the first command of a
toolchain starts its warm server, and every command is a ``fork`` of it: the command still
runs in a process of its own (its crash, its memory, its working directory and environment
are its own, and a signal that kills it is reported as for a fresh interpreter), only the
imports are shared. A command the server cannot take (it is busy with another thread's, the
command is not a script, ``-m`` or ``-c`` run, no ``fork``) runs cold, as before.

``AIOT_WARM_TOOLCHAINS=0`` turns it off (every command a fresh interpreter).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import select
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from aiot.core import children, environment, stage_limit

log = logging.getLogger(__name__)

#: The switch; anything but "0" keeps warm servers on.
ENV = "AIOT_WARM_TOOLCHAINS"
#: The server script, run by path inside a toolchain environment.
SERVER = Path(__file__).with_name("warm_server.py")
#: Warm servers one aiot process keeps (each holds its toolchain's imports in memory,
#: 0.3–0.6 GB); past it the least recently used idle one is closed.
MAX_SERVERS = 3
#: Seconds a server may take to import its modules.
READY_TIMEOUT_S = 300.0
#: Seconds from a command sent to its child started (a fork).
FORK_TIMEOUT_S = 30.0

_LOCK = threading.Lock()
_SERVERS: dict[tuple, _Server] = {}


@dataclass(frozen=True)
class Warmth:
    """What a toolchain's warm server does once: ``modules`` imported, then ``code`` run (a
    small piece of the toolchain's own work whose first run fills its caches)."""

    modules: tuple[str, ...] = ()
    code: str = ""


class _Gone(Exception):
    """The server ended (or never became ready): the command runs cold."""


class _Server:
    """One warm interpreter and the pipe to it; one command at a time (:attr:`busy`)."""

    def __init__(self, python: str, warmth: Warmth, env: dict) -> None:
        self.busy = threading.Lock()
        self.used = time.monotonic()
        self._buffer = b""
        self.proc = subprocess.Popen(
            [python, "-P", str(SERVER), *warmth.modules], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        try:
            with children.tracked(self.proc):  # a stop during the imports ends them too
                self._send({"warm_up": warmth.code})
                self._line(stage_limit.budget(READY_TIMEOUT_S)[0])  # within a stage's limit
        except BaseException:
            self.close()
            raise

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        children.kill_group(self.proc)
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)

    def run(self, argv: list[str], cwd: str, env: dict, timeout: float | None):
        """``argv`` run as a child of the server: ``(returncode, stdout, stderr)``.

        Raises:
            _Gone: the server was not there to take it, or it died under the command
                (killed with it: the outcome is unknown, so the caller runs it cold).
            aiot.core.children.TimedOut: it ran past ``timeout`` (the server is killed).
            aiot.core.children.Stopped: a stop killed it.
        """
        with tempfile.TemporaryDirectory(prefix="aiot-warm-") as tmp:
            out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
            request = {"argv": argv, "cwd": cwd, "env": env, "stdout": str(out),
                       "stderr": str(err)}
            try:
                self._send(request)
                pid = self._line(FORK_TIMEOUT_S).get("pid")
            except (OSError, _Gone, subprocess.TimeoutExpired):
                self.close()
                raise _Gone() from None
            try:
                with children.tracked(self.proc):  # a stop kills the group: server and child
                    status = self._line(timeout)["status"]
            except _Gone:  # the server died under the command: a stop, or its fate unknown
                self.close()
                children.refuse_if_stopped()
                raise
            except subprocess.TimeoutExpired:  # the child's state first: a stopped one says so
                state = children.process_state(pid)
                self.close()
                raise children.TimedOut(argv, timeout, pid, state) from None
            except BaseException:  # Ctrl-C: the command must not outlive it
                self.close()
                raise
            return status, _read(out), _read(err)

    def _send(self, message: dict) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def _line(self, timeout: float | None) -> dict:
        deadline = None if timeout is None else time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if left == 0.0 or not select.select([fd], [], [], left)[0]:
                raise subprocess.TimeoutExpired(self.proc.args, timeout)
            chunk = os.read(fd, 65536)
            if not chunk:
                raise _Gone()
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ""


def enabled() -> bool:
    """Whether commands may run in warm servers (``AIOT_WARM_TOOLCHAINS`` not ``0``)."""
    return environment.get(ENV, "1") != "0" and hasattr(os, "fork")


def run(python: str, warmth: Warmth, argv: list[str], *, cwd, env: dict,
        timeout: float | None) -> subprocess.CompletedProcess:
    """``python ARGV`` as :func:`aiot.core.children.run` runs it, in the warm server of
    ``python`` warmed by ``warmth`` where one can take it, else cold.

    Raises:
        aiot.core.children.TimedOut: it ran past ``timeout`` (it is killed first).
        aiot.core.children.Stopped: aiot was told to stop before or while it ran.
    """
    children.refuse_if_stopped()
    cwd = str(cwd) if cwd is not None else os.getcwd()
    server = _take(python, warmth, env) if warmth.modules and _warmable(argv) else None
    in_stage = stage_limit.current()
    if in_stage is not None and timeout is not None:  # the server's start spent some of it
        timeout = min(timeout, in_stage.left())
    if server is not None:
        try:
            started = time.monotonic()
            code, stdout, stderr = server.run(argv, cwd, env, timeout)
            log.debug("warm %s: %s in %.1f s", Path(python).parent.parent.name, argv[:2],
                      time.monotonic() - started)
            return subprocess.CompletedProcess([python, *argv], code, stdout, stderr)
        except _Gone:
            log.debug("warm %s server gone; running cold", python)
        finally:
            server.used = time.monotonic()
            server.busy.release()
    started = time.monotonic()
    try:
        return children.run([python, *argv], cwd=cwd, timeout=timeout, env=env)
    finally:
        log.debug("cold %s: %s in %.1f s", Path(python).parent.parent.name, argv[:2],
                  time.monotonic() - started)


def _warmable(argv: list[str]) -> bool:
    rest = argv[1:] if argv[:1] == ["-P"] else argv
    return bool(rest) and (rest[0] in ("-m", "-c") or not rest[0].startswith("-"))


def _take(python: str, warmth: Warmth, env: dict) -> _Server | None:
    """The idle warm server for ``python``, started if need be, its ``busy`` lock held; None
    where warm servers are off, the server is busy, or it would not start."""
    if not enabled():
        return None
    key = (python, warmth)
    with _LOCK:
        server = _SERVERS.get(key)
        if server is not None and not server.alive():
            del _SERVERS[key]
            server = None
        if server is not None:
            return server if server.busy.acquire(blocking=False) else None
        _make_room()
        try:
            server = _Server(python, warmth, env)
        except (OSError, _Gone, subprocess.TimeoutExpired, ValueError) as exc:
            log.debug("warm %s server did not start (%s); running cold", python, exc)
            return None
        server.busy.acquire()
        _SERVERS[key] = server
        return server


def _make_room() -> None:
    idle = sorted((s.used, k) for k, s in _SERVERS.items() if not s.busy.locked())
    while len(_SERVERS) >= MAX_SERVERS and idle:
        _SERVERS.pop(idle.pop(0)[1]).close()


@atexit.register
def close_all() -> None:
    """End every warm server (at exit; a server also ends when its stdin closes)."""
    with _LOCK:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
    for server in servers:
        server.close()
