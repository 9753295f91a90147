"""Time limits of a conversion's stages: no conversion waits for ever on a child process.

A conversion (:func:`aiot.converters.api.convert_model`) runs in stages: ``load`` (the
source model; a user's factory runs in a child process), ``export`` (the converter: LCE and
ExecuTorch run their toolchain's interpreter as a child) and ``parity`` (the artifact run
by its runtime, a toolchain child for LCE and ExecuTorch, a forked reader for others). A
child that never ends (a deadlock, a process stopped with SIGSTOP or by a debugger, which
does not run at all) would block the conversion, and a sweep's device with it, for ever.

Each stage has :func:`limit_s` seconds (``AIOT_CONVERT_TIMEOUT_S``, ``aiot convert
--timeout-s``; default :data:`DEFAULT_S`). Every child a stage starts is given what is left
of them (:func:`budget`); when they run out its process group is killed and the conversion
fails with one line naming the stage, the limit and the process (:class:`StageTimeout`),
whether the child was busy, waiting or stopped. A stage's own Python work in aiot's process
(a TFLite export through ``litert_torch``, ONNX Runtime's parity) cannot be killed, so the
limit bounds the child processes, which is where a conversion can hang.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from dataclasses import dataclass

from aiot.core import environment
from aiot.core.errors import AiotError, ConversionError, UsageError

#: The environment variable that sets every stage's limit, in seconds.
ENV = "AIOT_CONVERT_TIMEOUT_S"
#: Seconds a stage may take by default: the limit one toolchain command always had (an LCE
#: build of a ResNet, an ExecuTorch lowering on a loaded box take minutes, not this).
DEFAULT_S = 900.0

_LOCAL = threading.local()


def limit_s() -> float:
    """``AIOT_CONVERT_TIMEOUT_S`` (seconds > 0), else :data:`DEFAULT_S`.

    Raises:
        UsageError: the variable is not a finite number of seconds above 0.
    """
    text = environment.get(ENV, "").strip()
    return DEFAULT_S if not text else parse_limit(text, ENV)


def parse_limit(text: str, where: str = ENV) -> float:
    """``text`` as a stage limit (finite seconds > 0); one line naming ``where`` otherwise."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"{where}={text} is not a number of seconds above 0",
                         f"e.g. {ENV}={DEFAULT_S:g} (the default: each conversion stage may "
                         f"take {DEFAULT_S:g} s)")
    return value


@dataclass(frozen=True)
class Stage:
    """One stage of one conversion in flight in this thread."""

    conversion: str  # "tiny_cnn to tflite"
    name: str  # load, export, parity
    limit: float  # seconds
    deadline: float  # time.monotonic() when it runs out

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


@contextlib.contextmanager
def stage(conversion: str, name: str):
    """The block is stage ``name`` of ``conversion``: the children it starts share its limit."""
    limit = limit_s()
    outer = getattr(_LOCAL, "stage", None)
    _LOCAL.stage = Stage(conversion, name, limit, time.monotonic() + limit)
    try:
        yield _LOCAL.stage
    finally:
        _LOCAL.stage = outer


def current() -> Stage | None:
    """The stage this thread is in, or None outside a conversion."""
    return getattr(_LOCAL, "stage", None)


def budget(timeout: float | None) -> tuple[float | None, Stage | None]:
    """``(seconds a child may run, the stage whose limit that is, or None)``: ``timeout``
    where the child's own limit comes first or no stage is in flight, else what is left of
    the stage."""
    found = current()
    if found is None:
        return timeout, None
    left = found.left()
    if timeout is not None and timeout < left:
        return timeout, None
    return left, found


class StageTimeout(ConversionError):
    """A conversion stage ran past its limit; its child process was killed."""

    def __init__(self, found: Stage, process: str | None = None, stopped: bool = False) -> None:
        detail = f"stage '{found.name}' ran past its {found.limit:g} s limit ({ENV})"
        if process:
            detail += f"; {process}"
        hint = (("a process stopped by SIGSTOP (kill -STOP, Ctrl-Z, a debugger) does not run: "
                 "find what stopped it, then convert again; " if stopped else "")
                + f"give each stage longer with {ENV}={found.limit * 2:g} or aiot convert "
                f"--timeout-s {found.limit * 2:g} (default {DEFAULT_S:g} s)")
        AiotError.__init__(self, f"conversion of {found.conversion}: {detail}", hint)
        # ConversionError's facts (a conversion matrix's row shows the detail)
        self.format, self.stage = found.conversion.rsplit(" to ", 1)[-1], found.name
        self.detail = detail


def ran_out(found: Stage, what: str, pid: int | None, state: str | None) -> StageTimeout:
    """The error of ``found`` run out while ``what`` (``the toolchain process``) ``pid`` ran,
    ``state`` being its ``/proc`` state letter then (:func:`aiot.core.children.process_state`)."""
    if pid is None:
        return StageTimeout(found, f"{what} was killed")
    stopped = state in ("T", "t")
    how = " (stopped by a signal: it was not running)" if stopped else ""
    return StageTimeout(found, f"{what} {pid}{how} was killed", stopped)

