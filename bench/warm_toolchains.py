"""Warm toolchain interpreters vs a fresh interpreter per toolchain command (issue 36).

One aiot process converts a campaign's worth of models whose converters run in a toolchain
(ExecuTorch: lowering and parity; LCE: the build and parity), as a sweep or a paper grid
does, once with ``AIOT_WARM_TOOLCHAINS=0`` (every command a fresh interpreter: each imports
``executorch.exir`` or TensorFlow again) and once warm (:mod:`aiot.core.warm_toolchain`).
Each round is a fresh process converting into an empty folder; its CPU counts everything it
started (the toolchain commands and servers are its waited-for descendants). Modes
alternate round by round so a busy machine weighs on both alike.

Usage: ``python bench/warm_toolchains.py [--rounds 2] [--jobs tiny_cnn:executorch,...]``;
writes ``bench/out/warm_toolchains.json``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, print_table, write_json  # noqa: E402

#: model[+binarize]:format, converted in this order by one process.
JOBS = "tiny_cnn:executorch,mobilenet_v2_mnist:executorch,tiny_bnn:lce,tiny_vgg+bnn:lce,tiny_vgg+reactnet:lce"

_CONVERT = """
import sys, time
from pathlib import Path
from aiot.converters.api import convert_model
for job in sys.argv[2].split(","):
    model, fmt = job.split(":")
    model, _, binarize = model.partition("+")
    started = time.perf_counter()
    convert_model(model, fmt, Path(sys.argv[1]), binarize=binarize or None, reuse=False)
    print(job, round(time.perf_counter() - started, 1), flush=True)
"""


def _round(jobs: str, warm: bool) -> dict:
    env = {**os.environ, "AIOT_WARM_TOOLCHAINS": "1" if warm else "0"}
    with tempfile.TemporaryDirectory(prefix="aiot-warm-bench-") as out:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", _CONVERT, out, jobs], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        stdout = proc.stdout.read()
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"a conversion failed (status {status}); run it with aiot convert to see why")
    per_job = {line.split()[0]: float(line.split()[1]) for line in stdout.splitlines() if line.strip()}
    return {"wall_s": round(wall, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "per_job_s": per_job}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jobs", default=JOBS)
    args = parser.parse_args()
    rounds = {"cold": [], "warm": []}
    for index in range(args.rounds):
        for mode in (("cold", "warm") if index % 2 == 0 else ("warm", "cold")):
            rounds[mode].append(_round(args.jobs, mode == "warm"))
            print(f"round {index + 1} {mode}: {rounds[mode][-1]}", file=sys.stderr)
    summary = {mode: {"wall_s": round(median([r["wall_s"] for r in runs]), 1),
                      "cpu_s": round(median([r["cpu_s"] for r in runs]), 1)}
               for mode, runs in rounds.items()}
    jobs = args.jobs.split(",")
    rows = [[job, *(round(median([r["per_job_s"][job] for r in rounds[m]]), 1)
                    for m in ("cold", "warm"))] for job in jobs]
    rows.append(["all (wall)", summary["cold"]["wall_s"], summary["warm"]["wall_s"]])
    rows.append(["all (CPU)", summary["cold"]["cpu_s"], summary["warm"]["cpu_s"]])
    print_table(["conversion", "cold s", "warm s"], rows)
    ratio = summary["warm"]["cpu_s"] / summary["cold"]["cpu_s"]
    print(f"warm/cold CPU: {ratio:.2f} (median of {args.rounds} rounds each, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f} at the end)")
    path = write_json("warm_toolchains", {"jobs": jobs, "rounds": rounds, "summary": summary,
                                          "warm_over_cold_cpu": round(ratio, 3)})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
