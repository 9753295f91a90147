"""Measure one model with one runtime: load, warm up, time, and optionally score accuracy.

The timing loop follows TFLite ``benchmark_model`` semantics: warm-up runs at least
``warmup_runs`` iterations and at least ``warmup_min_s`` seconds; the timed phase runs until
both ``min_runs`` and ``min_s`` are reached, and never starts an iteration after ``max_s``.
Only ``invoke()`` is inside the timed region; the input is set once beforehand.
"""

from __future__ import annotations

import json
import platform
import resource
import sys
import time

from . import AGENT_VERSION, backends, protocol
from .stats import summarize_ms

RUN_SPEC_VERSION = 1
DEFAULTS = {
    "threads": 1,
    "warmup_runs": 1,
    "warmup_min_s": 0.5,
    "min_runs": 50,
    "min_s": 1.0,
    "max_s": 150.0,
    "seed": 0,
    "dataset": None,
}


class SpecError(ValueError):
    """The run spec is malformed."""


class ArtifactLoadError(RuntimeError):
    """The runtime refused the artifact (missing, truncated, corrupt or unsupported)."""


def emit(event: str, **fields) -> None:
    """Print one protocol line and flush so the host sees progress live."""
    print(protocol.encode(event, **fields), flush=True)


def hello() -> dict:
    """What this agent and device can do."""
    return {
        "agent_version": AGENT_VERSION,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "runtimes": backends.versions(),
    }


def validate_spec(raw: dict) -> dict:
    """Defaults filled in and every field checked; raises SpecError naming the field."""
    if raw.get("v") != RUN_SPEC_VERSION:
        raise SpecError(f"run spec version {raw.get('v')!r}, agent expects {RUN_SPEC_VERSION}")
    spec = {**DEFAULTS, **raw}
    for key in ("backend", "artifact"):
        if not isinstance(spec.get(key), str) or not spec[key]:
            raise SpecError(f"run spec needs a non-empty string '{key}'")
    if spec["backend"] not in backends.MODULES:
        raise SpecError(f"unknown backend {spec['backend']!r}; known: {sorted(backends.MODULES)}")
    for key in ("threads", "warmup_runs", "min_runs"):
        if not isinstance(spec[key], int) or spec[key] < (1 if key != "warmup_runs" else 0):
            raise SpecError(f"run spec field '{key}' must be a positive integer")
    for key in ("warmup_min_s", "min_s", "max_s"):
        if not isinstance(spec[key], (int, float)) or spec[key] < 0:
            raise SpecError(f"run spec field '{key}' must be a non-negative number")
    return spec


def _timed_loop(session, min_runs: int, min_s: float, max_s: float,
                phase: str) -> tuple[list[int], tuple[int, int] | None]:
    """Per-iteration ``invoke`` latencies in ns, TFLite benchmark semantics.

    Also returns the loop's span, ``perf_counter_ns`` at the first iteration's start and the
    last one's end (None without iterations), so callers can place it in wall-clock time
    without an extra clock read inside the loop.
    """
    samples: list[int] = []
    clock = time.perf_counter_ns
    start = clock()
    first_t0 = last_t1 = None
    budget_min, budget_max = min_s * 1e9, max_s * 1e9
    next_report = start
    while True:
        elapsed = clock() - start
        enough = len(samples) >= min_runs and elapsed >= budget_min
        if enough or (samples and elapsed >= budget_max):
            break
        t0 = clock()
        session.invoke()
        last_t1 = clock()
        samples.append(last_t1 - t0)
        if first_t0 is None:
            first_t0 = t0
        if t0 >= next_report:
            emit("progress", phase=phase, done=len(samples), total=min_runs)
            next_report = t0 + 250_000_000  # at most four progress lines per second
    return samples, (None if first_t0 is None else (first_t0, last_t1))


def wall_clock_s(perf_ns: int, anchor: tuple[int, int]) -> float:
    """Epoch seconds (``time.time`` scale) of a ``perf_counter_ns`` reading.

    ``anchor`` is a ``(time_ns(), perf_counter_ns())`` pair read back to back; mapping
    through it keeps wall-clock reads out of the timed loop.
    """
    wall_ns, perf_anchor_ns = anchor
    # int / int is correctly rounded; int / 1e9 would first round the ns count to a float.
    return (wall_ns + (perf_ns - perf_anchor_ns)) / 1_000_000_000


def _accuracy(session, dataset: dict) -> dict:
    """Top-1 accuracy over a pushed, preprocessed shard (``x.npy`` and ``y.npy``)."""
    import numpy as np

    x = np.load(dataset["x"], allow_pickle=False)
    y = np.load(dataset["y"], allow_pickle=False)
    if len(x) != len(y):
        raise SpecError(f"dataset shard has {len(x)} inputs but {len(y)} labels")
    want = tuple(session.input_shape)
    correct = 0
    step = max(1, len(x) // 20)
    for i in range(len(x)):
        sample = np.ascontiguousarray(x[i : i + 1], dtype=session.input_dtype).reshape(want)
        correct += int(int(np.argmax(session.run(sample))) == int(y[i]))
        if i % step == 0:
            emit("progress", phase="accuracy", done=i, total=len(x))
    return {"correct": correct, "total": len(x), "top1": correct / len(x) if len(x) else 0.0}


def _peak_rss_kb() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # macOS reports bytes


def output_fingerprint(output, head: int = 64) -> dict:
    """The model's output on the seeded input, small enough to store with every record.

    Comparing it across devices (x86 vs ARM64, CPU vs delegate) shows numerical drift
    without shipping tensors around: the first ``head`` values, the size and the L2 norm.
    """
    import numpy as np

    flat = np.asarray(output, dtype=np.float64).ravel()
    return {"size": int(flat.size), "l2": float(np.sqrt(np.dot(flat, flat))),
            "head": [float(v) for v in flat[:head]]}


def run(spec: dict) -> dict:
    """Execute one validated run spec and return the ``result`` event's fields."""
    import numpy as np

    backend = backends.load(spec["backend"])
    threads = spec["threads"]
    emit("progress", phase="load", done=0, total=1)
    t0 = time.perf_counter_ns()
    try:
        session = backend.open(spec["artifact"], threads)
    except Exception as exc:
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise ArtifactLoadError(f"{backend.NAME} cannot load {spec['artifact']}: {detail}") from None
    load_ns = time.perf_counter_ns() - t0

    rng = np.random.default_rng(spec["seed"])
    x = rng.standard_normal(session.input_shape).astype(session.input_dtype)
    session.set_input(x)
    t0 = time.perf_counter_ns()
    session.invoke()
    first_ns = time.perf_counter_ns() - t0
    fingerprint = output_fingerprint(session.output())

    warm, _ = _timed_loop(session, spec["warmup_runs"], spec["warmup_min_s"], spec["max_s"],
                          "warmup")
    anchor = (time.time_ns(), time.perf_counter_ns())
    samples, span = _timed_loop(session, spec["min_runs"], spec["min_s"], spec["max_s"], "measure")
    result = {
        "backend": backend.NAME,
        "runtime_version": backend.version(),
        "api": getattr(session, "api", None),
        "threads": threads,
        "input_shape": list(session.input_shape),
        "load_ms": load_ns / 1e6,
        "first_inference_ms": first_ns / 1e6,
        "output": fingerprint,
        "warmup": {"count": len(warm), "seconds": sum(warm) / 1e9},
        "samples_ns": samples,
        "stats_ms": summarize_ms(samples),
        # Wall clock (epoch s) of the first timed iteration's start and the last one's end, for
        # the host to measure its own overhead around the timed region. Device clock: a host
        # comparing them with its own clock must correct for the offset between the two.
        "measure_start_unix_s": wall_clock_s(span[0], anchor) if span else None,
        "measure_end_unix_s": wall_clock_s(span[1], anchor) if span else None,
        "accuracy": _accuracy(session, spec["dataset"]) if spec.get("dataset") else None,
    }
    # Peak RSS after everything ran: the high-water mark of this process.
    result["peak_rss_kb"] = _peak_rss_kb()
    return result


def predict(spec: dict) -> dict:
    """Outputs for a batch of inputs, one inference per row: ``predict`` spec → ``predicted``.

    The spec names an ``inputs`` ``.npy`` (batch first) and an ``outputs`` path, written
    atomically. The host uses it for parity where a runtime lives in another environment.
    """
    import os

    import numpy as np

    for key in ("inputs", "outputs"):
        if not isinstance(spec.get(key), str) or not spec[key]:
            raise SpecError(f"predict spec needs a non-empty string '{key}'")
    backend = backends.load(spec["backend"])
    try:
        session = backend.open(spec["artifact"], spec["threads"])
    except Exception as exc:
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise ArtifactLoadError(f"{backend.NAME} cannot load {spec['artifact']}: {detail}") from None
    x = np.load(spec["inputs"], allow_pickle=False)
    rows = [np.array(session.run(np.ascontiguousarray(x[i : i + 1], dtype=session.input_dtype)
                                 .reshape(session.input_shape)), copy=True).reshape(-1)
            for i in range(len(x))]
    out = np.stack(rows) if rows else np.zeros((0,), np.float32)
    tmp = spec["outputs"] + ".part.npy"
    np.save(tmp, out)
    os.replace(tmp, spec["outputs"])
    return {"n": len(rows), "output_shape": list(out.shape), "runtime_version": backend.version()}


COMMANDS = {"run": ("result", run), "predict": ("predicted", predict)}


def main(argv: list[str] | None = None) -> int:
    """``python -m device_agent hello | run SPEC.json | predict SPEC.json``."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["hello"]:
        emit("hello", **hello())
        return 0
    if len(argv) != 2 or argv[0] not in COMMANDS:
        emit("error", type="usage",
             message="usage: python -m device_agent hello | run SPEC.json | predict SPEC.json")
        return 2
    event, command = COMMANDS[argv[0]]
    try:
        with open(argv[1], encoding="utf-8") as fh:
            spec = validate_spec(json.load(fh))
        emit(event, **command(spec))
        return 0
    except (SpecError, ArtifactLoadError, OSError, json.JSONDecodeError,
            backends.BackendUnavailable) as exc:
        emit("error", type=type(exc).__name__, message=str(exc))
        return 3
    except Exception as exc:  # a runtime failing to load or run a model
        emit("error", type=type(exc).__name__, message=str(exc).strip().splitlines()[0][:500]
             if str(exc).strip() else type(exc).__name__)
        return 4
