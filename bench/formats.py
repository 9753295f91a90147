"""Every model in every format: conversion matrix, then the same model's speed across formats.

Part 1 (matrix): ``convert_all`` for each model — status, artifact size, parity (max abs
error, top-1 agreement on noise and on 32 Fashion-MNIST images) and conversion time, one row
per (model, format). Part 2 (speed): every artifact that converted and has a runtime here is
timed on ``local`` through the same agent path as ``aiot run`` (1 thread), in interleaved
rounds so machine noise spreads over all formats alike; the table gives each format's median
and its ratio to TFLite's in the same run.

Usage: ``python bench/formats.py [--models tiny_cnn,tiny_bnn,...|small|all] [--rounds 3]
[--out formats]`` (``--out`` names the JSON under ``bench/out/``, so a run over other models
keeps an earlier run's file).
``small`` (default) is the tiny models plus every family's 28 px variant; ``all`` adds the
CIFAR and ImageNet-size models (long: InceptionV3 alone takes minutes per format).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
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
    from aiot.host.runs import MeasureParams, RunRequest, Workspace, run_sweep
    from aiot.host.store import open_store

    runnable = [r for r in rows if r["status"] == "ok" and get_converter(r["format"]).backend]
    params = MeasureParams(warmup_runs=5, warmup_min_s=0.2, min_runs=30, min_s=0.5, max_s=30.0)
    medians: dict[tuple[str, str], list[float]] = {}
    with open_store(results_dir) as store:
        workspace = Workspace(results_dir)
        try:
            for _ in range(rounds):
                requests = [RunRequest("local", r["model"], r["format"], 1, params=params) for r in runnable]
                for record in run_sweep(requests, store, workspace):
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="small")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="formats", help="JSON name under bench/out/")
    args = parser.parse_args()
    models = model_names(args.models)
    with tempfile.TemporaryDirectory(prefix="aiot-bench-formats-") as tmp:
        import os

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
    print()
    print_table(["model", "format", "median ms (1 thread)", "× tflite"],
                [[t["model"], t["format"], f"{t['median_ms']:.3f}",
                  "" if t["vs_tflite"] is None else f"{t['vs_tflite']:.2f}"] for t in timing])
    path = write_json(args.out, {"models": models, "rounds": args.rounds, "matrix": matrix,
                                  "speed": timing})
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
