"""Per-operator time from each runtime's own profiler: the ``profile`` command.

Run in its own agent process after the timed run (like ``memory``), so a profiler's hooks
never touch the timed samples. The model is loaded with profiling on where the runtime wants
that at load time, warmed up, and then ``runs`` inferences are profiled.

A backend that has a profiler is a ``ProfiledBackend`` (``backends/contract.py``): ``PROFILER``
(its name, as the output states it) and ``open_profiled(path, threads, input_shapes)``, a
session with ``profile_start()`` and ``profile_stop() -> [{"name", "type", "us"}]``: one row
per call of an operator in the profiled inferences, its time in microseconds. A backend
without one says why in ``NO_PROFILER``, which the answer carries with ``available: false``.

Answer (event ``profile``): ``backend``, ``runtime_version``, ``threads``, ``available``, and
either ``reason`` or ``tool``, ``runs``, ``warmup``, ``unit`` ("ms per inference"),
``statistic``, ``total_ms`` (the ops' time summed per inference), ``ops`` (slowest first, at most
``MAX_OPS``: ``name``, ``type``, ``ms``, ``calls`` per inference, ``pct`` of ``total_ms``),
``ops_left_out`` (how many smaller ops were cut, with ``ms_left_out``) and ``by_type``
(``type``, ``ms``, ``count`` of ops, ``pct``).
"""

from __future__ import annotations

import statistics

from . import backends
from .process import pin
from .signature import SpecError, prepare
from .spec import RunSpec
from .wire import emit

PROFILE_RUNS = 20  # profiled inferences, after the warm-up
PROFILE_WARMUP = 3
MAX_OPS = 200  # a record keeps the slowest ones; the rest are summed in ms_left_out


def _count(spec: RunSpec, key: str, default: int, least: int) -> int:
    value = getattr(spec, key)
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise SpecError(f"profile spec field '{key}' must be an integer ≥ {least}, got {value!r}")
    return value


def summarize(rows: list[dict], runs: int) -> dict:
    """Per-call rows of ``runs`` inferences → the answer's ``total_ms``, ``ops``, ``by_type``.

    An op's time per inference is the median of its calls times its calls per inference:
    a median, as for the run itself, because one preempted call among twenty (a loaded
    host, a phone's scheduler) would otherwise move the op up the table.
    """
    calls: dict[str, list[float]] = {}
    types: dict[str, str] = {}
    for row in rows:
        calls.setdefault(row["name"], []).append(float(row["us"]))
        types.setdefault(row["name"], row["type"])
    per_run = {name: statistics.median(us) * len(us) / runs for name, us in calls.items()}
    total_us = sum(per_run.values())

    def pct(us: float) -> float:
        return 100.0 * us / total_us if total_us else 0.0

    ops = [{"name": name, "type": types[name], "ms": round(us / 1000, 6),
            "calls": len(calls[name]) / runs, "pct": round(pct(us), 3)}
           for name, us in sorted(per_run.items(), key=lambda kv: -kv[1])]
    by_kind: dict[str, list] = {}
    for name, us in per_run.items():
        kind = by_kind.setdefault(types[name], [0.0, 0])
        kind[0] += us
        kind[1] += 1
    by_type = [{"type": t, "ms": round(us / 1000, 6), "count": n, "pct": round(pct(us), 3)}
               for t, (us, n) in sorted(by_kind.items(), key=lambda kv: -kv[1][0])]
    kept, cut = ops[:MAX_OPS], ops[MAX_OPS:]
    return {"total_ms": round(total_us / 1000, 6), "statistic": "median per call x calls per inference",
            "ops": kept, "ops_left_out": len(cut), "ms_left_out": round(sum(op["ms"] for op in cut), 6),
            "by_type": by_type}


def profile(spec: RunSpec) -> dict:
    """Execute a validated run spec's ``profile``: see the module docstring."""
    import numpy  # noqa: F401 - as in ``run``: imported before anything is measured

    runs = _count(spec, "profile_runs", PROFILE_RUNS, 1)
    warmup = _count(spec, "profile_warmup", PROFILE_WARMUP, 0)
    backend = backends.load(spec.backend)
    answer = {"backend": backend.NAME, "runtime_version": backend.version(),
              "threads": spec.threads}
    if backend.NO_PROFILER is not None:  # not a ProfiledBackend
        return {**answer, "available": False, "reason": backend.NO_PROFILER}
    pin(spec.cpus)
    emit("progress", phase="load", done=0, total=1)
    session = backends.open_session(backend, spec, backend.open_profiled)
    session.set_inputs(prepare(session.inputs, session.shapes, spec.seed, spec.inputs,
                               spec.input_values, spec.input_ranges)[0])
    for _ in range(warmup):
        session.invoke()
    session.profile_start()
    for i in range(runs):
        session.invoke()
        emit("progress", phase="profile", done=i + 1, total=runs)
    rows = session.profile_stop()
    return {**answer, "available": True, "tool": backend.PROFILER, "runs": runs, "warmup": warmup,
            "unit": "ms per inference", **summarize(rows, runs)}
