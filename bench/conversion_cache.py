"""The machine's conversion cache: what a second results folder pays for an artifact that this
machine has converted already (copied and verified) against converting it (export + parity).

Each case converts into a new folder ``--runs`` times with the cache off and as many times
from the cache, interleaved, in one process (the toolchains are imported before the first
timed run, as in a long campaign). Wall and CPU seconds (this process and its children) per
conversion, medians. A temporary aiot cache folder is used; the user's is not touched.
Usage: ``python bench/conversion_cache.py [--runs N] [--cases tiny_cnn:onnx,resnet18:tflite]``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, print_table, write_json  # noqa: E402

CASES = "tiny_cnn:onnx,tiny_cnn:tflite,mobilenet_v2:onnx,resnet18:tflite"


def cpu_seconds() -> float:
    """User + system seconds of this process and its finished children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(convert) -> tuple[float, float, bool]:
    wall, cpu = time.perf_counter(), cpu_seconds()
    result = convert()
    return time.perf_counter() - wall, cpu_seconds() - cpu, result.cached


def measure(model: str, fmt: str, runs: int, work: Path) -> dict:
    from aiot.converters.api import convert_model
    from aiot.converters.conversion_cache import SWITCH

    folders = itertools.count()
    convert_model(model, fmt, work / "warm")  # toolchain imported, the cache's entry made
    fresh, kept = [], []
    for _ in range(runs):
        os.environ[SWITCH] = "off"
        fresh.append(timed(lambda: convert_model(model, fmt, work / str(next(folders)))))
        os.environ[SWITCH] = "on"
        kept.append(timed(lambda: convert_model(model, fmt, work / str(next(folders)))))
    assert not any(c for _, _, c in fresh) and all(c for _, _, c in kept), (fresh, kept)
    row = {"model": model, "format": fmt, "runs": runs}
    for label, samples in (("convert", fresh), ("cache", kept)):
        row[f"{label}_wall_s"] = round(median([w for w, _, _ in samples]), 3)
        row[f"{label}_cpu_s"] = round(median([c for _, c, _ in samples]), 3)
    row["cpu_ratio"] = round(row["convert_cpu_s"] / max(row["cache_cpu_s"], 1e-6), 1)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cases", default=CASES, help="model:format,... (default: %(default)s)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="aiot-bench-cache-") as tmp:
        os.environ["AIOT_CACHE_DIR"] = str(Path(tmp) / "cache")
        for case in args.cases.split(","):
            model, fmt = case.split(":")
            rows.append(measure(model, fmt, args.runs, Path(tmp) / case.replace(":", "-")))
    print_table(["model", "format", "convert wall s", "convert CPU s", "from cache wall s",
                 "from cache CPU s", "CPU ratio"],
                [[r["model"], r["format"], r["convert_wall_s"], r["convert_cpu_s"], r["cache_wall_s"],
                  r["cache_cpu_s"], f"{r['cpu_ratio']}x"] for r in rows])
    print(f"wrote {write_json('conversion_cache', {'runs': args.runs, 'cases': rows})}")


if __name__ == "__main__":
    main()
