"""Child processes that aiot waits on, stoppable from the thread that was told to stop.

A conversion runs its toolchain (TensorFlow, LCE, ExecuTorch, a user's factory) as a child
process, often from a campaign's device worker thread. Ctrl-C, SIGTERM and SIGHUP reach the
main thread only: without this module the worker's child ran to its end (minutes for an LCE
conversion) and aiot with it. :func:`run` starts each child in a session of its own (a
terminal's Ctrl-C does not reach it half-way: aiot ends it, with whatever it started) and
registers it, so :func:`stop_all` ends every child in flight at once and refuses new ones
until :func:`allow` (the next command, or the next campaign).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading

from aiot.core.errors import AiotError

#: The name of a campaign's device worker threads: a stopped command does not wait for one
#: still inside a conversion's own Python work (:func:`aiot.host.cli.app.main`).
WORKER_THREAD = "aiot-device"

_LOCK = threading.Lock()
_RUNNING: set[subprocess.Popen] = set()
_STOPPED = threading.Event()


class Stopped(AiotError):
    """A child process was ended (or not started) because aiot was told to stop."""


class TimedOut(subprocess.TimeoutExpired):
    """A child ran past its timeout and was killed: ``pid`` (None if unknown) and ``state``,
    its ``/proc`` state letter when the time ran out (``T``: stopped by a signal)."""

    def __init__(self, cmd, timeout: float, pid: int | None, state: str | None) -> None:
        super().__init__(cmd, timeout)
        self.pid, self.state = pid, state


def process_state(pid: int | None) -> str | None:
    """The ``/proc`` state letter of ``pid`` (``R``, ``S``, ``T`` stopped...), or None."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            return fh.read().rsplit(") ", 1)[1][:1]
    except (OSError, IndexError):
        return None


def run(argv: list[str], *, timeout: float | None = None, input_text: str | None = None,
        **popen) -> subprocess.CompletedProcess:
    """``subprocess.run(argv, capture_output=True, text=True)``, stoppable by :func:`stop_all`.

    The child and what it starts form their own process group, killed on a timeout, on an
    exception in the waiting thread (Ctrl-C) and by :func:`stop_all` from any thread.

    Raises:
        TimedOut: it ran past ``timeout`` (it is killed; a ``subprocess.TimeoutExpired``).
        Stopped: aiot was told to stop before or while it ran.
    """
    refuse_if_stopped()
    stdin = subprocess.PIPE if input_text is not None else subprocess.DEVNULL
    proc = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, **popen)
    with _LOCK:
        _RUNNING.add(proc)
    try:
        refuse_if_stopped()  # a stop between the check above and the registration
        stdout, stderr = proc.communicate(input_text, timeout=timeout)
    except subprocess.TimeoutExpired:  # its state before the kill: a stopped child says so
        raise TimedOut(argv, timeout, proc.pid, process_state(proc.pid)) from None
    finally:
        with _LOCK:
            _RUNNING.discard(proc)
        if proc.poll() is None:
            kill_group(proc)
            proc.communicate()
    refuse_if_stopped()  # ended by stop_all: say so, not the SIGKILL it died of
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


@contextlib.contextmanager
def tracked(proc: subprocess.Popen):
    """Register a child started elsewhere (in a session of its own) for :func:`stop_all`
    while the block waits on it."""
    with _LOCK:
        _RUNNING.add(proc)
    try:
        refuse_if_stopped()
        yield proc
    finally:
        with _LOCK:
            _RUNNING.discard(proc)


def stop_all() -> int:
    """Kill every registered child's process group and refuse new children until
    :func:`allow`; returns how many were running."""
    _STOPPED.set()
    with _LOCK:
        running = list(_RUNNING)
    for proc in running:
        kill_group(proc)
    return len(running)


def allow() -> None:
    """Start children again (a new command or campaign after a stop)."""
    _STOPPED.clear()


def stopping() -> bool:
    """Whether :func:`stop_all` was called since the last :func:`allow`."""
    return _STOPPED.is_set()


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``'s process group (it leads one: started with a session of its own)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def refuse_if_stopped() -> None:
    """Raise :class:`Stopped` after :func:`stop_all` (until :func:`allow`)."""
    if _STOPPED.is_set():
        raise Stopped("stopped: aiot was told to stop (Ctrl-C, SIGTERM or SIGHUP)",
                      "run the command again; finished work is kept")
