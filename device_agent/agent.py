"""Measure one model with one runtime: load, warm up, time, and optionally score accuracy.

The timing loop follows TFLite ``benchmark_model`` semantics: warm-up runs at least
``warmup_runs`` iterations and at least ``warmup_min_s`` seconds; the timed phase runs until
both ``min_runs`` and ``min_s`` are reached, and never starts an iteration after ``max_s``.
Only ``invoke()`` is inside the timed region; the input is set once beforehand.

Repeat-until-stable (optional spec keys ``target_cv`` and ``max_runs``): once the minimum is
reached, the loop goes on until the samples' robust CV (``stats.robust_cv``: 1.4826 · MAD /
median, judged on at least ``MIN_CV_SAMPLES``) is at most ``target_cv``, or ``max_runs``
samples, or ``max_s``. ``max_runs`` (at least ``min_runs``) caps the loop with or without a
target, before ``min_s`` too; the result's ``stability`` says which rule ended it.

The loop judges the robust CV rather than std / mean because one scheduler or GC spike among
a hundred samples can double the std while the median, which is what aiot reports, barely
moves: with std / mean a phone would seldom reach the target and every run would last until
``max_s``. Both CVs are in ``stats_ms``. Note that a sample CV measures dispersion, not
precision: it settles at the device's own spread rather than shrinking with more samples, so
a target below that spread ends by ``max_runs`` or ``max_s`` with ``stable: false``.

Inputs: one array per model input (``signature.prepare``), set before the timed region. The
spec's ``input_shapes`` fixes dynamic dims, ``inputs`` names a pushed ``.npz`` of the arrays;
otherwise they are generated from ``seed`` by element type, a single float input exactly as
older agents made it. The result records each input (``inputs``: name, concrete shape,
dtype, quantization, ``sha256`` of its bytes, ``source``) and each output's fingerprint
(``outputs``). ``inspect`` reports a model's signature without running it (event
``signature``): how the host reads a user's artifact with the runtime that will run it.

Placement (``result.placement``): where the model's operators ran, as the runtime tells it
(each backend's ``placement``), read once the timing is done.

Peak memory is measured by its own command, ``memory``, in a process that does nothing
else (see ``memory``); the ``run`` result keeps its ``peak_rss_kb`` for compatibility.

The other commands: ``predict``, ``memory`` and ``inspect`` here, ``profile`` in
``profiling.py``, ``serve`` in ``serve.py``; :func:`execute` runs one on a spec
(``spec.py``), ``cli.py`` reads the command line, ``session.py`` serves many.
"""


from __future__ import annotations

import os
import time

from . import backends, cpuload, profiling, seccomp, speedref
from .backends import ArtifactLoadError, BackendUnavailable, open_session
from .process import current_rss_kb, peak_rss_kb, pin
from .serve import serve
from .signature import SpecError, all_outputs, load_batches, made_up_clause, prepare
from .spec import RunSpec
from .stats import robust_cv, summarize_ms
from .wire import emit, first_line

#: The CV of fewer samples says nothing; the stability check waits for this many.
MIN_CV_SAMPLES = 10
MEMORY_RUNS = 3  # inferences the ``memory`` command runs after loading


class _StopRule:
    """When the timed loop ends, and why (see ``_timed_loop``)."""

    def __init__(self, min_runs: int, min_s: float, max_s: float, target_cv: float | None,
                 max_runs: int | None) -> None:
        self.min_runs, self.target_cv, self.max_runs = min_runs, target_cv, max_runs
        self.min_ns, self.max_ns = min_s * 1e9, max_s * 1e9
        self.next_check = MIN_CV_SAMPLES
        self.extended = False  # ran past the minimum because the CV target was not met yet

    def reason(self, samples: list[int], elapsed_ns: int) -> str | None:
        """Why the loop stops before another iteration, or None to go on."""
        n = len(samples)
        if n >= self.min_runs and elapsed_ns >= self.min_ns:
            if self.target_cv is None:
                return "min_runs"
            if n >= self.next_check or n == self.max_runs:
                # Every n // 20 samples: the check sorts all of them, so keep it O(n log n) in all.
                self.next_check = n + max(1, n // 20)
                if robust_cv(samples) <= self.target_cv:
                    return "target_cv" if self.extended else "min_runs"
            self.extended = True
        if samples and elapsed_ns >= self.max_ns:
            return "max_s"
        if self.max_runs is not None and n >= self.max_runs:
            return "max_runs"
        return None


def _timed_loop(session, min_runs: int, min_s: float, max_s: float, phase: str,
                target_cv: float | None = None, max_runs: int | None = None) -> dict:
    """Per-iteration ``invoke`` latencies in ns, TFLite benchmark semantics.

    Returns ``samples`` and the loop's ``span``: ``perf_counter_ns`` at the first iteration's
    start and the last one's end (None without iterations), so callers can place it in
    wall-clock time without an extra clock read inside the loop; and ``stopped_by``, what
    ended it: "min_runs" (the minimum count and seconds were enough, a ``target_cv`` already
    met included), "target_cv" (met after running past the minimum), "max_runs" or "max_s".
    The CV is checked between iterations (outside the timed region) every ``n // 20``
    samples, so a run may go up to 5 % past the sample where the target was first met.
    """
    samples: list[int] = []
    clock = time.perf_counter_ns
    start = next_report = clock()
    first_t0 = last_t1 = None
    rule = _StopRule(min_runs, min_s, max_s, target_cv, max_runs)
    while (stopped_by := rule.reason(samples, clock() - start)) is None:
        t0 = clock()
        session.invoke()
        last_t1 = clock()
        samples.append(last_t1 - t0)
        if first_t0 is None:
            first_t0 = t0
        if t0 >= next_report:
            emit("progress", phase=phase, done=len(samples), total=min_runs)
            next_report = t0 + 250_000_000  # at most four progress lines per second
    return {"samples": samples, "span": None if first_t0 is None else (first_t0, last_t1),
            "stopped_by": stopped_by}


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



def output_fingerprint(output, head: int = 64) -> dict:
    """The model's output on the seeded input, small enough to store with every record.

    Comparing it across devices (x86 vs ARM64, CPU vs delegate) shows numerical drift
    without shipping tensors around: the first ``head`` values, the size and the L2 norm.
    A model's NaN and ±Inf are counted (``nonfinite``: how many of each) and shown in the head
    as the strings ``"nan"``, ``"inf"`` and ``"-inf"`` (JSON has no such numbers); the L2
    norm is of the finite values.
    """
    import numpy as np

    flat = np.asarray(output, dtype=np.float64).ravel()
    finite = np.isfinite(flat)
    values = flat[finite]
    found = {"size": int(flat.size), "l2": float(np.sqrt(np.dot(values, values))),
             "head": [float(v) if np.isfinite(v) else _nonfinite_name(v) for v in flat[:head]]}
    if not finite.all():
        found["nonfinite"] = {"nan": int(np.isnan(flat).sum()),
                              "inf": int(np.isposinf(flat).sum()),
                              "-inf": int(np.isneginf(flat).sum())}
    return found


def _nonfinite_name(value: float) -> str:
    return "nan" if value != value else "inf" if value > 0 else "-inf"


def run(spec: RunSpec) -> dict:
    """Execute one validated run spec and return the ``result`` event's fields."""
    import numpy  # noqa: F401 - imported before anything is timed, as always

    backend = backends.load(spec.backend)
    threads = spec.threads
    pinned = pin(spec.cpus)
    emit("progress", phase="load", done=0, total=1)
    t0 = time.perf_counter_ns()
    session = open_session(backend, spec)
    load_ns = time.perf_counter_ns() - t0

    arrays, used = _prepare_inputs(session, spec)
    session.set_inputs(arrays)
    t0 = time.perf_counter_ns()
    try:
        session.invoke()
    except Exception as exc:  # made-up control values are a likely cause: say which
        clause = made_up_clause(used)
        if clause is None:
            raise
        # The fix first: a runtime's own message can be long, and the error line is capped.
        raise RuntimeError(f"{clause}; {type(exc).__name__}: {first_line(exc)}") from None
    first_ns = time.perf_counter_ns() - t0
    fingerprint = output_fingerprint(session.output())
    outputs = _outputs(session)

    warm = _timed_loop(session, spec.warmup_runs, spec.warmup_min_s, spec.max_s,
                       "warmup")["samples"]
    speed_before = speedref.reading()
    anchor = (time.time_ns(), time.perf_counter_ns())
    load_before = cpuload.snapshot()
    loop = _timed_loop(session, spec.min_runs, spec.min_s, spec.max_s, "measure",
                       spec.target_cv, spec.max_runs)
    load = cpuload.between(load_before, cpuload.snapshot())
    speed = speedref.around(speed_before, speedref.reading())
    samples, span = loop["samples"], loop["span"]
    stats = summarize_ms(samples)
    result = {
        "backend": backend.NAME,
        "runtime_version": backend.version(),
        "api": session.api,
        "threads": threads,
        "cpus": pinned,
        "input_shape": list(arrays[0].shape) if arrays else list(session.input_shape),
        "load_ms": load_ns / 1e6,
        "first_inference_ms": first_ns / 1e6,
        "output": fingerprint,
        "inputs": used,
        "outputs": outputs,
        "warmup": {"count": len(warm), "seconds": sum(warm) / 1e9},
        "samples_ns": samples,
        "stats_ms": stats,
        "stability": _stability(spec.target_cv, stats["robust_cv"], loop["stopped_by"]),
        # CPUs busy during the timed loop, this run's and others' (see cpuload): the host's
        # validity check marks a run timed on a busy device.
        "load": load,
        # The reference kernel's time on each side of the timed loop (see speedref): the
        # CPU's own speed, which the load counters do not see.
        "speed": speed,
        # Wall clock (epoch s) of the first timed iteration's start and the last one's end, for
        # the host to measure its own overhead around the timed region. Device clock: a host
        # comparing them with its own clock must correct for the offset between the two.
        "measure_start_unix_s": wall_clock_s(span[0], anchor) if span else None,
        "measure_end_unix_s": wall_clock_s(span[1], anchor) if span else None,
        "accuracy": _accuracy(session, spec.dataset) if spec.dataset else None,
    }
    # Peak RSS after everything ran: the high-water mark of this process.
    result["peak_rss_kb"] = peak_rss_kb()
    # After the high-water mark and outside every timed region: a backend may load the model
    # again, instrumented, to read where its operators ran.
    result["placement"] = _placement(session, backend.NAME)
    result["sigsys_skipped"] = seccomp.skipped()
    return result


def _placement(session, backend: str) -> dict | None:
    """The session's placement (``SessionBase.placement``); a runtime that fails to tell it
    leaves a note, never a failed run: the measurement stands without it."""
    try:
        return session.placement()
    except Exception as exc:  # noqa: BLE001 - any runtime's error, said in one line
        return {"engine": backend, "source": "none",
                "note": f"placement not read: {type(exc).__name__}: {first_line(exc)}"}


def _prepare_inputs(session, spec: RunSpec):
    """``(arrays, used)`` for the session's inputs from the spec (see ``signature.prepare``);
    ``run`` and ``memory`` feed the same inputs."""
    return prepare(session.inputs, session.shapes, spec.seed, spec.inputs,
                   spec.input_values, spec.input_ranges)


def _outputs(session) -> list[dict]:
    """Name, shape, dtype, quantization and fingerprint of every output after an ``invoke``,
    each in the tensor's own type (``output``, the first one, keeps its float view)."""
    import numpy as np

    arrays = session.outputs_all()
    declared = session.outputs if len(session.outputs) == len(arrays) else []
    found = []
    for i, array in enumerate(arrays):
        array = np.asarray(array)
        entry = declared[i] if declared else {"name": f"output_{i}", "quantization": None}
        found.append({"name": entry["name"], "shape": list(array.shape),
                      "dtype": array.dtype.name, "quantization": entry["quantization"],
                      "fingerprint": output_fingerprint(array)})
    return found


def _stability(target_cv: float | None, cv: float, stopped_by: str) -> dict:
    """The ``stability`` block of a result; ``stable`` judges the final samples' robust CV."""
    return {"target_cv": target_cv, "cv": cv, "cv_metric": "robust_cv",
            "stable": None if target_cv is None else cv <= target_cv, "stopped_by": stopped_by}


def predict(spec: RunSpec) -> dict:
    """Outputs for a batch of inputs, one inference per row: ``predict`` spec → ``predicted``.

    The spec names an ``inputs`` ``.npy`` (batch first) and an ``outputs`` path, written
    atomically. The host uses it for parity where a runtime lives in another environment.
    An ``inputs`` ``.npz`` holds one batch per input name instead (each row an input of the
    model's own shape and dtype); its ``outputs`` is then a ``.npz`` too, one batch per output
    name, in the outputs' own dtypes (see ``_predict_npz``).
    """
    import numpy as np

    for key in ("inputs", "outputs"):
        if not isinstance(getattr(spec, key), str) or not getattr(spec, key):
            raise SpecError(f"predict spec needs a non-empty string '{key}'")
    backend = backends.load(spec.backend)
    session = open_session(backend, spec)
    if spec.inputs.endswith(".npz"):
        return {**_predict_npz(session, spec), "runtime_version": backend.version()}
    x = np.load(spec.inputs, allow_pickle=False)
    rows = [all_outputs(session, np.ascontiguousarray(x[i : i + 1], dtype=session.input_dtype)
                         .reshape(session.input_shape)) for i in range(len(x))]
    out = np.stack(rows) if rows else np.zeros((0,), np.float32)
    tmp = spec.outputs + ".part.npy"
    np.save(tmp, out)
    os.replace(tmp, spec.outputs)
    return {"n": len(rows), "output_shape": list(out.shape), "runtime_version": backend.version()}


def _predict_npz(session, spec: RunSpec) -> dict:
    """``predict`` of a ``.npz`` of batches: every input and output by name, raw dtypes."""
    import numpy as np

    batches = load_batches(session.inputs, session.shapes, spec.inputs)
    count = len(batches[0]) if batches else 0
    rows: list[list] = []
    for i in range(count):
        session.set_inputs([np.require(b[i], requirements="C") for b in batches])
        session.invoke()
        rows.append([np.array(o, copy=True) for o in session.outputs_all()])
    names = [o["name"] for o in session.outputs]
    if rows and len(names) != len(rows[0]):  # a lite module names its outputs on first run
        names = [f"output_{k}" for k in range(len(rows[0]))]
    stacked = {name: np.stack([r[k] for r in rows]) for k, name in enumerate(names)} if rows \
        else {}
    tmp = spec.outputs + ".part.npz"  # np.savez adds .npz to a name without it
    np.savez(tmp, **stacked)
    os.replace(tmp, spec.outputs)
    first = next(iter(stacked.values()), np.zeros((0,), np.float32))
    return {"n": count, "output_shape": list(first.shape),
            "outputs": [{"name": n, "shape": list(a.shape), "dtype": a.dtype.name}
                        for n, a in stacked.items()]}


def memory(spec: RunSpec) -> dict:
    """Resident memory of loading the model and running it: ``memory`` spec → ``memory``.

    Meant to run alone in a fresh agent process (the host starts one per command), so the
    high-water mark belongs to this model and not to a timing loop or an earlier run:
    ``rss_before_load_kb`` is read after NumPy and the runtime are imported, so the step to
    ``rss_after_load_kb`` is the model's own; ``peak_rss_kb`` (``ru_maxrss``) is the whole
    process's peak after ``runs`` inferences (spec field, default 3). The ``rss_*`` readings
    need /proc (Linux, Android) and are null elsewhere; ``peak_rss_kb`` is always there.
    """
    import numpy  # noqa: F401 - imported before the baseline reading, so it is not the model's

    runs = MEMORY_RUNS if spec.runs is None else spec.runs
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise SpecError(f"memory spec field 'runs' must be a positive integer, got {runs!r}")
    backend = backends.load(spec.backend)
    pin(spec.cpus)
    emit("progress", phase="load", done=0, total=1)
    before = current_rss_kb()
    session = open_session(backend, spec)
    after = current_rss_kb()
    session.set_inputs(_prepare_inputs(session, spec)[0])
    for _ in range(runs):
        session.invoke()
    return {"backend": backend.NAME, "runtime_version": backend.version(),
            "threads": spec.threads, "runs": runs, "rss_before_load_kb": before,
            "rss_after_load_kb": after, "peak_rss_kb": peak_rss_kb()}


def inspect(spec: RunSpec) -> dict:
    """The model's inputs and outputs as its runtime reads them: ``inspect`` → ``signature``.

    Loads the model (with the spec's ``input_shapes``, so an override that does not fit is
    refused here too) and runs nothing. Shapes are the declared ones, -1 for a dynamic dim.
    """
    backend = backends.load(spec.backend)
    session = open_session(backend, spec)
    return {"backend": backend.NAME, "runtime_version": backend.version(),
            "inputs": session.inputs, "outputs": session.outputs}


COMMANDS = {"run": ("result", run), "predict": ("predicted", predict),
            "memory": ("memory", memory), "inspect": ("signature", inspect),
            "profile": ("profile", profiling.profile)}


def execute(command: str, raw_spec) -> int:
    """Validate ``raw_spec`` and run ``command`` on it (``run``, ``predict``, ``memory``,
    ``inspect`` or ``serve``), emitting its answer or an ``error``; returns the exit code."""
    try:
        spec = RunSpec.from_wire(raw_spec)
        if command == "serve":
            return serve(spec)
        event, handler = COMMANDS[command]
        emit(event, **handler(spec))
        return 0
    except (SpecError, ArtifactLoadError, OSError, BackendUnavailable) as exc:
        emit("error", type=type(exc).__name__, message=str(exc))
        return 3
    except Exception as exc:  # a runtime failing to load or run a model
        emit("error", type=type(exc).__name__, message=first_line(exc))
        return 4
