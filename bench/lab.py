"""A lab sweep's cost: per-run overhead of the lab path vs the local path, and driver CPU.

One Ray head node is started on this machine (``aiot lab start --head``) in a throw-away aiot
home whose inventory holds emulated devices (``--devices ssh,adb``); the driver (this
process) shares that inventory, so the *same* devices are measured both ways:

* **local**: the campaign engine's own worker per device (transport and agent session in
  this process);
* **lab**: ``CampaignPolicy(lab=...)``: a Ray actor per device on the node, the artifact
  shipped through the object store, records still written here. The actor (a Ray worker
  importing aiot) starts once per device and sweep; that start is timed on its own.

Each repeat runs ``--runs`` runs per device (format ``null``: the agent's no-op backend, so
a run is almost all overhead) through each path, alternating which goes first, each campaign
starting its sessions (and, in the lab, its runners) anew as a sweep does. Seconds per run =
the median of the runs' record durations (pending to finished, as the store keeps them), so
a campaign's one-off starts do not count as per-run cost. The table shows medians (min-max)
over repeats and the lab's added milliseconds per run (target: at most 50). **Driver CPU per device-hour**: this process's CPU seconds (user + system, all
threads) during the lab campaigns divided by the hours the devices spent measuring (the sum
of the runs' record durations): how much of one core a driver needs per device it holds.

Usage: ``python bench/lab.py [--repeats 5] [--runs 10] [--devices ssh,adb]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, print_table, write_json  # noqa: E402
from transports import _terminate_as_interrupt, aiot, isolate, kill_adb_server, stop_emulators  # noqa: E402

TARGET_MS = 50.0


def requests(devices: list[str], runs: int):
    from aiot.host.engine.runs import MeasureParams, expand_sweep

    params = MeasureParams(warmup_runs=1, warmup_min_s=0.0, min_runs=5, min_s=0.0, max_s=5.0)
    # Distinct seeds make distinct runs of one device (one sweep, nothing resumed).
    return [r for seed in range(runs)
            for r in expand_sweep(devices, ["tiny_cnn"], ["null"], [1], params=MeasureParams(**{
                **params.__dict__, "seed": seed}))]


def campaign(devices: list[str], runs: int, results: Path, lab) -> tuple[float, list]:
    """Wall seconds of one fresh campaign of ``runs`` runs per device, and its records."""
    from aiot.host.engine.campaign import CampaignPolicy, plan_sweep, run_campaign
    from aiot.host.store import open_store

    with open_store(results) as store:
        plan = plan_sweep(requests(devices, runs), store, fresh=True)
    started = time.perf_counter()
    records = run_campaign(plan, results, policy=CampaignPolicy(retries=1, lab=lab))
    wall = time.perf_counter() - started
    failed = [r.reason for r in records if r.status != "ok"]
    if failed:
        raise RuntimeError(f"{len(failed)} runs failed: {failed[0]}")
    return wall, records


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def busy_seconds(records) -> float:
    """Seconds the devices spent on these runs (each record's creation to its finish)."""
    return sum((datetime.fromisoformat(r.finished_at) - datetime.fromisoformat(r.created_at)).total_seconds()
               for r in records)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--runs", type=int, default=10, help="runs per device per campaign")
    parser.add_argument("--devices", default="ssh,adb", help="emulated device kinds")
    parser.add_argument("--out", default="lab")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    kinds = args.devices.split(",")
    names = [f"bench-lab-{kind}" for kind in kinds]
    per_run: dict[str, list[float]] = {"local": [], "lab": []}
    cpu = busy = 0.0
    runner_start: list[float] = []
    with tempfile.TemporaryDirectory(prefix="aiot-bench-lab-") as tmp:
        isolate(Path(tmp))
        from aiot.host.emulator.ssh import free_port
        from aiot.host.lab.session import LabSession

        address = f"127.0.0.1:{free_port()}"
        lab = None
        try:
            for kind, name in zip(kinds, names, strict=True):
                aiot("emulator", "start", kind, "--name", name, timeout=300)
            aiot("lab", "start", "--head", "--port", address.rpartition(":")[2], timeout=300)
            lab = LabSession(address)
            results = Path(os.environ["AIOT_RESULTS_DIR"])
            for name in names:  # once per device and sweep: a Ray worker starts and imports aiot
                started = time.perf_counter()
                lab.runner(name)
                runner_start.append(time.perf_counter() - started)
            for path in ("local", "lab"):  # untimed warm-up: conversion cache, sessions, workers
                campaign(names, 1, results, lab if path == "lab" else None)
            for repeat in range(args.repeats):
                order = ("local", "lab") if repeat % 2 == 0 else ("lab", "local")
                for path in order:
                    before = cpu_seconds()
                    _wall, records = campaign(names, args.runs, results, lab if path == "lab" else None)
                    durations = [busy_seconds([r]) for r in records]
                    per_run[path].append(median(durations))
                    if path == "lab":
                        cpu += cpu_seconds() - before
                        busy += sum(durations)
                        lab.close()  # every lab campaign starts its runners anew, as a sweep does
        finally:
            import ray

            if lab is not None:
                lab.close()
            ray.shutdown()
            aiot("lab", "stop", timeout=120)
            stop_emulators(names)
            kill_adb_server()
    added_ms = [(lab_s - local_s) * 1000 for lab_s, local_s in zip(per_run["lab"], per_run["local"], strict=True)]
    print_table(["path", "s per run (median)", "min", "max"],
                [[p, f"{median(v):.3f}", f"{min(v):.3f}", f"{max(v):.3f}"] for p, v in per_run.items()])
    cpu_per_device_hour = cpu / (busy / 3600) if busy else None
    verdict = "meets" if median(added_ms) <= TARGET_MS else "misses"
    print(f"\nlab adds {median(added_ms):.1f} ms per run (median over {args.repeats} repeats; "
          f"min {min(added_ms):.1f}, max {max(added_ms):.1f}): {verdict} the {TARGET_MS:.0f} ms target")
    print(f"a device's runner starts once per sweep: {median(runner_start):.2f} s (median of {len(runner_start)})")
    if cpu_per_device_hour is not None:
        print(f"driver CPU: {cpu_per_device_hour:.0f} CPU-s per device-hour of measurement "
              f"({cpu_per_device_hour / 36:.1f}% of a core per busy device)")
    write_json(args.out, {"devices": kinds, "runs_per_device": args.runs, "repeats": args.repeats,
                          "seconds_per_run": per_run, "added_ms": added_ms, "target_ms": TARGET_MS,
                          "runner_start_s": runner_start,
                          "driver_cpu_s_per_device_hour": cpu_per_device_hour})
    return 0


if __name__ == "__main__":
    sys.exit(main())
