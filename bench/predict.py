"""Latency prediction on ``local``: how many held-out models a predictor gets within ±10 %.

For each format (TFLite with XNNPACK and ONNX Runtime by default, at 1 thread), the product's
own path, as a user runs it:

1. **Collect** (``aiot predict collect``'s :func:`aiot.host.predict.collect.collect`): the
   kernels drawn from CNN shapes and the zoo models, profiled, within ``--budget-s`` of wall
   time (the goal: at most an hour). The collection lives in a persistent aiot home
   (``bench/out/predict-home``, git-ignored): running the bench again resumes it, so a
   collection can be spread over several calls; ``--fresh`` starts over.
2. **Evaluate** (``aiot predict evaluate``): each family of zoo models (resnet, mobilenet,
   densenet, ...) held out in turn, predicted by a predictor fitted on the kernels and the
   other families; RMSE, MAPE and the share within ±5 % and ±10 %, beside a FLOPs baseline.

3. **Repeat**: the same models measured once more, as a sweep of their own, right after: how
   often a model agrees with itself within ±10 % here, a ceiling for any predictor judged
   against one measurement (``--no-repeat`` skips it).

It prints the held-out table, the collection's cost (runs, wall time, the sum of the runs' own
spans, how many were INVALID and left out) and the machine's load while it collected (1-minute
load average sampled every 10 s, and the share of all cores busy from ``/proc/stat``: other
users' work included), and writes ``bench/out/predict.json``.

The issue's goal (≥ 95 % of held-out models within ±10 %) is for a quiet machine: a loaded one
times every kernel with its neighbours' noise, and the validity verdicts (``--validity``,
stated in the output) decide what is learned from.

Usage::

    python bench/predict.py                                  # tflite,onnx; 300 kernels; 1 h each
    python bench/predict.py --formats onnx --budget-s 1200 --validity load=off
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import OUT_DIR, print_table, write_json  # noqa: E402

HOME = OUT_DIR / "predict-home"
#: Zoo models measured by default: every family at the small inputs (CIFAR, Fashion-MNIST) and
#: the ImageNet models that convert in seconds here (the 224 px DenseNet and Inception take
#: minutes each to convert to TFLite on two cores).
MODELS = ("resnet18_cifar,resnet18_mnist,resnet34_cifar,resnet50_cifar,resnet18,"
          "mobilenet_v2_cifar,mobilenet_v2_mnist,mobilenet_v2,mnasnet_cifar,mnasnet_mnist,mnasnet,"
          "squeezenet_cifar,squeezenet_mnist,squeezenet1_1,densenet121_cifar,densenet121_mnist,"
          "inception_v3_cifar,inception_v3_mnist,regnetx_600mf_cifar,regnetx_600mf_mnist,"
          "vgg_small,vgg_small_mnist,efficientnet_lite0,tiny_cnn")


class LoadSampler:
    """The 1-minute load average every ``every_s`` seconds, and the busy share of all cores."""

    def __init__(self, every_s: float = 10.0):
        self.every_s, self.samples = every_s, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._cpu = _cpu_jiffies()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=2)
        after = _cpu_jiffies()
        before = self._cpu
        self.busy = None if not (before and after and after[1] > before[1]) else (
            (after[0] - before[0]) / (after[1] - before[1]))

    def _run(self):
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(self.every_s)

    def summary(self) -> dict:
        return {"loadavg_1min_mean": statistics.fmean(self.samples) if self.samples else None,
                "loadavg_1min_max": max(self.samples) if self.samples else None,
                "cores_busy_share": self.busy, "cores": os.cpu_count()}


def _cpu_jiffies():
    """(busy, total) jiffies of the whole machine (``/proc/stat``), or None."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return sum(fields[:8]) - fields[3] - fields[4], sum(fields[:8])


def _pct(value) -> str:
    return "—" if value is None else f"{value:.1f} %"


def run_format(fmt: str, args) -> dict:
    from aiot.host.engine.runs import MeasureParams
    from aiot.host.predict.collect import collect, collection_spec
    from aiot.host.predict.evaluate import evaluate
    from aiot.host.predict.training import training_set
    from aiot.host.store import open_store

    results = args.home / "results"
    params = MeasureParams(min_runs=args.min_runs, min_s=args.min_s, warmup_min_s=args.warmup_min_s)
    models = [m for m in args.models.split(",") if m] if args.models != "none" else []
    spec = collection_spec("local", fmt, args.threads, args.kernels, models, args.seed, params,
                           args.validity, cooldown_max_s=0)
    print(f"\n== {fmt} · {args.threads} thread(s): {args.kernels} kernels, {len(models)} models", flush=True)
    with LoadSampler() as load:
        done = None if args.skip_collect else collect(
            spec, results, budget_s=args.budget_s, say=lambda line: print(line, flush=True))
    with open_store(results, readonly=True) as store:
        # this collection's sweep; with --skip-collect every latency run of the target stored
        sweep = store.query(sweep_id=done.sweep_id) if done else [
            r for r in store.query(kind="latency", device="local", fmt=fmt) if r.threads == args.threads]
        training = training_set(store, "local", fmt, args.threads)
    found = evaluate(training, args.seed)
    again = repeatability(fmt, args, params, models, done.sweep_id if done else None)
    spans = [_span(r) for r in sweep if r.finished_at]
    cost = {"sweep_id": done.sweep_id if done else None, "planned_runs": done.planned if done else None,
            "runs_stored": len(sweep), "runs_this_call": len(done.records) if done else 0,
            "runs_retried": len(done.retried) if done else 0,
            "wall_s_this_call": done.seconds if done else 0.0,
            "run_spans_s_total": sum(s for s in spans if s is not None),
            "left": done.left if done else None, "budget_spent": done.budget_spent if done else None,
            "by_outcome": _outcomes(sweep), "invalid_by_size": _invalid_by_size(sweep)}
    rows = [[f, m["n"], _ms(m["rmse_ms"]), _pct(m["mape"]), _pct(m["within_5"]), _pct(m["within_10"])]
            for f, m in [*((f, found.of(f)) for f in found.families()), ("all", found.of()),
                         ("FLOPs baseline", found.baseline())]]
    print_table(["held out", "models", "RMSE ms", "MAPE", "±5 %", "±10 %"], rows)
    print(f"learned from {training.runs} VALID runs ({len(training.kernels)} kernels, "
          f"{len(training.models)} models); {training.left_out_line() or 'nothing left out'}")
    if training.relaxed:
        print("judged under relaxed validity limits: " + ", ".join(
            f"{n} run(s) {k}" for k, n in training.relaxed.most_common()))
    print(f"collection: {cost['runs_stored']} runs stored in its sweep "
          f"({cost['runs_this_call']} this call and {cost['runs_retried']} measured again after an "
          f"INVALID verdict of the machine's moment, {cost['wall_s_this_call'] / 60:.1f} min wall), "
          f"run spans {cost['run_spans_s_total'] / 60:.1f} min in all; outcomes {cost['by_outcome']}")
    for size, reasons in cost["invalid_by_size"].items():
        print(f"  INVALID at medians {size}: " + ", ".join(f"{n} {why}" for why, n in reasons.items()))
    summary = load.summary() if done is not None else {
        "loadavg_1min_mean": None, "loadavg_1min_max": None, "cores_busy_share": None, "cores": os.cpu_count()}
    during = "collecting" if done is not None else "collecting: not sampled (no collection this call)"
    print(f"machine load while {during}: 1-min load avg mean {_num(summary['loadavg_1min_mean'])}, max "
          f"{_num(summary['loadavg_1min_max'])}, cores busy {_num(summary['cores_busy_share'])} of "
          f"{summary['cores']}")
    if again is not None:
        gap = again["gap_min_median"]
        print(f"the same models measured again ({_num(gap)} min later, median): "
              f"{_pct(again['within_10'])} of {again['n']} within ±10 % of the collection's "
              f"median, {_pct(again['within_5'])} within ±5 %, median |change| "
              f"{_pct(again['median_abs_change'])} (a ceiling for any predictor on this machine)")
        if again["speed_changes_pct"]:
            print(f"  the reference kernel beside each run changed by a median "
                  f"{statistics.median(abs(c) for c in again['speed_changes_pct'].values()):.1f} % "
                  f"between the two; its change against the model's: r = "
                  f"{_num(again['speed_change_correlation'])}; divided out, "
                  f"{_pct(again['speed_normalized_within_10'])} within ±10 %")
    return {"format": fmt, "threads": args.threads, "evaluation": found.to_dict(), "collection": cost,
            "load": {**summary, "while": during}, "learned_from_runs": training.runs,
            "left_out": dict(training.left_out), "relaxed": dict(training.relaxed),
            "repeatability": again}


#: The repeat sweep's seed is the collection's plus this: another sweep of the same models.
REPEAT_SEED = 1000


def repeatability(fmt: str, args, params, models: list[str], sweep_id: str | None) -> dict | None:
    """The collection's models measured once more, as a sweep of their own, right after it:
    how often a model's median agrees with itself within ±5 % and ±10 % on this machine. A
    predictor is judged against one measurement of each model; when a measurement does not
    reproduce, that share is a ceiling on what any predictor can score here. Both measurements
    must be VALID. The repeat runs stay in the store (the next evaluation takes each model's
    median over its runs, as a lab's store accumulates them)."""
    from aiot.host.predict.collect import collect, collection_spec
    from aiot.host.store import open_store

    if not args.repeat or not models or sweep_id is None:
        return None
    results = args.home / "results"
    spec = collection_spec("local", fmt, args.threads, 0, models, args.seed + REPEAT_SEED, params,
                           args.validity, cooldown_max_s=0)
    started = time.monotonic()
    again = collect(spec, results, say=lambda line: print(line, flush=True))
    with open_store(results, readonly=True) as store:
        first = {r.model: r for r in store.query(sweep_id=sweep_id) if _valid(r)}
        second = {r.model: r for r in store.query(sweep_id=again.sweep_id) if _valid(r)}
    both = sorted(first.keys() & second.keys())
    changes = {m: second[m].median_ms / first[m].median_ms - 1 for m in both}
    gaps = [_seconds(first[m].created_at, second[m].created_at) for m in both]
    # Did the CPU's own speed change between the two (the agent's reference kernel, timed
    # beside each run)? A change the reference saw is the machine's, not the model's.
    readings = {m: (_speed(first[m]), _speed(second[m])) for m in both}
    speeds = {m: b / a - 1 for m, (a, b) in readings.items() if a and b}
    normalized = {m: (1 + changes[m]) / (1 + speeds[m]) - 1 for m in speeds}
    return {"sweep_id": again.sweep_id, "n": len(changes), "within_5": _share(changes, 0.05),
            "within_10": _share(changes, 0.10),
            "median_abs_change": 100 * statistics.median(abs(c) for c in changes.values()) if changes else None,
            "changes_pct": {m: 100 * c for m, c in changes.items()},
            "speed_changes_pct": {m: 100 * c for m, c in speeds.items()},
            "speed_normalized_within_10": _share(normalized, 0.10),
            "speed_change_correlation": _correlation([speeds[m] for m in speeds],
                                                     [changes[m] for m in speeds]),
            "gap_min_median": statistics.median(g for g in gaps if g is not None) / 60
            if any(g is not None for g in gaps) else None,
            "wall_s": time.monotonic() - started}


def _share(changes: dict, limit: float) -> float | None:
    """The percentage of ``changes`` (relative) within ±``limit``, or None without any."""
    return 100 * sum(abs(c) <= limit for c in changes.values()) / len(changes) if changes else None


def _speed(record) -> float | None:
    """A run's reference-kernel time (ms, the mean of its readings before and after the timed
    loop; agent 0.9.0), or None for a run without readings."""
    speed = (record.result or {}).get("speed") or {}
    before, after = speed.get("before_ms"), speed.get("after_ms")
    return (before + after) / 2 if before and after else None


def _correlation(xs: list[float], ys: list[float]) -> float | None:
    """Pearson's r of two series (None under 3 points or with no spread)."""
    if len(xs) < 3:
        return None
    try:
        return statistics.correlation(xs, ys)
    except statistics.StatisticsError:
        return None


def _valid(record) -> bool:
    from aiot.host.engine.validity import VALID

    return record.status == "ok" and record.validity == VALID and bool(record.median_ms)


def _num(value) -> str:
    return "—" if value is None else f"{value:.2f}"


def _ms(value) -> str:
    return "—" if value is None else f"{value:.4g}"


def _span(record) -> float | None:
    return _seconds(record.created_at, record.finished_at)


def _seconds(start: str | None, end: str | None) -> float | None:
    """Seconds between two ISO timestamps, or None where one is missing or unreadable."""
    from datetime import datetime

    try:
        return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    except (TypeError, ValueError):
        return None


def _outcomes(records) -> dict:
    counts: dict[str, int] = {}
    for r in records:
        key = f"{r.status} {r.validity}" if r.status == "ok" else r.status
        counts[key] = counts.get(key, 0) + 1
    return counts


#: Median buckets (ms) of the INVALID runs' count: which kernels the validity checks refuse.
SIZES = ((0.1, "< 0.1 ms"), (1.0, "0.1-1 ms"), (float("inf"), "≥ 1 ms"))


def _invalid_by_size(records) -> dict:
    """``{bucket: {reason: runs}}`` of the INVALID runs, by their median (reasons by name)."""
    from collections import Counter, defaultdict

    found: dict[str, Counter] = defaultdict(Counter)
    for r in records:
        if r.status != "ok" or r.validity == "VALID" or not r.median_ms:
            continue
        bucket = next(label for top, label in SIZES if r.median_ms < top)
        reasons = ((r.result or {}).get("validity") or {}).get("reasons") or ["?"]
        found[bucket].update({x.partition(":")[0] for x in reasons})  # each reason once a run
    return {label: dict(found[label]) for _, label in SIZES if label in found}


def _key(fmt: str, home: str) -> str:
    """One entry of the JSON per format and collection home (a collection spread over calls
    keeps its entry; another home, e.g. under other validity limits, has its own)."""
    return f"{fmt} @ {Path(home).name}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--formats", default="tflite,onnx")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--kernels", type=int, default=300)
    parser.add_argument("--models", default=MODELS, help="comma-separated zoo models, or none")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-s", type=float, default=3600.0, help="collection budget per format")
    parser.add_argument("--min-runs", type=int, default=50)
    parser.add_argument("--min-s", type=float, default=1.0)
    parser.add_argument("--warmup-min-s", type=float, default=0.5)
    parser.add_argument("--validity", default=None,
                        help="validity limits for the collection (e.g. load=off on a busy machine)")
    parser.add_argument("--skip-collect", action="store_true", help="evaluate what is stored")
    parser.add_argument("--fresh", action="store_true", help="start the collection over")
    parser.add_argument("--home", type=Path, default=HOME, help="the aiot home of the collection")
    parser.add_argument("--no-repeat", dest="repeat", action="store_false",
                        help="skip measuring the models a second time (their repeatability)")
    args = parser.parse_args(argv)
    if args.fresh and args.home.exists():
        shutil.rmtree(args.home)
    for name, sub in (("AIOT_RESULTS_DIR", "results"), ("AIOT_CACHE_DIR", "cache"),
                      ("AIOT_STATE_DIR", "state")):
        os.environ[name] = str(args.home / sub)
    os.environ.setdefault("AIOT_NO_PROGRESS", "1")
    started = time.monotonic()
    formats = [run_format(f.strip(), args) for f in args.formats.split(",") if f.strip()]
    # Formats measured by an earlier call are kept (a collection spread over calls): each entry
    # says its own settings and when it was written.
    kept = {}
    if (OUT_DIR / "predict.json").is_file():
        kept = {_key(f["format"], f["settings"]["home"]): f
                for f in json.loads((OUT_DIR / "predict.json").read_text())["formats"] if "home" in f["settings"]}
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for entry in formats:
        key = _key(entry["format"], str(args.home))
        entry["collected_at"] = stamp
        if entry["collection"]["runs_this_call"] == 0 and key in kept:
            # nothing measured (a collection done before, evaluated again): the collection's
            # cost and the load it ran under stay those of the call that measured it
            earlier = kept[key]
            entry.update(collection=earlier["collection"], load=earlier["load"],
                         collected_at=earlier.get("collected_at", earlier["written_at"]))
        kept[key] = {**entry, "settings": {k: str(v) if isinstance(v, Path) else v
                                           for k, v in vars(args).items()},
                     "written_at": stamp, "wall_s": time.monotonic() - started}
    path = write_json("predict", {"formats": list(kept.values())})
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
