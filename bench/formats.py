"""Every model in every format: conversion matrix, then the same model's speed across formats.

Part 1 (matrix): ``convert_all`` for each model — status, artifact size, parity (max abs
error, top-1 agreement on noise and on 32 Fashion-MNIST images) and conversion time, one row
per (model, format). Part 2 (speed): every artifact that converted and has a runtime here is
timed on ``local`` through the same agent path as ``aiot run`` (1 thread), in interleaved
rounds so machine noise spreads over all formats alike; the table gives each format's median
and its ratio to TFLite's in the same run.

Part 3 (best public path): each aiot artifact against its runtime's best public path, in one
process, interleaved (see ``_best_paths.py``: ``.ort`` vs the ``.onnx`` with every
optimization, ``.ptl`` vs TorchScript + ``optimize_for_inference``, ``.tflite`` vs onnx2tf's
where that toolchain is installed, ``.pte`` is itself the XNNPACK-delegated program), with
each ratio; ``--gate 1.05`` makes the exit status 1 when any ratio exceeds 1.05. It is a
benchmark, not a timed unit test: run it on a quiet machine, or read the ratios knowing the
load.

Part 4 (BiBench's quantity): the LCE BNN speed-up over FP32 TFLite per thread count for
``--bnn-models`` (random weights: timing only). On x86_64, LCE runs its x86 kernels (its
optimized binary GEMM targets aarch64), so this measures this machine, not a phone.

Usage: ``python bench/formats.py [--models tiny_cnn,tiny_bnn,...|small|all] [--rounds 3]
[--gate 1.05] [--bnn-models resnet18_cifar,vgg_small|none] [--bnn-threads 1,2]
[--out formats]`` (``--out`` names the JSON under ``bench/out/``, so a run over other models
keeps an earlier run's file).
``small`` (default) is the tiny models plus every family's 28 px variant; ``all`` adds the
CIFAR and ImageNet-size models (long: InceptionV3 alone takes minutes per format).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _best_paths import best_path_rows  # noqa: E402
from _common import print_table, write_json  # noqa: E402


def model_names(choice: str) -> list[str]:
    from aiot.models import model_specs

    if choice == "all":
        return [spec.name for spec in model_specs()]
    if choice == "small":
        return [spec.name for spec in model_specs() if spec.variant in ("test", "mnist")]
    return [m.strip() for m in choice.split(",") if m.strip()]


def conversion_matrix(models: list[str], out_dir: Path) -> list[dict]:
    from aiot.converters.matrix import convert_all

    rows = []
    for model in models:
        started = time.perf_counter()
        for row in convert_all(model, out_dir):
            rows.append({"model": model, **row})
        print(f"  {model}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return rows


def speed(rows: list[dict], rounds: int, results_dir: Path) -> list[dict]:
    """Median latency per (model, format) over interleaved rounds of agent runs on local."""
    from aiot.converters import get_converter
    from aiot.host.engine.campaign import run_sweep
    from aiot.host.engine.runs import MeasureParams, RunRequest
    from aiot.host.engine.workspace import Workspace
    from aiot.host.store import open_store

    runnable = [r for r in rows if r["status"] == "ok" and get_converter(r["format"]).backend]
    params = MeasureParams(warmup_runs=5, warmup_min_s=0.2, min_runs=30, min_s=0.5, max_s=30.0)
    medians: dict[tuple[str, str], list[float]] = {}
    with open_store(results_dir) as store:
        workspace = Workspace(results_dir)
        try:
            for _ in range(rounds):
                requests = [RunRequest("local", r["model"], r["format"], 1, params=params) for r in runnable]
                for record in run_sweep(requests, workspace):
                    if record.status == "ok":
                        medians.setdefault((record.model, record.format), []).append(record.median_ms)
        finally:
            workspace.close()
    out = []
    for (model, fmt), values in medians.items():
        out.append({"model": model, "format": fmt, "median_ms": statistics.median(values),
                    "rounds": len(values)})
    for row in out:
        base = next((o["median_ms"] for o in out if o["model"] == row["model"] and o["format"] == "tflite"), None)
        row["vs_tflite"] = row["median_ms"] / base if base else None
    return out


def best_paths(matrix: list[dict], timing: list[dict], rounds: int, work: Path) -> list[dict]:
    """Part 3 for every model of the matrix (see ``_best_paths``)."""
    rows = []
    for model in dict.fromkeys(r["model"] for r in matrix):
        artifacts = {r["format"]: Path(r["artifact"]) for r in matrix
                     if r["model"] == model and r["status"] == "ok" and r["artifact"]}
        print(f"  {model}…", file=sys.stderr, flush=True)
        rows.extend(best_path_rows(model, artifacts, work / model, rounds, timing))
    return rows


def bnn_speedups(models: list[str], threads: list[int], rounds: int, results_dir: Path) -> list[dict]:
    """Part 4: LCE BNN vs FP32 TFLite median latency per thread count, via bibench's sweep."""
    from bibench import latency, om_infer_rows

    timings = latency(None, models, threads, rounds, results_dir, algorithms=("bnn",))
    return om_infer_rows(timings)[0]


def gate_failures(rows: list[dict], gate: float) -> list[dict]:
    """The best-path rows whose artifact is slower than its reference by more than ``gate``
    (rows without a measured reference cannot fail it: their reason is printed instead)."""
    return [r for r in rows if r.get("ratio") is not None and r["ratio"] > gate]


def _fmt(value, pattern="{:.3f}") -> str:
    return "" if value is None else pattern.format(value)


def print_best_paths(rows: list[dict]) -> None:
    print("\nBest public path per runtime (same process, 1 thread, interleaved; median ms)")
    print_table(["model", "runtime", "aiot artifact", "ms", "best public path", "ms", "ratio",
                 "portable ref", "ms", "ratio"],
                [[r["model"], r["runtime"], r["artifact"], _fmt(r["artifact_ms"]), r["reference"],
                  _fmt(r.get("reference_ms")) or r.get("skipped", ""), _fmt(r.get("ratio"), "{:.2f}"),
                  r.get("portable_reference", ""), _fmt(r.get("portable_ms")),
                  _fmt(r.get("portable_ratio"), "{:.2f}")] for r in rows])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="small")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gate", type=float, default=None,
                        help="exit 1 when an artifact is slower than its best public path by more than this ratio")
    parser.add_argument("--bnn-models", default="resnet18_cifar,vgg_small", help="'none' skips part 4")
    parser.add_argument("--bnn-threads", default="1,2")
    parser.add_argument("--out", default="formats", help="JSON name under bench/out/")
    args = parser.parse_args()
    models = model_names(args.models)
    bnn_models = [] if args.bnn_models == "none" else [m.strip() for m in args.bnn_models.split(",") if m.strip()]
    with tempfile.TemporaryDirectory(prefix="aiot-bench-formats-") as tmp:
        os.environ["AIOT_RESULTS_DIR"] = tmp
        print(f"converting {len(models)} models to every format…", file=sys.stderr)
        matrix = conversion_matrix(models, Path(tmp) / "artifacts")
        print_table(["model", "format", "status", "size MB", "max abs", "max rel",
                     "top-1 noise/images", "conv s"],
                    [[r["model"], r["format"],
                      r["status"] + (f": {r['reason'][:60]}" if r["reason"] else ""),
                      "" if r["size_bytes"] is None else f"{r['size_bytes'] / 1e6:.2f}",
                      "" if r["max_abs"] is None else f"{r['max_abs']:.1e}",
                      "" if r.get("max_rel") is None else f"{r['max_rel']:.1e}",
                      "" if r["top1_agreement"] is None else
                      f"{r['top1_agreement']:.0%}/{r['dataset_top1_agreement'] or 0:.0%}",
                      "" if r["seconds"] is None else f"{r['seconds']:.1f}"] for r in matrix])
        print(f"\ntiming every runnable artifact on local, {args.rounds} interleaved rounds…", file=sys.stderr)
        timing = speed(matrix, args.rounds, Path(tmp))
        print("\nbest public path per runtime…", file=sys.stderr)
        best = best_paths(matrix, timing, args.rounds, Path(tmp) / "references")
        bnn = []
        if bnn_models:
            print(f"\nLCE BNN vs FP32 TFLite on local ({', '.join(bnn_models)})…", file=sys.stderr)
            bnn = bnn_speedups(bnn_models, [int(t) for t in args.bnn_threads.split(",")], args.rounds,
                               Path(tmp))
    print()
    print_table(["model", "format", "median ms (1 thread)", "× tflite"],
                [[t["model"], t["format"], f"{t['median_ms']:.3f}",
                  "" if t["vs_tflite"] is None else f"{t['vs_tflite']:.2f}"] for t in timing])
    print_best_paths(best)
    if bnn:
        print(f"\nLCE BNN speed-up over FP32 TFLite on {platform.machine()} (random weights; "
              + ("LCE's x86 kernels, not its aarch64 ones: this machine, not a phone)" if
                 platform.machine() in ("x86_64", "AMD64") else "LCE's optimized kernels)"))
        print_table(["model", "threads", "fp32 TFLite ms", "LCE BNN ms", "speed-up"],
                    [[p["model"], p["threads"], f"{p['fp32_ms']:.3f}", f"{p['bin_ms']:.3f}",
                      f"{p['speedup']:.2f}x"] for p in bnn])
    path = write_json(args.out, {"models": models, "rounds": args.rounds, "matrix": matrix,
                                  "speed": timing, "best_paths": best, "bnn_speedup": bnn,
                                  "gate": args.gate})
    print(f"\nwrote {path}")
    if args.gate is not None:
        over = gate_failures(best, args.gate)
        for r in over:
            print(f"gate {args.gate}: {r['model']} {r['artifact']} is {r['ratio']:.2f}x its best public "
                  f"path ({r['reference']})", file=sys.stderr)
        return 1 if over else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
