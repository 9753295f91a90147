"""``aiot push``, ``aiot run`` and ``aiot sweep``: put artifacts on devices and measure them
(and ``aiot pull``: fetch what a device left).

Each command reads its options into one :class:`~aiot.host.engine.spec.SweepSpec`, hands it to
the engine (:mod:`aiot.host.engine.preflight` checks it, the campaign measures it) and shows what
came back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from aiot.converters import api
from aiot.converters.sidecar import sidecar_path
from aiot.core.errors import UsageError
from aiot.core.units import size_text
from aiot.host.app.via import check_via
from aiot.host.cli._output import message, out, print_json, safe, spinner, state
from aiot.host.cli.options import (
    Binarize,
    Dataset,
    Device,
    Devices,
    JsonOpt,
    Limit,
    Opt,
    Weights,
    check_seconds,
    parse_options,
    parse_threads,
    split_list,
)
from aiot.host.cli.profile_view import print_profiles
from aiot.host.cli.progress import RichRunListener
from aiot.host.cli.run_table import print_run_table
from aiot.host.cli.sweep_view import parity_notes, sort_key
from aiot.host.devices.agent_client import AgentSession
from aiot.host.devices.deploy import push_file
from aiot.host.devices.pull import DEFAULT_MAX_BYTES, MAX_BYTES_ENV, outputs_dir, parse_max_bytes, pull_outputs
from aiot.host.devices.resolve import open_transport, resolve_name
from aiot.host.engine.campaign import SweepPlan, plan_sweep, record_key, run_campaign, run_key
from aiot.host.engine.estimate import LONG_S, estimate
from aiot.host.engine.input_shapes import SYNTAX, flat_shapes, parse_inputs_args, parse_shape_args
from aiot.host.engine.input_values import made_up_note, parse_value_args
from aiot.host.engine.preflight import (
    check_data_options,
    check_push,
    check_sweep,
    push_runner,
    resolve_targets,
    validate_devices,
)
from aiot.host.engine.runs import MeasureParams
from aiot.host.engine.spec import SweepSpec
from aiot.host.engine.workspace import artifacts_dir
from aiot.host.lab.session import LabSession
from aiot.host.store import Push, RunRecord, open_store
from aiot.models.model_ref import split_models

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
    "busy machine (keys cv, load, samples, threads, tail; off turns one off). Stored with each "
    "verdict; a run judged under looser limits than the defaults shows as VALID (relaxed: …).")]
Timeout = Annotated[float | None, typer.Option("--timeout", help="Kill a run's agent after this many seconds and record the run as failed (default: max-s + warm-up + 300).")]
#: The defaults of ``run`` and ``sweep``: the timing knobs are the agent's own (one definition,
#: device_agent/spec.py, through MeasureParams), the rest are SweepSpec's (aiot sweep's).
TIMING = MeasureParams()
SWEEP = SweepSpec(devices=())
ModelHelp = ("A zoo name (resnet18), <zoo>_<algorithm> for a binarized one (resnet18_bnn), an "
             "artifact file (.tflite, .onnx, .ort, .pte, .ptl, .dab, predict_net.pb), a .pt2 "
             "program, or your code as file.py:factory or module:factory")
FormatHelp = ("Artifact format (default: an artifact file's own; LCE for a binarized zoo model "
              "LCE deploys; else tflite)")
InputShape = Annotated[list[str], typer.Option(
    "--input-shape", metavar=SYNTAX, help="An input's shape (repeatable): 1x3x640x640 for a "
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


def parse_vias(value: str | None) -> list[str]:
    """``"app,shell"`` → ``["app", "shell"]`` (checked, repeats dropped); ``["shell"]`` when empty."""
    if not value:
        return ["shell"]
    return list(dict.fromkeys(check_via(v) for v in split_list(value, "vias")))


#: The cluster names the probe gives (see aiot.host.transports.probe): ``all`` is every core.
CLUSTERS = ("prime", "big", "little", "all")


def parse_clusters(value: str | None) -> list[str] | None:
    """``"BIG,little,big"`` → ``["big", "little"]``: known names, lower-cased, repeats
    dropped; None when none given."""
    if not value:
        return None
    clusters = list(dict.fromkeys(c.lower() for c in split_list(value, "clusters")))
    unknown = [c for c in clusters if c not in CLUSTERS]
    if unknown:
        raise UsageError(f"unknown --cluster '{unknown[0]}'",
                         f"use {', '.join(CLUSTERS)} (a device's clusters: aiot devices info NAME)")
    return clusters


def parse_delegates(value: str | None) -> list[str] | None:
    """``"NNAPI,gpu,nnapi"`` → ``["nnapi", "gpu"]`` (the native tools' names are lower-case);
    None when none given."""
    if not value:
        return None
    return list(dict.fromkeys(d.lower() for d in split_list(value, "delegates")))

def _targets(model: str | None, fmt: str | None, binarize: str | None, native: str | None) -> tuple:
    """``--model`` and ``--format`` resolved (:func:`aiot.host.engine.preflight.resolve_targets`)."""
    return _frozen(resolve_targets(split_models(model), split_list(fmt, "formats") if fmt else None,
                                   binarize, native))


def _frozen(targets) -> tuple:
    """``(ModelRef, formats)`` pairs as a SweepSpec holds them."""
    return tuple((ref, tuple(formats)) for ref, formats in targets)


def _tuple(values: list | None) -> tuple | None:
    return tuple(values) if values else None


def _pairs(options: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """``--opt`` as a SweepSpec holds it: sorted ``(key, value)`` pairs."""
    return tuple(sorted(options.items()))


def _chosen(targets) -> None:
    """Say which format each model runs in when the user did not name one."""
    message("; ".join(f"{ref.label()} as {', '.join(formats)}" for ref, formats in targets))


def _sweep(ctx, spec, as_json: bool) -> None:
    """Check everything that can be, then run the campaign of ``spec`` (with ``--lab``, on the
    lab nodes that own its devices) and show its records."""
    results_dir = state(ctx).results_dir()
    requests, session, probes = check_sweep(spec, results_dir, lab=LabSession)
    try:
        with open_store(results_dir) as store:
            plan = plan_sweep(requests, store, seed=spec.seed, shuffle=spec.shuffle, fresh=spec.fresh)
            recent = store.query(status="ok", limit=500)  # how long runs took here
        guess = estimate(plan.todo, artifacts_dir(results_dir), recent)
        if guess.seconds >= LONG_S:  # long work says how long before it starts
            message(guess.line())
        message(f"resuming sweep {plan.sweep_id}: {len(plan.done)} of {len(plan.requests)} runs "
                "already done (--fresh measures everything again)" if plan.done else
                f"sweep {plan.sweep_id}: {len(plan.requests)} run(s)")
        if not plan.todo:  # what it measured, as stored
            _print_records(stored_records(results_dir, plan), as_json)
            message(f"sweep {plan.sweep_id} is complete; see: aiot results list --sweep {plan.sweep_id}")
            return
        if spec.both_vias:
            message("--via app,shell: the shell's runs also start one agent process per run, as "
                    "the app's do")
        with RichRunListener() as listener:
            records = run_campaign(plan, results_dir, listener, spec.campaign_policy(session, probes))
    finally:
        if session is not None:
            session.close()
    _print_records(records if as_json else stored_records(results_dir, plan), as_json)
    message(f"sweep {plan.sweep_id} done; see: aiot results list --sweep {plan.sweep_id}")
    if any(r.status == "failed" for r in records):
        raise typer.Exit(1)


def sweep_records(store, sweep_id: str, keys: set[str] | None = None) -> list[RunRecord]:
    """The newest record of each run of a sweep (an ok one wins over a later failure),
    sorted as tables show them; ``keys`` limits it to those runs."""
    newest: dict[str, RunRecord] = {}
    for r in store.query(sweep_id=sweep_id):  # oldest first
        key = record_key(r)
        if keys is not None and key not in keys:
            continue
        if key not in newest or r.status == "ok" or newest[key].status != "ok":
            newest[key] = r
    return sorted(newest.values(), key=sort_key)


def stored_records(results_dir, plan: SweepPlan) -> list[RunRecord]:
    """Every run of ``plan`` as the store holds it now (resumed runs included), sorted."""
    with open_store(results_dir) as store:
        return sweep_records(store, plan.sweep_id, {run_key(r) for r in plan.requests})


def _print_records(records, as_json: bool) -> None:
    if as_json:
        print_json([r.to_dict() for r in records])
    else:
        print_run_table(records, sweep=True)
        print_profiles(records)
    notes = parity_notes(records) + list(dict.fromkeys(
        note for r in records if (note := made_up_note(r.model, r.result)) is not None))
    for note in notes:
        message(f"[yellow]warning:[/] {safe(note)}")


def run(
    ctx: typer.Context,
    model: Annotated[str, typer.Option("--model", "-m", help=ModelHelp)],
    fmt: Annotated[str | None, typer.Option("--format", "-f", help=FormatHelp)] = None,
    device: Device = None,
    threads: Annotated[int, typer.Option(help="Inference threads.")] = 1,
    weights: Weights = None, dataset: Dataset = None, limit: Limit = None,
    warmup_runs: WarmupRuns = TIMING.warmup_runs, warmup_min_s: WarmupMinS = TIMING.warmup_min_s,
    min_runs: MinRuns = TIMING.min_runs, min_s: MinS = TIMING.min_s, max_s: MaxS = TIMING.max_s,
    timeout: Timeout = None, as_json: JsonOpt = False,
    native: Native = None, binary: Binary = None, delegate: Delegate = None,
    binarize: Binarize = None,
    cluster: Annotated[str | None, typer.Option(
        help="Pin the run to one CPU cluster of the device (prime, big, little; see devices info).")] = None,
    cooldown_max_s: CooldownMaxS = SWEEP.cooldown_max_s,
    target_cv: TargetCv = None, max_runs: MaxRuns = None, memory: Memory = False,
    profile: Profile = False,
    input_shape: InputShape = [],  # noqa: B006 - Typer needs a literal default
    inputs: InputsFile = [],  # noqa: B006 - Typer needs a literal default
    input_value: InputValue = [],  # noqa: B006 - Typer needs a literal default
    opt: Opt = None,
    via: Via = SWEEP.vias[0],
    validity: Validity = None,
) -> None:
    """Measure one model in one format on one device at one thread count."""
    _check_timing(warmup_min_s, min_s, max_s, timeout, cooldown_max_s)
    params = MeasureParams(warmup_runs, warmup_min_s, min_runs, min_s, max_s, timeout_s=timeout,
                           target_cv=target_cv, max_runs=max_runs, memory=memory, profile=profile)
    targets = _targets(model, fmt, binarize, native)
    if fmt is None and not as_json:
        _chosen(targets)
    spec = SweepSpec(
        devices=(resolve_name(device),), targets=targets, threads=tuple(parse_threads(str(threads))),
        params=params, weights=weights, dataset=dataset, limit=limit, native=native, binary=binary,
        delegates=(delegate.strip().lower(),) if delegate else None, binarize=binarize,
        clusters=_tuple(parse_clusters(cluster)), cooldown_max_s=cooldown_max_s,
        input_shapes=parse_shape_args(input_shape), **_inputs(inputs),
        input_values=parse_value_args(input_value),
        options=_pairs(parse_options(opt)), vias=tuple(parse_vias(via)), validity=validity,
        shuffle=False, fresh=True)  # one run: nothing to order, measured anew every time
    _sweep(ctx, spec, as_json)


def sweep(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option("--model", "-m", help=ModelHelp + "; comma-separated (default: what was last pushed to each device).")] = None,
    fmt: Annotated[str | None, typer.Option("--format", "-f", help="Formats, comma-separated, or all: every format the model can be timed in here, as convert --format all (default: each model's own; see run --help).")] = None,
    device: Devices = None,
    threads: Annotated[str, typer.Option(help="Thread counts, comma-separated.")] = ",".join(map(str, SWEEP.threads)),
    weights: Weights = None, dataset: Dataset = None, limit: Limit = None,
    warmup_runs: WarmupRuns = TIMING.warmup_runs, warmup_min_s: WarmupMinS = TIMING.warmup_min_s,
    min_runs: MinRuns = TIMING.min_runs, min_s: MinS = TIMING.min_s, max_s: MaxS = TIMING.max_s,
    timeout: Timeout = None, as_json: JsonOpt = False,
    native: Native = None, binary: Binary = None, delegate: Delegate = None,
    binarize: Binarize = None,
    cluster: Annotated[str | None, typer.Option(
        help="CPU clusters to pin to, comma-separated (prime, big, little) (default: no pinning).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the run order shuffle (recorded).")] = SWEEP.seed,
    shuffle: Annotated[bool, typer.Option(
        "--shuffle/--no-shuffle", help="Run in a seeded random order rather than grouped.")] = SWEEP.shuffle,
    fresh: Annotated[bool, typer.Option(
        "--fresh", help="Measure every run again instead of resuming this sweep's missing or failed runs.")] = SWEEP.fresh,
    retries: Annotated[int, typer.Option(
        help="Attempts per run when the device or link fails, with backoff, before the device counts as lost.")] = SWEEP.retries,
    cooldown_max_s: CooldownMaxS = SWEEP.cooldown_max_s,
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
    via: Via = ",".join(SWEEP.vias),
    validity: Validity = None,
) -> None:
    """Measure every combination of devices × models × formats × delegates × clusters × threads
    (× --via shell,app on Android devices).

    Devices run in parallel (each one's runs serially), in a seeded shuffled order; running
    the same command again resumes the sweep (only missing or failed runs are redone).
    Without --model, each device measures what was last pushed to it (aiot push).
    """
    _check_timing(warmup_min_s, min_s, max_s, timeout, cooldown_max_s)
    devices = list(dict.fromkeys(split_list(device, "devices"))) if device else [resolve_name(None)]
    params = MeasureParams(warmup_runs, warmup_min_s, min_runs, min_s, max_s, timeout_s=timeout,
                           target_cv=target_cv, max_runs=max_runs, memory=memory, profile=profile)
    delegates, clusters, options = parse_delegates(delegate), parse_clusters(cluster), parse_options(opt)
    shapes = parse_shape_args(input_shape)
    dataset = check_data_options(weights, dataset, limit)
    targets = None
    if model is None:  # what was last pushed, as pushed
        counts = parse_threads(threads)
        if fmt or options or weights or binarize:
            raise UsageError("--format, --opt, --weights and --binarize go with --model",
                             "without --model a sweep measures what was last pushed, as pushed")
    else:
        targets = _targets(model, fmt, binarize, native)
        if fmt is None and not as_json:
            _chosen(targets)
        counts = parse_threads(threads)
    spec = SweepSpec(
        devices=tuple(devices), targets=targets, threads=tuple(counts), params=params,
        weights=weights, dataset=dataset, limit=limit, native=native, binary=binary,
        delegates=_tuple(delegates), binarize=binarize, clusters=_tuple(clusters),
        options=_pairs(options), input_shapes=shapes, **_inputs(inputs),
        input_values=parse_value_args(input_value),
        vias=tuple(parse_vias(via)), seed=seed, shuffle=shuffle, fresh=fresh, retries=retries,
        cooldown_max_s=cooldown_max_s, lab=lab, validity=validity)
    _sweep(ctx, spec, as_json)


def _check_timing(warmup_min_s: float, min_s: float, max_s: float, timeout: float | None,
                  cooldown_max_s: float | None) -> None:
    """Every seconds option of run and sweep finite and ≥ 0, before any work (one line)."""
    check_seconds({"--warmup-min-s": warmup_min_s, "--min-s": min_s, "--max-s": max_s,
                   "--timeout": timeout, "--cooldown-max-s": cooldown_max_s})


def _inputs(values: list[str]) -> dict:
    """``--inputs`` as SweepSpec's two fields (a file for every model, files per model)."""
    bare, scoped = parse_inputs_args(values)
    return {"inputs_file": bare, "scoped_inputs": scoped}


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
    name = resolve_name(device)
    check_data_options(weights, None, None)
    validate_devices([name])
    targets = _frozen(resolve_targets([model], [fmt] if fmt else None, binarize))
    spec = SweepSpec(devices=(name,), targets=targets, weights=weights,
                     input_shapes=parse_shape_args(input_shape))
    ((ref, (chosen,)),) = spec.targets
    picked = check_push(spec)
    transport = open_transport(name)
    with spinner(f"asking {name} what it runs…"):
        native = push_runner(transport, chosen)  # refused here, before minutes of converting
    with spinner(f"converting {ref.label()} to {chosen}…"):
        artifact, sha256 = _artifact_for_push(ctx, spec, picked.path if picked else None)
    with spinner(f"pushing to {name}…"), AgentSession(transport) as agent:
        pushed = push_file(transport, artifact, sha256)
        sidecar = _push_sidecar(transport, artifact)
    with open_store(state(ctx).results_dir()) as store:
        store.record_push(Push(name, ref.name, chosen, _reference(ref), ref.binarize,
                               str(weights) if weights else None, pushed.sha256, pushed.remote))
    sweep = f"aiot sweep --device {name}" + (f" --native {native}" if native else "")
    report = {"device": name, "model": ref.label(), "format": chosen, "artifact": pushed.remote,
              "native": native, "measure": f"{sweep} --threads 1,2,4,8",
              "sidecar": sidecar, "sha256": pushed.sha256, "size_bytes": pushed.size,
              "sent": pushed.sent, "agent": agent.root}
    if as_json:
        print_json(report)
        return
    verb = "pushed" if pushed.sent else "already on device, not sent again:"
    out.print(f"[green]✓[/] {escape(ref.label())} as {chosen}: {verb} {escape(pushed.remote)} "
              f"({size_text(pushed.size)})\n  agent in {escape(agent.root)}\n"
              f"  measure it: {escape(report['measure'])}")


def _artifact_for_push(ctx, spec, weights: Path | None):
    """``(file, sha256)`` to push: a user's artifact as it is, else the converted one."""
    ((ref, (fmt,)),) = spec.targets
    if ref.is_artifact:
        return ref.path, ref.sha256
    conv = api.convert_model(_reference(ref), fmt, state(ctx).results_dir() / "artifacts",
                             weights=weights, binarize=ref.binarize,
                             input_shapes=flat_shapes(spec.input_shapes))
    return conv.artifact, conv.sha256


def _push_sidecar(transport, artifact: Path) -> str | None:
    """Push a converted artifact's sidecar beside it (a user's artifact has none)."""
    found = sidecar_path(artifact)
    return push_file(transport, found).remote if found.exists() else None


def _reference(ref) -> str:
    """What resolves to ``ref`` again on this host (the user's file by its absolute path)."""
    if ref.path is None:
        return ref.name if ref.kind != "zoo" else (
            f"{ref.name}_{ref.binarize}" if ref.binarize else ref.name)
    path = ref.path.resolve()
    return f"{path}:{ref.factory}" if ref.factory else str(path)


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
    limit = parse_max_bytes(max_bytes)
    name = resolve_name(device)
    transport = open_transport(name)
    dest = out_dir or state(ctx).results_dir() / "pulled" / name
    with spinner(f"pulling from {name}…"):
        pulled = pull_outputs(transport, dest, limit)
    if as_json:
        print_json([{"name": p.name, "local": str(p.local) if p.local else None, "size_bytes": p.size,
                     "refused": p.refused} for p in pulled])
    elif not pulled:
        message(safe(f"nothing to pull: {name}:{outputs_dir(transport)} has no files"))
    for p in pulled if not as_json else []:
        # Names come from the device: a bidirectional override or escape shows as \u202e, \x1b.
        line = f"[red]✗[/] {safe(p.refused)}" if p.refused else f"[green]✓[/] {safe(p.local)} ({p.size:,} B)"
        out.print(line)
    if any(p.refused for p in pulled):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("push")(push)
    app.command("pull")(pull)
    app.command("run")(run)
    app.command("sweep")(sweep)
