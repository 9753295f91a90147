"""Native parsers of untrusted files, run where their crash cannot take aiot down.

A runtime reading a damaged model (LiteRT, ONNX Runtime, PyTorch Mobile) can die in C++ —
a segmentation fault, an abort, the kernel's OOM kill — or hang, and in aiot's own process
that would end ``aiot models info`` or a sweep with no message and no record. :func:`isolated`
runs such a reader in a forked child instead: forked after aiot's imports, it costs
milliseconds rather than a fresh interpreter, and the parent turns the child's death or
silence into one :class:`RuntimeCrash` naming the file. The child sends back text only
(JSON), never a pickle. Where ``os.fork`` does not exist the reader runs in-process.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time
import warnings
from collections.abc import Callable

from aiot.core import children, stage_limit
from aiot.core.errors import AiotError, ArtifactError

#: Seconds a runtime may take to read (or run, for ``predict``) a model before aiot gives up
#: on it: far above any real model's load, so only a runtime stuck on the file reaches it.
TIMEOUT_S = 300.0

_HINT = "the file is damaged or not a model this runtime reads"
#: Signals that stop a reader from outside rather than mark its crash.
_STOPPED_BY = {getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
               if hasattr(signal, name)}


class RuntimeCrash(ArtifactError):
    """A runtime died, hung or was killed reading the user's file: the file is to blame (or
    the runtime), not the command; it is input to fix, as a refused file is."""

    exit_code = 2


def isolated(read: Callable[[], str], *, file: str, runtime: str,
             timeout: float | None = None) -> str:
    """``read()``'s text, computed in a forked child of this process.

    Args:
        read: parses the untrusted file and returns text (e.g. the device agent's protocol
            lines); an exception it raises comes back as a one-line :class:`ArtifactError`.
        file: the file's name, for the error line.
        runtime: what reads it (a backend name), for the error line.
        timeout: seconds before the child counts as hung (default :data:`TIMEOUT_S`).

    Raises:
        RuntimeCrash: the child died on a signal, exited without an answer, or hung.
        ArtifactError: ``read`` raised.
    """
    if not hasattr(os, "fork"):
        return read()
    for stream in (sys.stdout, sys.stderr):  # else the child's exit would repeat their buffers
        with contextlib.suppress(Exception):
            stream.flush()
    read_fd, write_fd = os.pipe()
    try:
        with warnings.catch_warnings():  # 3.12+ warns of fork in a threaded process: the
            warnings.simplefilter("ignore", DeprecationWarning)  # child only runs ``read``
            pid = os.fork()
    except OSError as exc:  # no memory or process slot for the child
        os.close(read_fd)
        os.close(write_fd)
        raise AiotError(f"{file}: cannot start a process to read it ({exc.strerror})",
                        "free memory or processes and run the command again") from None
    if pid == 0:
        _child(read, read_fd, write_fd)  # never returns
    os.close(write_fd)
    # Within a conversion stage, no longer than what is left of its limit.
    allowed, stage = stage_limit.budget(TIMEOUT_S if timeout is None else timeout)
    deadline = time.monotonic() + allowed
    status = state = None
    try:
        data = _read_all(read_fd, deadline)
        status = _wait(pid, deadline) if data is not None else None
    finally:
        os.close(read_fd)
        if status is None:  # hung, or this process was interrupted: the child goes too
            state = children.process_state(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    if (data is None or status is None) and stage is not None:
        raise stage_limit.ran_out(stage, f"the {runtime} runtime process reading {file}", pid, state)
    if data is None or status is None:
        raise RuntimeCrash(f"{file}: the {runtime} runtime did not finish reading it within "
                           f"{TIMEOUT_S if timeout is None else timeout:.0f} s (stopped)", _HINT)
    return _answer(data, status, file, runtime)


def _child(read: Callable[[], str], read_fd: int, write_fd: int) -> None:
    """The forked side: run ``read``, send its JSON answer, leave without aiot's exit handlers
    (they belong to the parent: its store, its terminal)."""
    code = 70
    try:
        os.close(read_fd)
        for signum in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if signum is not None:  # the parent's handlers mark its records, not the child's
                signal.signal(signum, signal.SIG_DFL)
        import faulthandler

        faulthandler.disable()  # a crash here is reported by the parent in one line
        torch = sys.modules.get("torch")
        if torch is not None:  # its OpenMP pool does not survive fork: a parallel region
            torch.set_num_threads(1)  # after the parent used one would wait forever
        try:
            answer = {"text": read()}
        except Exception as exc:  # noqa: BLE001 - the reader's failure goes to the parent
            lines = str(exc).strip().splitlines()
            answer = {"raised": type(exc).__name__, "message": (lines or [""])[0][:300]}
        payload = json.dumps(answer).encode()
        while payload:
            payload = payload[os.write(write_fd, payload):]
        code = 0
    finally:
        os._exit(code)


def _read_all(fd: int, deadline: float) -> bytes | None:
    """Everything the child writes, up to its end of the pipe closing; None past ``deadline``."""
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _wait(pid: int, deadline: float) -> int | None:
    """The child's wait status once it has exited; None if it is still there at ``deadline``."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.002)


def _answer(data: bytes, status: int, file: str, runtime: str) -> str:
    """The child's text, or the one line that says how it ended instead."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        if signum in _STOPPED_BY:  # Ctrl-C, a closed terminal, kill: not the file's doing
            raise AiotError(f"{file}: the {runtime} runtime was stopped by "
                            f"{signal_name(signum)} while reading it", "run the command again")
        raise RuntimeCrash(f"{file}: the {runtime} runtime crashed reading it "
                           f"({signal_name(signum)})", _HINT)
    try:
        answer = json.loads(data) if data else None
    except ValueError:
        answer = None
    if os.WEXITSTATUS(status) != 0 or not isinstance(answer, dict):
        raise RuntimeCrash(f"{file}: the {runtime} runtime quit reading it (exit status "
                           f"{os.WEXITSTATUS(status)}, no answer)", _HINT)
    if "raised" in answer:
        raise ArtifactError(f"{file}: {runtime} failed reading it: {answer['raised']}: "
                            f"{answer['message']}", _HINT)
    return answer["text"]


def signal_name(signum: int) -> str:
    """``SIGSEGV``; ``SIGKILL`` says who sends it, as the likely cause is memory (also for a
    toolchain interpreter's death, :func:`aiot.core.toolchains.run_python`)."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
    if signum == getattr(signal, "SIGKILL", None):
        return f"{name}: out of memory, or killed"
    return name
