"""``session``: one long-lived agent per device that runs a campaign's commands.

Started as a one-shot command, every run costs a shell round trip to the device, a Python
start, the agent's imports and a spec file pushed, and its telemetry two more round trips
(before and after). ``python -m device_agent session`` pays that once per campaign. It
emits ``ready`` (``agent_version``, ``pid``, ``isolation``) and then reads requests on stdin,
one JSON object per line, one at a time::

    {"op": "hello", "id": 1}
    {"op": "telemetry", "id": 2}
    {"op": "run" | "memory" | "predict" | "inspect" | "profile", "id": 3, "spec": {...}}
    {"op": "close"}

``hello`` gets a ``hello`` line and ``telemetry`` a ``telemetry`` line (``text``: the host's
telemetry script's sections, read from sysfs here, see :mod:`.telemetry`), both with the
request's ``id``. A malformed request gets an ``error`` line with its ``id`` and the session
goes on; ``close`` or the end of stdin ends it with exit code 0.

Measurements keep the isolation of a fresh process: each ``run``, ``memory``, ``predict``
or ``inspect`` (it loads a runtime too) is executed by a child forked from this process,
which imports no runtime (the zygote pattern; preload, below, is the one exception), so
the child's load time, first inference and peak memory are those of a fresh agent, and a
runtime that crashes takes only the child down. NumPy, which every command imports before
anything is timed, is imported here once, after ``ready``: ~0.1 s of CPU per run on a desktop
core, several times that on a phone's little core. The child's protocol lines (``progress``,
then ``result``, ``memory``, ``predicted``, ``signature`` or ``error``) are forwarded with the
request's ``id``; a child
that ends without its answer gets an ``error`` line saying how it died. Closing stdin (or
``close``) while a child runs kills it; on Linux and Android the child also dies with this
process (``PR_SET_PDEATHSIG``), since an SSH host kills the session by its PID alone.

Where the device sets ``AIOT_AGENT_PRELOAD=1`` (aiot's emulated arm64 boards, see
:mod:`aiot.host.emulator.arm64`), the session imports a run's runtime itself before forking
its child, once per runtime, and says so (``ready``'s ``preload``, ``hello``'s
``preloaded``). Under qemu-user an import is most of a run's cost (torch ~20 s of CPU,
ExecuTorch's bindings ~50 s more), while the timings are the host's anyway (INVALID). What
changes is only what the child inherits: its load time never included the import, and its
resident memory then counts the runtime's pages it touches rather than all it loaded.

Without ``os.fork`` (Windows) the session refuses to start with an ``error`` and the host
falls back to one-shot commands.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import sys

from . import AGENT_VERSION, backends, protocol
from .agent import execute
from .telemetry import telemetry_text
from .wire import emit, hello

#: Set by a device whose session may keep runtimes imported (see the module docstring).
PRELOAD_ENV = "AIOT_AGENT_PRELOAD"
#: Ops whose work runs in a forked child, and the event that answers each.
CHILD_OPS = {"run": "result", "memory": "memory", "predict": "predicted",
             "inspect": "signature", "profile": "profile"}
OPS = ("hello", "telemetry", *CHILD_OPS, "close")
_CHUNK = 65536


class _Lines:
    """Complete lines read from a file descriptor without Python's buffering, so the same
    descriptor can be watched with ``selectors`` (a buffered reader would hide lines)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = b""
        self.eof = False

    def fill(self) -> None:
        """Read what is available now (call when the descriptor is readable)."""
        chunk = os.read(self.fd, _CHUNK)
        if chunk:
            self._buffer += chunk
        else:
            self.eof = True

    def pop(self) -> bytes | None:
        """The next complete line, or None; at end of input the unterminated rest."""
        cut = self._buffer.find(b"\n")
        if cut >= 0:
            line, self._buffer = self._buffer[:cut], self._buffer[cut + 1 :]
            return line
        if self.eof and self._buffer:
            line, self._buffer = self._buffer, b""
            return line
        return None

    def has_close(self) -> bool:
        """Whether a complete ``close`` request waits among the lines read (not consumed)."""
        for line in self._buffer.split(b"\n")[:-1]:
            try:
                if json.loads(line).get("op") == "close":
                    return True
            except (ValueError, AttributeError):
                continue
        return False

    def next_blocking(self) -> bytes | None:
        """The next line, waiting for it; None at end of input."""
        while True:
            line = self.pop()
            if line is not None or self.eof:
                return line
            self.fill()


def session(stdin_fd: int = 0) -> int:
    """Serve requests from ``stdin_fd`` until ``close`` or its end (see the module docstring)."""
    if not hasattr(os, "fork"):
        emit(
            "error",
            type="Unsupported",
            message="the agent session needs os.fork; use one-shot commands on this platform",
        )
        return 2
    kept = _Runtimes() if os.environ.get(PRELOAD_ENV) == "1" else None
    emit("ready", agent_version=AGENT_VERSION, pid=os.getpid(), isolation="fork",
         **({"preload": True} if kept is not None else {}))
    _preload()
    requests = _Lines(stdin_fd)
    while True:
        line = requests.next_blocking()
        if line is None:
            return 0
        if not line.strip():
            continue
        try:
            if not _handle(line, requests, kept):
                return 0
        except BrokenPipeError:  # the host went away: nobody is left to answer
            return 0


class _Runtimes:
    """The runtimes this session imported for its children to inherit (preload mode)."""

    def __init__(self) -> None:
        self.imported: list[str] = []
        self._tried: set[str] = set()

    def import_for(self, spec) -> None:
        """Import ``spec``'s backend and its runtime here, once. One that does not import
        is left to the child, which reports it in its own words."""
        name = spec.get("backend") if isinstance(spec, dict) else None
        if not isinstance(name, str) or name not in backends.MODULES or name in self._tried:
            return
        self._tried.add(name)
        try:
            backends.load(name)
        except Exception:  # noqa: BLE001 - unavailable or broken: the child's run says so
            return
        self.imported.append(name)


def _preload() -> None:
    """Import NumPy for every child to inherit (not a runtime: nothing timed depends on it).
    An interpreter without it still serves hello and telemetry; its runs report the error."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        pass


def _handle(line: bytes, requests: _Lines, kept: _Runtimes | None = None) -> bool:
    """Answer one request line; False when the session must end (``close`` or stdin ended)."""
    try:
        request = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        emit(
            "error",
            id=None,
            type="RequestError",
            message=f"a request must be one JSON object per line: {exc}",
        )
        return True
    if not isinstance(request, dict):
        emit("error", id=None, type="RequestError", message="a request must be a JSON object")
        return True
    op, request_id = request.get("op"), request.get("id")
    if op == "close":
        return False
    if op not in OPS:
        emit(
            "error",
            id=request_id,
            type="RequestError",
            message=f"unknown op {op!r}; known: {', '.join(OPS)}",
        )
    elif op == "hello":
        emit("hello", id=request_id, **hello(),
             **({"preloaded": kept.imported} if kept is not None else {}))
    elif op == "telemetry":
        import time

        emit("telemetry", id=request_id, text=telemetry_text(), unix_s=time.time())
    else:
        if kept is not None:
            kept.import_for(request.get("spec"))
        return _supervise(op, request_id, request.get("spec"), requests)
    return True


def _supervise(op: str, request_id, spec, requests: _Lines) -> bool:
    """Fork a child for ``op``, forward its lines with ``request_id``, reap it; False when
    stdin ended meanwhile (the child is killed)."""
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        _child(op, spec, write_fd)
    os.close(write_fd)
    answered, alive = _forward(read_fd, request_id, requests, pid)
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    if alive and not answered:
        emit(
            "error",
            id=request_id,
            type="AgentDied",
            message=f"the {op} process {_how_it_ended(status)} before answering",
        )
    return alive


def _forward(read_fd: int, request_id, requests: _Lines, pid: int) -> tuple[bool, bool]:
    """Copy the child's protocol lines to stdout with the request's id until its output ends.

    Returns ``(answered, alive)``: whether its final event came, and False when the host
    closed stdin (or sent ``close``) meanwhile, in which case the child is killed.
    """
    child = _Lines(read_fd)
    selector = selectors.DefaultSelector()
    selector.register(read_fd, selectors.EVENT_READ, child)
    selector.register(requests.fd, selectors.EVENT_READ, requests)
    answered = False
    try:
        while not child.eof:
            for key, _ in selector.select():
                source = key.data
                source.fill()
                if source is requests:  # later requests wait, except the end of the session
                    if requests.eof or requests.has_close():
                        os.kill(pid, signal.SIGKILL)
                        return answered, False
                    continue
                answered = _relay(child, request_id) or answered
        return answered, True  # at its end of output the last fill relayed the rest
    finally:
        selector.close()


def _relay(child: _Lines, request_id) -> bool:
    """Forward the child's complete lines; True when one was its final answer."""
    final = False
    while (line := child.pop()) is not None:
        text = line.decode("utf-8", "replace")
        try:
            msg = protocol.decode(text)
        except protocol.ProtocolError:
            msg = None
        if msg is None:  # the runtime's own log text: the host keeps it for --verbose
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
            continue
        event = msg.pop("event")
        msg.pop("v", None)
        emit(event, **{**msg, "id": request_id})
        final = final or event != "progress"
    return final


def _child(op: str, spec, write_fd: int) -> None:
    """In the forked child: answer ``op`` on the pipe and exit without returning."""
    code = 70
    try:
        os.dup2(write_fd, 1)
        os.close(write_fd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)  # the host's requests belong to the parent
        os.close(devnull)
        _die_with_parent()
        code = execute(op, spec)
    except BaseException as exc:  # noqa: BLE001 - reported on the protocol, then exit
        try:
            emit("error", type=type(exc).__name__, message=str(exc)[:500])
        except Exception:  # noqa: BLE001, S110 - the pipe is gone: nobody is left to tell
            pass
    finally:
        try:
            sys.stdout.flush()
        finally:
            os._exit(code)  # no interpreter teardown: the parent's state is not ours to clean


def _die_with_parent() -> None:
    """Ask Linux to kill this child when the session process dies (an SSH host kills the
    session by PID, which would otherwise leave a measurement running). Best effort."""
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError, ImportError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(70)


def _how_it_ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"was killed by {name}"
    return f"exited with code {os.WEXITSTATUS(status)}"
