"""Agent session: queries per second of a deployed model, persistent session vs one-shot agent.

A black-box attack asks the deployed model thousands of questions. Two ways to answer them,
both through ``aiot.host.robust.deployed.open_deployed`` (the predictor the attack suites use):

* **session**: one long-lived agent per device (``python -m device_agent serve``) loads the
  model once and answers JSON-lines requests over the transport's stream;
* **one-shot**: every call pushes an ``.npy``, starts an agent (``predict``: Python start-up,
  runtime import, model load) and pulls the outputs back.

Measured on three device kinds, all on this machine: ``local``, an emulated SSH device (a real
OpenSSH sshd on loopback, paramiko) and an emulated ADB device (aiot's adbd behind the real
``adb`` server on a private port), started with ``aiot emulator start`` in a throw-away aiot
home (see ``bench/transports.py``). Model: a zoo model (``tiny_cnn`` by default, 1×28×28
inputs) as ONNX Runtime ``ort``. Every call sends fresh random inputs (so the one-shot push is
never skipped by content addressing). Each repeat times ``--session-calls`` calls (session)
or ``--oneshot-calls`` calls (one-shot) after one untimed warm-up call per predictor; repeats
alternate between devices and modes to share the machine's noise. Queries per second =
images answered / wall-clock seconds of the timed calls; the table shows the median (min–max)
over repeats. ``runtime ms/query`` is the agent's own inference time (the session's
``compute_ms``), to tell the runtime's share from the transport's and the agent's;
``session start ms`` is the time from asking for a new session to its ``ready`` (Python
start-up, runtime import, model load: what the one-shot mode pays on every call).

Usage: ``python bench/agent_session.py [--repeats 5] [--session-calls 100]
[--oneshot-calls 3] [--batches 1,32] [--devices local,ssh,adb] [--model tiny_cnn]``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, print_table, write_json  # noqa: E402
from transports import KINDS, _terminate_as_interrupt, devices, isolate  # noqa: E402

MODES = ("session", "one-shot")


def open_predictors(names: dict[str, str], model: str, home: Path) -> dict:
    """``{(kind, mode): predictor}``: one workspace per device, shared by its two modes."""
    from aiot.host.engine.workspace import Workspace
    from aiot.host.robust.deployed import open_deployed
    from aiot.host.robust.target import Target

    predictors = {}
    for kind, name in names.items():
        workspace = Workspace(home / "results")
        target = Target(model, fmt="ort", device=name)
        for mode in MODES:
            predictors[kind, mode] = open_deployed(target, workspace, persistent=mode == "session")
    return predictors


def session_start_ms(predictor) -> float:
    """Milliseconds from asking for a new agent session to its ``ready`` (then closed)."""
    t0 = time.perf_counter()
    serving = predictor.session.serve(predictor._spec())
    elapsed = (time.perf_counter() - t0) * 1e3
    serving.close()
    return elapsed


def time_calls(predictor, calls: int, batch: int, shape: tuple[int, ...], rng) -> dict:
    """``calls`` predictions of ``batch`` fresh random images: queries/s and ms per call."""
    inputs = [rng.random((batch, *shape), dtype="float32") for _ in range(calls)]
    compute_before = predictor.compute_ms
    t0 = time.perf_counter()
    for x in inputs:
        predictor.predict(x)
    seconds = time.perf_counter() - t0
    out = {"qps": calls * batch / seconds, "ms_per_call": seconds * 1e3 / calls}
    if compute_before is not None:
        out["runtime_ms_per_query"] = (predictor.compute_ms - compute_before) / (calls * batch)
    return out


def measure(predictors: dict, batches: list[int], repeats: int, calls: dict[str, int],
            shape: tuple[int, ...]) -> dict:
    """Repeats of every (device, mode, batch), interleaved; raw samples per combination."""
    import numpy as np

    rng = np.random.default_rng(0)
    samples: dict[tuple, list[dict]] = {}
    for (kind, mode), predictor in predictors.items():
        predictor.predict(rng.random((1, *shape), dtype="float32"))  # warm-up, untimed
    for _ in range(repeats):
        for batch in batches:
            for (kind, mode), predictor in predictors.items():
                samples.setdefault((kind, mode, batch), []).append(
                    time_calls(predictor, calls[mode], batch, shape, rng))
        for (kind, mode), predictor in predictors.items():
            if mode == "session":
                samples.setdefault((kind, "start"), []).append(session_start_ms(predictor))
    return samples


def summarize(values: list[float]) -> dict:
    return {"median": median(values), "min": min(values), "max": max(values), "values": values}


def report(samples: dict) -> dict:
    """``{kind: {mode: {batch: {qps, ms_per_call[, runtime_ms_per_query]}}}}`` summaries."""
    out: dict = {}
    for key, runs in samples.items():
        if key[1] == "start":
            out.setdefault(key[0], {})["session_start_ms"] = summarize(runs)
            continue
        kind, mode, batch = key
        keys = runs[0].keys()
        out.setdefault(kind, {}).setdefault(mode, {})[str(batch)] = {
            key: summarize([r[key] for r in runs]) for key in keys}
    return out


def table_rows(summary: dict, batches: list[int]) -> list[list[str]]:
    rows = []
    for kind, modes in summary.items():
        start = modes["session_start_ms"]["median"]
        for batch in batches:
            oneshot = modes["one-shot"][str(batch)]["qps"]["median"]
            for mode in MODES:
                s = modes[mode][str(batch)]
                qps = s["qps"]
                runtime = s.get("runtime_ms_per_query")
                rows.append([kind, mode, batch,
                             f"{qps['median']:.1f} ({qps['min']:.1f}–{qps['max']:.1f})",
                             f"{s['ms_per_call']['median']:.2f}",
                             f"{runtime['median']:.3f}" if runtime else "–",
                             f"{qps['median'] / oneshot:.0f}×" if mode == "session" else "1×",
                             f"{start:.0f}" if mode == "session" else "–"])
    return rows


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", default=",".join(KINDS), help="local,ssh,adb (a subset)")
    parser.add_argument("--batches", default="1,32", help="images per call")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per combination")
    parser.add_argument("--session-calls", type=int, default=100, help="calls per session repeat")
    parser.add_argument("--oneshot-calls", type=int, default=3, help="calls per one-shot repeat")
    parser.add_argument("--model", default="tiny_cnn", help="zoo model, deployed as ort")
    args = parser.parse_args()
    args.devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    args.batches = [int(b) for b in args.batches.split(",") if b.strip()]
    counts = (args.repeats, args.session_calls, args.oneshot_calls, *args.batches)
    if not set(args.devices) <= set(KINDS) or not args.batches or min(counts) < 1:
        parser.error(f"--devices is a subset of {','.join(KINDS)}; counts must be ≥ 1")
    return args


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    calls = {"session": args.session_calls, "one-shot": args.oneshot_calls}
    try:
        with tempfile.TemporaryDirectory(prefix="aiot-bench-session-") as tmp:
            home = Path(tmp)
            isolate(home)
            with devices(args.devices) as names:
                predictors = open_predictors(names, args.model, home)
                try:
                    first = predictors[next(iter(names)), "session"]
                    shape = tuple(first.serving_info["input_shape"][1:])
                    samples = measure(predictors, args.batches, args.repeats, calls, shape)
                finally:
                    for predictor in predictors.values():
                        predictor.close()
    except KeyboardInterrupt:
        print("interrupted: emulators stopped, private adb server killed", file=sys.stderr)
        return 130
    summary = report(samples)
    print(f"{args.model} (ort), input {list(shape)}; {args.repeats} repeats of "
          f"{args.session_calls} session calls / {args.oneshot_calls} one-shot calls; "
          "median (min–max)")
    print_table(["device", "mode", "batch", "queries/s", "ms/call", "runtime ms/query", "speed-up",
                 "session start ms"],
                table_rows(summary, args.batches))
    path = write_json("agent_session", {
        "model": args.model, "format": "ort", "input_shape": list(shape), "repeats": args.repeats,
        "calls": calls, "batches": args.batches,
        "devices": {kind: {"name": names[kind], **summary[kind]} for kind in summary},
        "skipped": [k for k in args.devices if k not in names],
    })
    print(f"wrote {path}")
    return 0 if len(names) == len(args.devices) else 1


if __name__ == "__main__":
    sys.exit(main())
