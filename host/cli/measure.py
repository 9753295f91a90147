"""``aiot push``, ``aiot run`` and ``aiot sweep``: put artifacts on devices and measure them
(and ``aiot pull``: fetch what a device left).

Each command reads its options into one :class:`~aiot.host.engine.spec.SweepSpec`, hands it to
the engine (:mod:`aiot.host.engine.preflight` checks it, the campaign measures it) and shows what
came back. The options are here; the work is in
:mod:`aiot.host.cli.measure_run`, imported when a command runs, so that a page's ``--help`` does
not import the engine (issue 53).
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Annotated

import typer

from aiot.core.units import size_text
from aiot.device_agent.spec import RunSpec
from aiot.host.cli.options import Binarize, Dataset, Device, Devices, JsonOpt, Limit, Opt, Weights
from aiot.host.devices.pull import DEFAULT_MAX_BYTES, MAX_BYTES_ENV

WarmupRuns = Annotated[int, typer.Option(help="Warm-up iterations (at least).")]
WarmupMinS = Annotated[float, typer.Option(help="Warm-up seconds (at least).")]
MinRuns = Annotated[int, typer.Option(help="Timed iterations (at least).")]
MinS = Annotated[float, typer.Option(help="Timed seconds (at least).")]
MaxS = Annotated[float, typer.Option(help="No new iteration starts after this many seconds.")]
Native = Annotated[str | None, typer.Option("--native", help="Time with this native benchmark binary instead of the agent (benchmark_model, lce_benchmark_model, speed_benchmark_torch, benchmark_single_model, executor_runner, onnxruntime_perf_test, speed_benchmark).")]
Binary = Annotated[Path | None, typer.Option("--binary", help="The --native tool's file (default: the device's \\[binaries] entry in the inventory).")]
Delegate = Annotated[str | None, typer.Option("--delegate", help="Delegate(s) for --native runs, comma-separated in a sweep (e.g. nnapi, gpu, xnnpack).")]
TargetCv = Annotated[float | None, typer.Option(
    "--target-cv", help="Repeat timed iterations until the robust CV (1.4826·MAD/median) is at most this, e.g. 0.02 (up to --max-runs / --max-s); runs that never get there are INVALID.")]
MaxRuns = Annotated[int | None, typer.Option("--max-runs", help="Cap on timed iterations.")]
Memory = Annotated[bool, typer.Option(
    "--memory", help="Also measure peak memory, in its own pass in a fresh agent process (does not disturb timing).")]
Profile = Annotated[bool, typer.Option(
    "--profile", help="Also time each operator with the runtime's own profiler, in its own pass (does not disturb timing); shows the slowest.")]
CooldownMaxS = Annotated[float, typer.Option(
    "--cooldown-max-s", help="Before each run wait until the device's CPU temperature and frequency caps are back near their idle baseline, at most this long (0: do not wait; telemetry is recorded either way).")]
Validity = Annotated[str | None, typer.Option(
    "--validity", metavar="KEY=VALUE,…", help="Validity limits over AIOT_VALIDITY's, e.g. load=2 on a "
    "busy machine (keys cv, load, samples, threads, tail, speed; off turns one off). Stored with each "
    "verdict; a run judged under looser limits than the defaults shows as VALID (relaxed: …).")]
Timeout = Annotated[float | None, typer.Option("--timeout", help="Kill a run's agent after this many seconds and record the run as failed (default: max-s + warm-up + 300).")]
#: The defaults of ``run`` and ``sweep``: the timing knobs are the agent's own (one definition,
#: device_agent/spec.py; MeasureParams takes them from there too).
TIMING = {spec_field.name: spec_field.default for spec_field in fields(RunSpec)}
#: The rest are SweepSpec's (aiot.host.engine.spec, whose defaults are aiot sweep's), written here
#: so that --help does not import the engine (issue 53); tests/cli/test_cli_lazy.py holds them to
#: SweepSpec's.
SWEEP = {"threads": (1, 2, 4, 8), "vias": ("shell",), "seed": 0, "shuffle": True, "fresh": False,
         "retries": 3, "cooldown_max_s": 120.0}
#: ``--input-shape``'s grammar (aiot.host.engine.input_shapes.SYNTAX, held to it by the same test).
SHAPE_SYNTAX = "[MODEL:][NAME=]DxD"
ModelHelp = ("A zoo name (resnet18), <zoo>_<algorithm> for a binarized one (resnet18_bnn), an "
             "artifact file (.tflite, .onnx, .ort, .pte, .ptl, .dab, predict_net.pb), a .pt2 "
             "program, or your code as file.py:factory or module:factory")
FormatHelp = ("Artifact format (default: an artifact file's own; LCE for a binarized zoo model "
              "LCE deploys; else tflite)")
InputShape = Annotated[list[str], typer.Option(
    "--input-shape", metavar=SHAPE_SYNTAX, help="An input's shape (repeatable): 1x3x640x640 for a "
    "single-input model, x=1x3x48x320 by input name, rec.onnx:x=1x3x48x320 for one model of a "
    "sweep. A free batch dim alone runs at 1 without it.")]
InputValue = Annotated[list[str], typer.Option(
    "--input-value", metavar="NAME=NUMBER", help="Fill input NAME with this number (repeatable) "
    "instead of made-up values: a control input such as sample_rate=16000 or a mode flag.")]
InputsFile = Annotated[list[str], typer.Option(
    "--inputs", metavar="[MODEL:]FILE.npz", help="A .npz with one array per input name: real "
    "input values (hashes recorded); MODEL:FILE.npz for one model of a sweep (repeatable).")]
Via = Annotated[str, typer.Option(
    "--via", help="How the agent starts on an Android device: shell (adb shell, the shell user's "
                  "background group) or app (the aiot app's Instrumentation, a foreground app: "
                  "aiot app install DEVICE first); comma-separated in a sweep to measure both.")]


def run(
    ctx: typer.Context,
    model: Annotated[str, typer.Option("--model", "-m", help=ModelHelp)],
    fmt: Annotated[str | None, typer.Option("--format", "-f", help=FormatHelp)] = None,
    device: Device = None,
    threads: Annotated[int, typer.Option(help="Inference threads.")] = 1,
    weights: Weights = None, dataset: Dataset = None, limit: Limit = None,
    warmup_runs: WarmupRuns = TIMING["warmup_runs"], warmup_min_s: WarmupMinS = TIMING["warmup_min_s"],
    min_runs: MinRuns = TIMING["min_runs"], min_s: MinS = TIMING["min_s"], max_s: MaxS = TIMING["max_s"],
    timeout: Timeout = None, as_json: JsonOpt = False,
    native: Native = None, binary: Binary = None, delegate: Delegate = None,
    binarize: Binarize = None,
    cluster: Annotated[str | None, typer.Option(
        help="Pin the run to one CPU cluster of the device (prime, big, little; see devices info).")] = None,
    cooldown_max_s: CooldownMaxS = SWEEP["cooldown_max_s"],
    target_cv: TargetCv = None, max_runs: MaxRuns = None, memory: Memory = False,
    profile: Profile = False,
    input_shape: InputShape = [],  # noqa: B006 - Typer needs a literal default
    inputs: InputsFile = [],  # noqa: B006 - Typer needs a literal default
    input_value: InputValue = [],  # noqa: B006 - Typer needs a literal default
    opt: Opt = None,
    via: Via = SWEEP["vias"][0],
    validity: Validity = None,
) -> None:
    """Measure one model in one format on one device at one thread count."""
    from aiot.host.cli.measure_run import measure_one

    measure_one(ctx, {"model": model, "fmt": fmt, "device": device, "threads": threads,
                      "weights": weights, "dataset": dataset, "limit": limit,
                      "warmup_runs": warmup_runs, "warmup_min_s": warmup_min_s,
                      "min_runs": min_runs, "min_s": min_s, "max_s": max_s, "timeout": timeout,
                      "as_json": as_json, "native": native, "binary": binary, "delegate": delegate,
                      "binarize": binarize, "cluster": cluster, "cooldown_max_s": cooldown_max_s,
                      "target_cv": target_cv, "max_runs": max_runs, "memory": memory,
                      "profile": profile, "input_shape": input_shape, "inputs": inputs,
                      "input_value": input_value, "opt": opt, "via": via, "validity": validity})


def sweep(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option("--model", "-m", help=ModelHelp + "; comma-separated (default: what was last pushed to each device).")] = None,
    fmt: Annotated[str | None, typer.Option("--format", "-f", help="Formats, comma-separated, or all: every format the model can be timed in here, as convert --format all (default: each model's own; see run --help).")] = None,
    device: Devices = None,
    threads: Annotated[str, typer.Option(help="Thread counts, comma-separated.")] = ",".join(map(str, SWEEP["threads"])),
    weights: Weights = None, dataset: Dataset = None, limit: Limit = None,
    warmup_runs: WarmupRuns = TIMING["warmup_runs"], warmup_min_s: WarmupMinS = TIMING["warmup_min_s"],
    min_runs: MinRuns = TIMING["min_runs"], min_s: MinS = TIMING["min_s"], max_s: MaxS = TIMING["max_s"],
    timeout: Timeout = None, as_json: JsonOpt = False,
    native: Native = None, binary: Binary = None, delegate: Delegate = None,
    binarize: Binarize = None,
    cluster: Annotated[str | None, typer.Option(
        help="CPU clusters to pin to, comma-separated (prime, big, little) (default: no pinning).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the run order shuffle (recorded).")] = SWEEP["seed"],
    shuffle: Annotated[bool, typer.Option(
        "--shuffle/--no-shuffle", help="Run in a seeded random order rather than grouped.")] = SWEEP["shuffle"],
    fresh: Annotated[bool, typer.Option(
        "--fresh", help="Measure every run again instead of resuming this sweep's missing or failed runs.")] = SWEEP["fresh"],
    retries: Annotated[int, typer.Option(
        help="Attempts per run when the device or link fails, with backoff, before the device counts as lost.")] = SWEEP["retries"],
    cooldown_max_s: CooldownMaxS = SWEEP["cooldown_max_s"],
    target_cv: TargetCv = None, max_runs: MaxRuns = None, memory: Memory = False,
    profile: Profile = False,
    input_shape: InputShape = [],  # noqa: B006 - Typer needs a literal default
    inputs: InputsFile = [],  # noqa: B006 - Typer needs a literal default
    input_value: InputValue = [],  # noqa: B006 - Typer needs a literal default
    lab: Annotated[str | None, typer.Option(
        "--lab", envvar="AIOT_LAB",
        help="A lab's HOST:PORT (aiot lab start/join): each device is measured on the lab node that "
             "owns it; records land in this host's store.")] = None,
    opt: Opt = None,
    via: Via = ",".join(SWEEP["vias"]),
    validity: Validity = None,
) -> None:
    """Measure every combination of devices × models × formats × delegates × clusters × threads
    (× --via shell,app on Android devices).

    Devices run in parallel (each one's runs serially), in a seeded shuffled order; running
    the same command again resumes the sweep (only missing or failed runs are redone).
    Without --model, each device measures what was last pushed to it (aiot push).
    """
    from aiot.host.cli.measure_run import measure_sweep

    measure_sweep(ctx, {"model": model, "fmt": fmt, "device": device, "threads": threads,
                        "weights": weights, "dataset": dataset, "limit": limit,
                        "warmup_runs": warmup_runs, "warmup_min_s": warmup_min_s,
                        "min_runs": min_runs, "min_s": min_s, "max_s": max_s, "timeout": timeout,
                        "as_json": as_json, "native": native, "binary": binary,
                        "delegate": delegate, "binarize": binarize, "cluster": cluster,
                        "seed": seed, "shuffle": shuffle, "fresh": fresh, "retries": retries,
                        "cooldown_max_s": cooldown_max_s, "target_cv": target_cv,
                        "max_runs": max_runs, "memory": memory, "profile": profile,
                        "input_shape": input_shape, "inputs": inputs, "input_value": input_value,
                        "lab": lab, "opt": opt, "via": via, "validity": validity})


def push(
    ctx: typer.Context,
    model: Annotated[str, typer.Option("--model", "-m", help=ModelHelp)],
    fmt: Annotated[str | None, typer.Option("--format", "-f", help=FormatHelp)] = None,
    device: Device = None,
    weights: Weights = None,
    binarize: Binarize = None,
    input_shape: InputShape = [],  # noqa: B006 - Typer needs a literal default
    as_json: JsonOpt = False,
) -> None:
    """Convert (if needed) and push an artifact and the device agent to a device.

    The store remembers it: ``aiot sweep`` without ``--model`` then measures it there.
    """
    from aiot.host.cli.measure_run import push_model

    push_model(ctx, model, fmt, device, weights, binarize, input_shape, as_json)


def pull(
    ctx: typer.Context,
    device: Device = None,
    out_dir: Annotated[Path | None, typer.Option("--out", "-o", help="Folder to copy into "
                                                 "(default: RESULTS/pulled/DEVICE).")] = None,
    max_bytes: Annotated[str | None, typer.Option(
        "--max-bytes", envvar=MAX_BYTES_ENV, show_default=False,
        help=f"The most this pull brings back, all files together: bytes, or e.g. 500M, 2G "
             f"(default: {size_text(DEFAULT_MAX_BYTES)}). A file over what is left is refused.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Copy the files a device left in WORKDIR/outputs (profiles, logs) into the results folder.

    File names come from the device: one that could land outside the folder, or is longer
    than 200 bytes, is refused, as is a file over the size limit; the others are pulled.
    """
    from aiot.host.cli.measure_run import pull_files

    pull_files(ctx, device, out_dir, max_bytes, as_json)


def register(app: typer.Typer) -> None:
    app.command("push")(push)
    app.command("pull")(pull)
    app.command("run")(run)
    app.command("sweep")(sweep)
