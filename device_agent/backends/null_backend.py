"""Null backend: a TEST runtime that sleeps instead of computing. Never a measurement of a model.

It exists to benchmark aiot itself (the campaign engine, transports, the agent's overhead),
in the manner of MLPerf's null SUT: many emulated devices can "run" models without the host's
CPUs being the bottleneck, since a sleeping inference uses no CPU. Its artifact is a JSON file
(``aiot convert MODEL --format null`` writes one)::

    {"format": "aiot-null", "sleep_ms": 5.0, "input_shape": [1, 3, 224, 224], "outputs": 1000}

Each ``invoke`` sleeps ``sleep_ms`` (``time.sleep``, so the OS timer's slack adds tens of µs)
and the output is zeros of shape ``(1, outputs)``. It needs no runtime, only the NumPy the
agent needs anyway, so it is available wherever the agent can run a model.
"""

from __future__ import annotations

import io
import json
import math
import time

from .. import AGENT_VERSION
from ..signature import check_arrays, entry
from .base import SessionBase

NAME = "null"
EXTENSIONS = (".json",)
TOOLCHAIN = None  # the runtime is the agent itself
FORMAT = "aiot-null"
#: ``profile``'s answer (see ``profiling.py``): a sleep has no operators.
NO_PROFILER = "the null test backend sleeps per inference: it has no operators to time"


def installed_version() -> str | None:
    """Same as :func:`version`: this backend's runtime is the agent itself (cheap to check)."""
    return version()


def version() -> str | None:
    """The agent's version (the agent is this backend's whole runtime), or None without NumPy,
    which the agent needs to run anything."""
    import importlib.util

    return AGENT_VERSION if importlib.util.find_spec("numpy") is not None else None


def _check(doc) -> None:
    """Raise ValueError naming the first field of a null artifact that is wrong."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"not a null-backend artifact (needs \"format\": \"{FORMAT}\")")
    sleep = doc.get("sleep_ms")
    if isinstance(sleep, bool) or not isinstance(sleep, (int, float)) or not 0 <= sleep < math.inf:
        raise ValueError(f"'sleep_ms' must be a non-negative number, got {sleep!r}")
    shape = doc.get("input_shape")
    if not isinstance(shape, list) or not shape or not all(
            isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
        raise ValueError(f"'input_shape' must be a list of positive integers, got {shape!r}")
    outputs = doc.get("outputs")
    if isinstance(outputs, bool) or not isinstance(outputs, int) or outputs < 1:
        raise ValueError(f"'outputs' must be a positive integer, got {outputs!r}")


class Session(SessionBase):
    """A loaded null artifact; ``threads`` is accepted and ignored (sleeping uses no core)."""
    def __init__(self, path: str, threads: int, input_shapes: dict | None = None) -> None:
        import numpy as np

        with io.open(path, encoding="utf-8") as fh:  # plain ``open`` is this module's own
            doc = json.load(fh)
        _check(doc)
        self.sleep_s = doc["sleep_ms"] / 1000.0
        self._out = np.zeros((1, doc["outputs"]), dtype=np.float32)
        self._declare([entry("input", doc["input_shape"], "float32")],
                      [entry("output", self._out.shape, "float32")], input_shapes)

    def set_inputs(self, arrays) -> None:
        check_arrays(self.inputs, arrays)  # the values do not matter to a sleep

    def invoke(self) -> None:
        time.sleep(self.sleep_s)

    def outputs_all(self) -> list:
        return [self._out]


def open(path: str, threads: int, input_shapes: dict | None = None) -> Session:  # noqa: A001
    """Load the null artifact at ``path`` (its one input, ``input``, has no dynamic dim)."""
    return Session(path, threads, input_shapes)
