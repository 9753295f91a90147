"""Campaign engine: efficiency on one device, scaling to many devices, repeatability.

Everything goes through the product's campaign engine (:func:`aiot.host.engine.campaign.plan_sweep`
and :func:`aiot.host.engine.campaign.run_campaign`, cool-down gating on, as ``aiot sweep`` runs it),
in a throw-away aiot home (results, cache, state, inventory, device workdir and ssh config
in a temporary folder; the user's toolchain environments are only read).

1. **Efficiency** (target ≥ 0.95, issue 53). A 16-key sweep on ``local`` (tiny_cnn and
   mobilenet_v2_cifar in onnx and tflite, threads 1, 2, 4 and 8 by default:
   ``--efficiency-models``, ``--efficiency-threads``; ``min_s`` 3 s per run). Its artifacts are
   converted in an untimed
   warm-up pass first, so the campaign measures what a campaign costs, not a first-ever
   conversion. ::

       efficiency = on-device measurement time / (campaign wall time − deliberate cool-down)

   *On-device measurement time* of a run is what the agent reports it spent loading and
   running the model, from its own clock: ``load_ms`` (runtime session creation)
   + ``first_inference_ms`` + the warm-up's inference time (``warmup.seconds``, the sum of its
   ``invoke`` times) + the timed loop's span (``measure_end_unix_s − measure_start_unix_s``,
   first timed iteration's start to the last one's end). The campaign's is the sum over its
   runs. *Campaign wall time* is the host's ``perf_counter`` around ``plan_sweep`` +
   ``run_campaign``. *Deliberate cool-down* is the sum of the runs' gated waits
   (``provenance.device_state.cooldown.waited_s``); on a VM without thermal sensors the gate
   returns at once ("no telemetry"), so it is 0 and its telemetry polls count as overhead.

   The rest of the wall time is attributed from a listener's host timestamps (``on_run_start``,
   ``on_stage`` convert/push/measure/cool-down, the agent's first ``load`` progress line,
   ``on_run_end``) and the agent's wall-clock anchors:

   * ``setup``: run start → cool-down gate (pending record, transport, the device's
     telemetry baseline on its first run);
   * ``cool-down gate``: telemetry polls of the gate (its deliberate wait is reported apart);
   * ``convert check``: the cached artifact's verification (source model hash, sidecar);
   * ``connect/deploy/hello``: the push stage of a device's first run in the campaign (agent
     deploy check, device probe, agent ``hello``, which imports every runtime, artifact push);
   * ``artifact push``: the push stage of later runs (content-addressed: a stat);
   * ``agent start``: spec push, agent process start and imports, up to its ``load`` line;
   * ``agent untimed``: agent time between its ``load`` line and the timed loop's end that is
     not on-device measurement (input generation, output fingerprint, loop bookkeeping);
   * ``result → stored``: the agent's exit, the telemetry after, the verdict, the store write;
   * ``engine``: before a device's first run and between its runs (thread pool, store
     connection, scheduling);
   * ``after last run``: closing the device's connection, then waiting for the campaign's
     slowest device (on several devices).

2. **Scale** (target: 16 devices ≤ 1.25 × one device's wall time). The same per-device sweep
   (tiny_cnn in the TEST ``null`` format, whose agent sleeps 5 ms per inference and uses no
   CPU; threads 1, 2, 4, 8 with aiot's default timing, as ``aiot sweep --threads 1,2,4,8``
   runs it: warm-up ≥ 0.5 s, timed ≥ 50 runs and ≥ 1 s; ``--null-runs N`` instead gives short
   runs of N iterations, which measure what a campaign costs beyond its measurements) on 1,
   4 and 16 emulated SSH devices (a private OpenSSH sshd each, started before and stopped
   after, always). An untimed warm-up
   campaign over every emulator first converts the artifact and deploys the agent and the
   artifact everywhere, so no device count pays a first deployment the others do not. Each
   row reports the campaign's wall time, its ratio to one device's, the mean per-device
   efficiency (as above, per device) and where CPU went: emulated devices all run on this
   host, so their agents' start-up, shells and sshd sessions share its cores. ``aiot CPU s``
   is this process's CPU time (engine threads, SSH clients, store); ``device CPU s`` that of
   the devices' processes (each emulator's sshd and every descendant it reaped: sessions,
   shells, agents); ``CPU floor s`` their sum over this machine's core count, the wall time
   that CPU work needs even if perfectly spread. ``machine busy`` (``/proc/stat``) and the
   load average include other users' work on the machine, which competes for the same cores.

3. **Repeatability**: the same spec (tiny_cnn, onnx, 1 thread, default timing parameters) run
   ``--repeats`` times on ``local``, each run its own fresh campaign (a new sweep attempt, a
   new agent process); the table gives each run's median and the coefficient of variation
   (sample standard deviation / mean) of those medians.

Efficiency and scale are measured for both ways the agent can run a campaign's commands
(``--agent session,process``): one ``session`` agent per device, each run in a child forked
from it (aiot's default since agent 0.5.0), and one agent ``process`` per command (before).

Usage: ``python bench/campaign.py [--devices 1,4,16] [--repeats 5] [--quick]
[--parts efficiency,scale,repeatability] [--agent session,process]``. ``--quick`` is a smoke
run (short runs, fewer combinations, devices 1,4 unless given). Writes ``bench/out/campaign.json``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_json

PARTS = ("efficiency", "scale", "repeatability")
#: How the device agent runs a campaign's commands: one ``session`` per device with each run
#: in a forked child (aiot's default), or one agent ``process`` per command (as before 0.5.0).
AGENT_MODES = ("session", "process")
EFFICIENCY_TARGET = 0.95
SCALE_TARGET = 1.25
EMULATOR_PREFIX = "bench-ssh-"


# -- pure helpers (tested in tests/unit/test_bench_campaign.py) --------------------------------


def parse_counts(text: str) -> list[int]:
    """``"1,4,16"`` → ``[1, 4, 16]``; raises ValueError unless every count is ≥ 1."""
    counts = [int(part) for part in text.split(",") if part.strip()]
    if not counts or min(counts) < 1:
        raise ValueError(f"device counts must be integers ≥ 1, got '{text}'")
    return counts


def on_device_s(result: dict) -> float:
    """A run's on-device measurement time in seconds, from the agent's own numbers: load +
    first inference + warm-up inferences + the timed loop's span (see the module docstring)."""
    span = 0.0
    begin, end = result.get("measure_start_unix_s"), result.get("measure_end_unix_s")
    if begin is not None and end is not None:
        span = end - begin
    warmup = (result.get("warmup") or {}).get("seconds") or 0.0
    return (result.get("load_ms") or 0.0) / 1e3 + (result.get("first_inference_ms") or 0.0) / 1e3 \
        + warmup + span


def cooldown_waited_s(provenance: dict) -> float:
    """The deliberate cool-down wait of a run (0 without gating or without telemetry)."""
    state = provenance.get("device_state") or {}
    return float((state.get("cooldown") or {}).get("waited_s") or 0.0)


def efficiency(on_device: float, wall: float, cooldown: float = 0.0) -> float | None:
    """On-device time over the wall time less deliberate cool-down; None if nothing is left."""
    busy = wall - cooldown
    return on_device / busy if busy > 0 else None


def cv(values: list[float]) -> float | None:
    """Coefficient of variation: sample standard deviation / mean (None below two values)."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean else None


#: Attribution rows, in the order of a run; ``on-device`` is the measurement itself.
SEGMENTS = ("engine", "setup", "cool-down gate", "cool-down (deliberate)", "convert check",
            "connect/deploy/hello", "artifact push", "agent start", "on-device", "agent untimed",
            "result → stored", "after last run", "unattributed")


def run_segments(entry: dict, result: dict | None, waited_s: float,
                 first: bool) -> dict[str, float]:
    """Split one run's host interval (``entry["start"]`` → ``entry["end"]``) into ``SEGMENTS``.

    ``entry`` holds host epoch timestamps: ``start``, ``end``, ``stages`` (first time each
    listener stage began) and ``phases`` (first progress line of each agent phase). ``result``
    is the agent's result (wall-clock anchors on the same clock: all devices here live on
    this machine). The parts always sum to ``end − start``; whatever cannot be placed (a
    failed run, a missing event) is ``unattributed``.
    """
    total = entry["end"] - entry["start"]
    stages, phases = entry.get("stages", {}), entry.get("phases", {})
    needed = ("convert", "push", "measure")
    end_of_loop = (result or {}).get("measure_end_unix_s")
    if (not result or end_of_loop is None or "load" not in phases
            or any(s not in stages for s in needed)):
        return {"unattributed": total}
    gate = stages.get("cool-down")
    parts = {"setup": (gate or stages["convert"]) - entry["start"]}
    if gate is not None:
        gate_s = stages["convert"] - gate
        deliberate = min(waited_s, gate_s)
        parts["cool-down (deliberate)"] = deliberate
        parts["cool-down gate"] = gate_s - deliberate
    parts["convert check"] = stages["push"] - stages["convert"]
    parts["connect/deploy/hello" if first else "artifact push"] = stages["measure"] - stages["push"]
    parts["agent start"] = phases["load"] - stages["measure"]
    device = on_device_s(result)
    parts["on-device"] = device
    parts["agent untimed"] = (end_of_loop - phases["load"]) - device
    parts["result → stored"] = entry["end"] - end_of_loop
    return parts


def device_attribution(entries: list[dict], results: list[dict | None], waits: list[float],
                       started: float, ended: float) -> dict[str, float]:
    """One device's campaign, ``started`` → ``ended`` (host epoch s), split into ``SEGMENTS``.

    ``entries`` are its runs in order (as :class:`Timeline` records them); gaps before, between
    them are the ``engine``'s; the time after its last run is ``after last run`` (closing its
    connection, then waiting for the campaign's slowest device). The parts sum to
    ``ended − started``.
    """
    totals = dict.fromkeys(SEGMENTS, 0.0)
    cursor = started
    for index, (entry, result, waited) in enumerate(zip(entries, results, waits, strict=True)):
        totals["engine"] += entry["start"] - cursor
        for name, seconds in run_segments(entry, result, waited, index == 0).items():
            totals[name] += seconds
        cursor = entry["end"]
    totals["after last run"] += ended - cursor
    return totals


def cpu_busy_jiffies() -> tuple[int, int] | None:
    """(busy, total) CPU jiffies of the whole machine from ``/proc/stat``; None without it."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already in user/nice
    return total - idle, total


def busy_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Share of all cores' time spent busy between two :func:`cpu_busy_jiffies` readings."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def stat_cpu_ticks(stat: str) -> int:
    """utime + stime + cutime + cstime (clock ticks) from a ``/proc/<pid>/stat`` line: the
    process's own CPU time and that of every descendant it has reaped."""
    fields = stat.rsplit(") ", 1)[1].split()  # fields[0] is the state (field 3 of the line)
    return sum(int(v) for v in fields[11:15])


def process_cpu_s(pid: int) -> float | None:
    """:func:`stat_cpu_ticks` of ``pid`` in seconds; None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return stat_cpu_ticks(fh.read()) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


# -- environment and devices -------------------------------------------------------------------


def isolate(home: Path) -> None:
    """Point every aiot folder into ``home`` (before any aiot module reads them).

    The user's toolchain environments stay where they are (read-only use: a tflite or LCE
    runtime may live there), as in the test suite.
    """
    from aiot.core.toolchains import root_dir

    toolchains = str(root_dir())
    for name in ("AIOT_DEVICE", "ANDROID_SERIAL"):
        os.environ.pop(name, None)
    os.environ.update({
        "AIOT_TOOLCHAINS_DIR": toolchains,
        "AIOT_RESULTS_DIR": str(home / "results"), "AIOT_CACHE_DIR": str(home / "cache"),
        "AIOT_LOCAL_WORKDIR": str(home / "local"), "AIOT_STATE_DIR": str(home / "state"),
        "AIOT_INVENTORY": str(home / "devices.toml"), "XDG_CONFIG_HOME": str(home / "config"),
        "AIOT_NO_PROGRESS": "1", "NO_COLOR": "1",
    })


def start_emulators(count: int) -> list[str]:
    """Start ``count`` SSH emulators (``bench-ssh-N``); returns their names."""
    from aiot.host.emulator import manager

    names = []
    for n in range(1, count + 1):
        name = f"{EMULATOR_PREFIX}{n}"
        manager.start("ssh", name)
        names.append(name)
        print(f"  started {name}", file=sys.stderr, flush=True)
    return names


def stop_emulators() -> None:
    """Stop every emulator in our private state folder (all of them are ours)."""
    from aiot.host.emulator import manager

    for emulator in manager.running():
        try:
            manager.stop(emulator["name"])
        except Exception as exc:  # noqa: BLE001 - clean-up goes on with the others
            print(f"warning: emulator {emulator['name']} may still run: {exc}", file=sys.stderr)


# -- campaigns with a timeline -----------------------------------------------------------------


class Timeline:
    """A campaign listener keeping host timestamps of every run's stages, per device.

    Runs on one device are serial, so a device's newest entry is the run in flight.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: dict[str, list[dict]] = {}

    def _current(self, device: str) -> dict:
        entries = self.runs.setdefault(device, [])
        if not entries or "end" in entries[-1]:
            entries.append({"start": time.time(), "stages": {}, "phases": {}})
        return entries[-1]

    def on_run_start(self, request, index, total) -> None:
        with self.lock:
            self.runs.setdefault(request.device, []).append(
                {"start": time.time(), "stages": {}, "phases": {}})

    def on_stage(self, request, stage) -> None:
        now = time.time()
        with self.lock:
            self._current(request.device)["stages"].setdefault(stage, now)

    def on_progress(self, request, phase, done, total) -> None:
        now = time.time()
        with self.lock:
            self._current(request.device)["phases"].setdefault(phase, now)

    def on_run_end(self, record) -> None:
        now = time.time()
        with self.lock:
            entry = self._current(record.device)
            entry["end"], entry["record_id"] = now, record.id


class CpuMeter:
    """CPU seconds spent by this process (aiot's host side: the engine's threads, SSH clients,
    store, conversion check) and by the devices (agents, shells and sshd sessions).

    The device side is this process's reaped children (the local device's agents and shells)
    plus, per emulator, its sshd's own and reaped descendants' time. An sshd session and the
    agents under it are reaped when the campaign closes its connection, so :meth:`stop` waits
    for the emulators' process trees to empty first. Unlike the machine-wide busy share, this
    leaves other users' work out.
    """

    def __init__(self, emulator_pids: list[int]) -> None:
        self.pids = emulator_pids
        self.start = self._read()

    def _read(self) -> tuple[float, float]:
        t = os.times()
        device = t.children_user + t.children_system
        device += sum(process_cpu_s(pid) or 0.0 for pid in self.pids)
        return t.user + t.system, device

    def stop(self, settle_s: float = 10.0) -> dict[str, float]:
        from aiot.host.emulator.state import descendants

        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline and any(descendants(pid) for pid in self.pids):
            time.sleep(0.05)
        end = self._read()
        return {"aiot_s": end[0] - self.start[0], "device_s": end[1] - self.start[1]}


def campaign(requests, results_dir: Path, seed: int = 0,
             emulator_pids: list[int] | None = None, agent: str = "session") -> dict:
    """Run ``requests`` as one fresh campaign with cool-down gating, the agent in ``agent``
    mode (see ``AGENT_MODES``); its records and timeline."""
    from aiot.host.engine.campaign import CampaignPolicy, plan_sweep, run_campaign
    from aiot.host.engine.cooldown import CooldownPolicy
    from aiot.host.store import open_store

    timeline = Timeline()
    load_before = _loadavg()
    meter = CpuMeter(emulator_pids or [])
    cpu_before = cpu_busy_jiffies()
    started, t0 = time.time(), time.perf_counter()
    with open_store(results_dir) as store:
        plan = plan_sweep(requests, store, seed=seed, fresh=True)
    policy = CampaignPolicy(cooldown=CooldownPolicy(), persistent_agent=agent == "session")
    records = run_campaign(plan, results_dir, timeline, policy)
    wall = time.perf_counter() - t0
    ended = time.time()
    cpu = busy_share(cpu_before, cpu_busy_jiffies())
    cpu_s = meter.stop()
    failed = [r for r in records if r.status != "ok"]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(records)} runs did not succeed, e.g. "
                           f"{failed[0].device}: {failed[0].status}: {failed[0].reason}")
    return {"records": records, "timeline": timeline, "wall_s": wall, "started": started,
            "ended": ended, "cpu_busy": cpu, "loadavg_1min": [load_before, _loadavg()],
            "cpu_s": cpu_s}


def _loadavg() -> float | None:
    """This machine's 1-minute load average (other users' work included), or None."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def analyse(done: dict) -> dict:
    """Per-device on-device time, cool-down, efficiency and attribution of one campaign."""
    by_id = {r.id: r for r in done["records"]}
    devices = {}
    for device, entries in done["timeline"].runs.items():
        records = [by_id.get(e.get("record_id")) for e in entries]
        results = [r.result if r is not None else None for r in records]
        waits = [cooldown_waited_s(r.provenance) if r is not None else 0.0 for r in records]
        on_device = sum(on_device_s(r) for r in results if r)
        cooldown = sum(waits)
        parts = device_attribution(entries, results, waits, done["started"], done["ended"])
        devices[device] = {"runs": len(entries), "on_device_s": on_device, "cooldown_s": cooldown,
                           "efficiency": efficiency(on_device, done["wall_s"], cooldown),
                           "attribution_s": parts}
    return devices


def mean_attribution(devices: dict) -> dict[str, float]:
    """Each segment's seconds, averaged over the devices of a campaign."""
    return {name: statistics.fmean(d["attribution_s"][name] for d in devices.values())
            for name in SEGMENTS}


def run_rows(done: dict) -> list[dict]:
    """The campaign's runs, for the JSON: what ran and the agent's own numbers (no samples)."""
    rows = []
    for r in done["records"]:
        result = r.result or {}
        rows.append({"device": r.device, "model": r.model, "format": r.format, "threads": r.threads,
                     "status": r.status, "median_ms": r.median_ms, "validity": r.validity,
                     "samples": len(result.get("samples_ns") or []),
                     "load_ms": result.get("load_ms"),
                     "first_inference_ms": result.get("first_inference_ms"),
                     "warmup": result.get("warmup"), "on_device_s": on_device_s(result),
                     "cooldown_waited_s": cooldown_waited_s(r.provenance),
                     "cooldown_reason": ((r.provenance.get("device_state") or {}).get("cooldown")
                                         or {}).get("reason")})
    return rows


def warm_conversions(models: list[str], formats: list[str], results_dir: Path) -> None:
    """Convert every artifact the campaign needs (untimed), where its workspace looks."""
    from aiot.converters.api import convert_model

    for model in models:
        for fmt in formats:
            started = time.perf_counter()
            conv = convert_model(model, fmt, results_dir / "artifacts")
            print(f"  {model} · {fmt}: {'cached' if conv.cached else 'converted'} in "
                  f"{time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)


# -- the three parts ---------------------------------------------------------------------------


def part_efficiency(args, results_dir: Path) -> list[dict]:
    """One row per agent mode, the same sweep each (modes alternate if repeated)."""
    from aiot.host.engine.runs import MeasureParams, expand_sweep

    params = MeasureParams(min_s=args.min_s, max_s=max(150.0, args.min_s * 2))
    formats = ["onnx", "tflite"]
    models = [args.model] if args.quick else args.efficiency_models
    threads = [1] if args.quick else args.efficiency_threads
    print("efficiency: warm-up conversion pass…", file=sys.stderr, flush=True)
    warm_conversions(models, formats, results_dir)
    requests = expand_sweep(["local"], models, formats, threads, params=params)
    return [_efficiency_row(args, results_dir, requests, formats, threads, params, mode, models)
            for mode in args.agent]


def _efficiency_row(args, results_dir: Path, requests, formats, threads, params, mode: str,
                    models: list[str]) -> dict:
    print(f"efficiency: timed campaign, {len(requests)} runs on local, agent {mode}…",
          file=sys.stderr, flush=True)
    done = campaign(requests, results_dir, seed=1, agent=mode)
    device = analyse(done)["local"]
    return {"agent": mode, "device": "local", "model": ",".join(models), "formats": formats,
            "threads": threads,
            "params": _params(params), "wall_s": done["wall_s"], "cpu_busy": done["cpu_busy"],
            "on_device_s": device["on_device_s"], "cooldown_s": device["cooldown_s"],
            "efficiency": device["efficiency"], "target": EFFICIENCY_TARGET,
            # Without the once-per-device-per-campaign connect, probe and agent hello: what a
            # long campaign tends to.
            "efficiency_after_hello": efficiency(
                device["on_device_s"], done["wall_s"],
                device["cooldown_s"] + device["attribution_s"]["connect/deploy/hello"]),
            "loadavg_1min": done["loadavg_1min"], "cpu_s": done["cpu_s"],
            "attribution_s": device["attribution_s"], "runs": run_rows(done)}


def part_scale(args, results_dir: Path) -> dict:
    from aiot.host.engine.runs import MeasureParams, expand_sweep

    if args.null_runs:  # short runs: what a campaign costs beyond its measurements
        params = MeasureParams(warmup_runs=1, warmup_min_s=0.0, min_runs=args.null_runs,
                               min_s=0.0, max_s=60.0)
    else:  # what `aiot sweep --threads 1,2,4,8` measures by default
        params = MeasureParams()
    threads = [1] if args.quick else [1, 2, 4, 8]
    counts = sorted(set(args.devices))
    rows = []
    print(f"scale: starting {max(counts)} ssh emulators…", file=sys.stderr, flush=True)
    try:
        names = start_emulators(max(counts))
        from aiot.host.emulator import manager

        pids = {e["name"]: e["pid"] for e in manager.running()}
        print("scale: warm-up campaign (convert, deploy the agent and artifact everywhere)…",
              file=sys.stderr, flush=True)
        warm_conversions([args.model], ["null"], results_dir)
        warm = MeasureParams(warmup_runs=0, warmup_min_s=0.0, min_runs=1, min_s=0.0, max_s=10.0)
        campaign(expand_sweep(names, [args.model], ["null"], [1], params=warm), results_dir,
                 seed=99)
        for count, mode in itertools.product(counts, args.agent):
            requests = expand_sweep(names[:count], [args.model], ["null"], threads, params=params)
            print(f"scale: {count} device(s), {len(requests)} runs, agent {mode}…", file=sys.stderr,
                  flush=True)
            done = campaign(requests, results_dir, seed=2,
                            emulator_pids=[pids[n] for n in names[:count]], agent=mode)
            devices = analyse(done)
            each = list(devices.values())
            rows.append({"agent": mode, "devices": count, "runs": len(requests),
                         "wall_s": done["wall_s"],
                         "cpu_busy": done["cpu_busy"], "loadavg_1min": done["loadavg_1min"],
                         "cpu_s": done["cpu_s"],
                         # The wall time the CPU work alone needs on this machine's cores.
                         "cpu_floor_s": sum(done["cpu_s"].values()) / (os.cpu_count() or 1),
                         "on_device_s_per_device": statistics.fmean(d["on_device_s"] for d in each),
                         "efficiency_mean": statistics.fmean(d["efficiency"] for d in each),
                         "efficiency_min": min(d["efficiency"] for d in each),
                         "runs_per_device": statistics.fmean(d["runs"] for d in each),
                         "attribution_s": mean_attribution(devices),
                         "per_device": {name: {k: v for k, v in d.items() if k != "attribution_s"}
                                        for name, d in devices.items()},
                         "run_records": run_rows(done)})
    finally:
        print("scale: stopping emulators…", file=sys.stderr, flush=True)
        stop_emulators()
    for row in rows:
        base = next((r["wall_s"] for r in rows
                     if r["devices"] == 1 and r["agent"] == row["agent"]), None)
        row["vs_one_device"] = row["wall_s"] / base if base else None
    return {"model": args.model, "format": "null", "sleep_ms": 5.0, "threads": threads,
            "params": _params(params), "target_16_over_1": SCALE_TARGET, "rows": rows}


def part_repeatability(args, results_dir: Path) -> dict:
    from aiot.host.engine.runs import MeasureParams, RunRequest

    params = MeasureParams(min_s=0.3) if args.quick else MeasureParams()
    request = RunRequest("local", args.model, "onnx", 1, params=params)
    print(f"repeatability: {args.repeats} fresh campaigns of {request.label()}…", file=sys.stderr,
          flush=True)
    warm_conversions([args.model], ["onnx"], results_dir)
    medians, validity = [], []
    for _ in range(args.repeats):
        (record,) = campaign([request], results_dir, seed=3)["records"]
        medians.append(record.median_ms)
        validity.append(record.validity)
    return {"spec": request.label(), "params": _params(params), "medians_ms": medians,
            "validity": validity, "mean_ms": statistics.fmean(medians), "cv": cv(medians)}


def _params(params) -> dict:
    from dataclasses import asdict

    return asdict(params)


# -- report ------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:.1%}"


def _load(pair: list) -> str:
    """``before→after`` 1-minute load averages."""
    return "" if None in pair else f"{pair[0]:.1f}→{pair[1]:.1f}"


def report_efficiency(rows: list[dict]) -> None:
    eff = rows[0]
    print(f"\n(a) campaign efficiency on local: {eff['model']} × {','.join(eff['formats'])} × "
          f"threads {','.join(map(str, eff['threads']))} ({len(eff['runs'])} runs, min_s "
          f"{eff['params']['min_s']:g} s), cool-down gating on")
    print_table(["agent", "campaign wall s", "cool-down s", "on-device s", "efficiency", "target",
                 "w/o one-time hello", "aiot CPU s", "device CPU s", "machine busy",
                 "load 1 min"],
                [[e["agent"], f"{e['wall_s']:.2f}", f"{e['cooldown_s']:.2f}",
                  f"{e['on_device_s']:.2f}",
                  f"{e['efficiency']:.3f}", f"≥ {e['target']}",
                  f"{e['efficiency_after_hello']:.3f}", f"{e['cpu_s']['aiot_s']:.2f}",
                  f"{e['cpu_s']['device_s']:.2f}", _pct(e["cpu_busy"]),
                  _load(e["loadavg_1min"])] for e in rows])
    print("\nwhere the campaign's wall time went (seconds, share of the wall time)")
    names = [n for n in SEGMENTS if any(e["attribution_s"][n] for e in rows)]
    print_table(["segment", *[e["agent"] for e in rows]],
                [[n, *[f"{e['attribution_s'][n]:.3f} ({_pct(e['attribution_s'][n] / e['wall_s'])})"
                       for e in rows]] for n in names])
    print("\nruns")
    print_table(["agent", "format", "threads", "median ms", "samples", "load ms", "1st ms",
                 "warm-up s", "on-device s", "cool-down"],
                [[e["agent"], r["format"], r["threads"], f"{r['median_ms']:.4f}", r["samples"],
                  f"{r['load_ms']:.1f}", f"{r['first_inference_ms']:.2f}",
                  f"{r['warmup']['seconds']:.3f}", f"{r['on_device_s']:.3f}",
                  f"{r['cooldown_waited_s']:g} s ({r['cooldown_reason'] or 'cool'})"]
                 for e in rows for r in e["runs"]])


def report_scale(scale: dict) -> None:
    p = scale["params"]
    print(f"\n(b) scale: {scale['model']} · null (sleeps {scale['sleep_ms']:g} ms per "
          "inference) × "
          f"threads {','.join(map(str, scale['threads']))} per device "
          f"(warm-up ≥ {p['warmup_runs']} "
          f"runs and {p['warmup_min_s']:g} s, timed ≥ {p['min_runs']} runs and {p['min_s']:g} s "
          "each), on N emulated ssh devices in parallel")
    print_table(["agent", "devices", "runs", "wall s", "× 1 device", "on-device s/device",
                 "efficiency mean (min)", "aiot CPU s", "device CPU s", "CPU floor s",
                 "machine busy", "load 1 min"],
                [[r["agent"], r["devices"], r["runs"], f"{r['wall_s']:.2f}",
                  "" if r["vs_one_device"] is None else f"{r['vs_one_device']:.2f}",
                  f"{r['on_device_s_per_device']:.2f}",
                  f"{r['efficiency_mean']:.3f} ({r['efficiency_min']:.3f})",
                  f"{r['cpu_s']['aiot_s']:.2f}", f"{r['cpu_s']['device_s']:.2f}",
                  f"{r['cpu_floor_s']:.2f}", _pct(r["cpu_busy"]), _load(r["loadavg_1min"])]
                 for r in scale["rows"]])
    for mode in dict.fromkeys(r["agent"] for r in scale["rows"]):
        ratio = _largest_ratio(scale, mode)
        if ratio:
            print(f"agent {mode}: {ratio[0]} devices / 1 device: {ratio[1]:.2f} "
                  f"(target ≤ {scale['target_16_over_1']})")
    print("\nwhere each device's wall time went (seconds, mean over the devices)")
    names = [n for n in SEGMENTS if any(r["attribution_s"][n] for r in scale["rows"])]
    print_table(["segment", *[f"{r['devices']} dev {r['agent']}" for r in scale["rows"]]],
                [[n, *[f"{r['attribution_s'][n]:.3f}" for r in scale["rows"]]] for n in names])


def _largest_ratio(scale: dict, mode: str) -> tuple[int, float] | None:
    rows = [r for r in scale["rows"] if r["vs_one_device"] is not None and r["devices"] > 1
            and r["agent"] == mode]
    if not rows:
        return None
    top = max(rows, key=lambda r: r["devices"])
    return top["devices"], top["vs_one_device"]


def report_repeatability(rep: dict) -> None:
    print(f"\n(c) repeatability: {rep['spec']}, {len(rep['medians_ms'])} fresh campaigns "
          f"(min_runs {rep['params']['min_runs']}, min_s {rep['params']['min_s']:g} s)")
    print_table(["repeat", "median ms", "validity"],
                [[i + 1, f"{m:.4f}", v]
                 for i, (m, v) in enumerate(zip(rep["medians_ms"], rep["validity"], strict=True))])
    spread = "n/a" if rep["cv"] is None else f"{rep['cv']:.2%}"
    print(f"mean {rep['mean_ms']:.4f} ms, CV of the medians {spread}")


# -- main --------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", default=None, help="emulated device counts (default 1,4,16; "
                                                          "--quick: 1,4)")
    parser.add_argument("--repeats", type=int, default=5, help="repeatability runs")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: short runs, fewer combinations")
    parser.add_argument("--parts", default=",".join(PARTS), help="a subset of " + ",".join(PARTS))
    parser.add_argument("--model", default="tiny_cnn")
    parser.add_argument("--efficiency-models", default="tiny_cnn,mobilenet_v2_cifar",
                        help="efficiency: the models of its sweep (× onnx, tflite × "
                             "--efficiency-threads: 16 keys by default; --quick: --model only)")
    parser.add_argument("--efficiency-threads", default="1,2,4,8",
                        help="efficiency: the thread counts of its sweep (--quick: 1)")
    parser.add_argument("--agent", default=",".join(AGENT_MODES),
                        help="agent modes to compare in efficiency and scale: session (one agent "
                             "per device, a forked child per run) and/or process (one per command)")
    parser.add_argument("--min-s", type=float, default=None,
                        help="efficiency: seconds of timed loop per run (default 3; --quick 0.5)")
    parser.add_argument("--null-runs", type=int, default=None,
                        help="scale: short runs of this many timed iterations, no warm-up time "
                             "and no minimum time (default: aiot's default timing; --quick 20)")
    args = parser.parse_args()
    try:
        args.devices = parse_counts(args.devices or ("1,4" if args.quick else "1,4,16"))
    except ValueError as exc:
        parser.error(str(exc))
    args.parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if not args.parts or not set(args.parts) <= set(PARTS):
        parser.error(f"--parts is a subset of {','.join(PARTS)}")
    if args.repeats < 2:
        parser.error("--repeats must be ≥ 2 (a CV needs two values)")
    args.agent = [m.strip() for m in args.agent.split(",") if m.strip()]
    if not args.agent or not set(args.agent) <= set(AGENT_MODES):
        parser.error(f"--agent is a subset of {','.join(AGENT_MODES)}")
    args.efficiency_models = [m.strip() for m in args.efficiency_models.split(",") if m.strip()]
    try:
        args.efficiency_threads = parse_counts(args.efficiency_threads)
    except ValueError as exc:
        parser.error(str(exc))
    args.min_s = args.min_s if args.min_s is not None else (0.5 if args.quick else 3.0)
    args.null_runs = args.null_runs or (20 if args.quick else None)
    return args


def _terminate_as_interrupt(signum, frame) -> None:
    # SIGTERM would end the process without clean-up; as an interrupt the finally blocks run.
    raise KeyboardInterrupt


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    out: dict = {"quick": args.quick, "cpus": os.cpu_count()}
    try:
        with tempfile.TemporaryDirectory(prefix="aiot-bench-campaign-") as tmp:
            home = Path(tmp)
            isolate(home)
            results_dir = home / "results"
            if "efficiency" in args.parts:
                out["efficiency"] = part_efficiency(args, results_dir)
            if "repeatability" in args.parts:
                out["repeatability"] = part_repeatability(args, results_dir)
            if "scale" in args.parts:
                out["scale"] = part_scale(args, results_dir)
    except KeyboardInterrupt:
        print("interrupted: emulators stopped, temporary aiot home removed", file=sys.stderr)
        return 130
    if "efficiency" in out:
        report_efficiency(out["efficiency"])
    if "scale" in out:
        report_scale(out["scale"])
    if "repeatability" in out:
        report_repeatability(out["repeatability"])
    path = write_json("campaign", out)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
