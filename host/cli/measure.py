"""``aiot push``, ``aiot run`` and ``aiot sweep``: put artifacts on devices and measure them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from aiot.host.errors import UsageError

Device = Annotated[str | None, typer.Option("--device", "-d", help="Device name (default: $AIOT_DEVICE or local).")]
Weights = Annotated[Path | None, typer.Option(help="State-dict file to load (default: the model's packaged weights, else a seeded random init).")]
Binarize = Annotated[str | None, typer.Option(help="Binarize the model with a BiBench algorithm (bnn, reactnet, …) before converting; --weights are then the binarized model's.")]
Dataset = Annotated[str | None, typer.Option(help="Also measure top-1 accuracy on this dataset's test split (fashion-mnist, digits, folder:PATH).")]
Limit = Annotated[int | None, typer.Option(help="Use at most this many test images for accuracy.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
WarmupRuns = Annotated[int, typer.Option(help="Warm-up iterations (at least).")]
WarmupMinS = Annotated[float, typer.Option(help="Warm-up seconds (at least).")]
MinRuns = Annotated[int, typer.Option(help="Timed iterations (at least).")]
MinS = Annotated[float, typer.Option(help="Timed seconds (at least).")]
MaxS = Annotated[float, typer.Option(help="No new iteration starts after this many seconds.")]
Native = Annotated[str | None, typer.Option("--native", help="Time with this native benchmark binary instead of the agent (benchmark_model, lce_benchmark_model, speed_benchmark_torch, benchmark_single_model, executor_runner, onnxruntime_perf_test, speed_benchmark).")]
Binary = Annotated[Path | None, typer.Option("--binary", help="The --native tool's file (default: the device's [binaries) entry in the inventory].")]
Delegate = Annotated[str | None, typer.Option("--delegate", help="Delegate(s) for --native runs, comma-separated in a sweep (e.g. nnapi, gpu, xnnpack).")]
TargetCv = Annotated[float | None, typer.Option(
    "--target-cv", help="Repeat timed iterations until the robust CV (1.4826·MAD/median) is at most this, e.g. 0.02 (up to --max-runs / --max-s); runs that never get there are INVALID.")]
MaxRuns = Annotated[int | None, typer.Option("--max-runs", help="Cap on timed iterations.")]
Memory = Annotated[bool, typer.Option(
    "--memory", help="Also measure peak memory, in its own pass in a fresh agent process (does not disturb timing).")]
CooldownMaxS = Annotated[float, typer.Option(
    "--cooldown-max-s", help="Before each run wait until the device's CPU temperature and frequency caps are back near their idle baseline, at most this long (0: do not wait; telemetry is recorded either way).")]
Timeout = Annotated[float | None, typer.Option("--timeout", help="Kill a run's agent after this many seconds and record the run as failed (default: max-s + warm-up + 300).")]


def split_list(value: str, what: str) -> list[str]:
    """``"a,b"`` → ``["a", "b"]`` with blanks dropped; empty → UsageError."""
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise UsageError(f"no {what} given")
    return items


def parse_threads(value: str) -> list[int]:
    """``"1,2,4,8"`` → ``[1, 2, 4, 8]``."""
    try:
        threads = [int(v) for v in split_list(value, "thread counts")]
    except ValueError:
        raise UsageError(f"thread counts must be integers, got '{value}'", "e.g. --threads 1,2,4") from None
    if any(t < 1 for t in threads):
        raise UsageError("thread counts must be ≥ 1")
    return threads


def _validate_native(native: str | None, formats: list[str], delegate: str | None) -> None:
    """The native tool exists, runs every requested format and knows the delegate."""
    if native is None:
        if delegate:
            raise UsageError(f"--delegate {delegate} needs --native (NNAPI and GPU delegates "
                             "are not in the Python runtimes)", "e.g. --native benchmark_model")
        return
    from aiot.host.native import get_adapter

    adapter = get_adapter(native)
    wrong = [f for f in formats if f not in adapter.formats]
    if wrong:
        raise UsageError(f"{adapter.tool} does not run {', '.join(wrong)} artifacts",
                         f"it runs: {', '.join(adapter.formats)}")
    if delegate and delegate not in adapter.delegates:
        raise UsageError(f"{adapter.tool} has no delegate '{delegate}'",
                         f"its delegates: {', '.join(adapter.delegates) or 'none'}")


def _validate_names(devices: list[str], models: list[str], formats: list[str]) -> None:
    """Fail fast on unknown names before any work starts."""
    from aiot.converters import get_converter
    from aiot.host.devices import open_transport
    from aiot.models import get_model_spec

    for d in devices:
        open_transport(d)
    for m in models:
        get_model_spec(m)
    for f in formats:
        get_converter(f)


def _print_records(records, as_json: bool) -> None:
    from aiot.host.cli._output import print_json
    from aiot.host.cli.results import print_run_table

    if as_json:
        print_json([r.to_dict() for r in records])
    else:
        print_run_table(records)


def _validate_binarize(binarize: str | None, formats: list[str]) -> None:
    """Unknown algorithm, or one Table 4 says cannot deploy to a format: fail before any run."""
    if not binarize:
        return
    from aiot.converters.api import check_deployable
    from aiot.converters.base import get_converter

    for fmt in formats:
        check_deployable(get_converter(fmt), binarize)


def _cooldown(max_s: float | None):
    """The cool-down gate for ``--cooldown-max-s`` (0: no gating, telemetry still recorded)."""
    if not max_s:
        return None
    from aiot.host.cooldown import CooldownPolicy

    return CooldownPolicy(max_wait_s=max_s)


def _sweep(ctx, devices, models, formats, threads, weights, dataset, limit, params, as_json,
           native=None, binary=None, delegates=None, binarize=None, clusters=None,
           seed: int = 0, shuffle: bool = False, fresh: bool = True, retries: int = 3,
           cooldown_max_s: float | None = 120.0):
    from aiot.host.campaign import CampaignPolicy, plan_sweep, run_campaign
    from aiot.host.cli._output import message, state
    from aiot.host.cli.progress import RichRunListener
    from aiot.host.runs import expand_sweep
    from aiot.host.store import open_store

    params.validate()
    _validate_names(devices, models, formats)
    for delegate in delegates or [None]:
        _validate_native(native, formats, delegate)
    _validate_binarize(binarize, formats)
    if retries < 1:
        raise UsageError("--retries must be at least 1")
    requests = expand_sweep(devices, models, formats, threads, delegates=delegates, clusters=clusters,
                            weights=weights, dataset=dataset, dataset_limit=limit, params=params,
                            native=native, binary=binary, binarize=binarize)
    results_dir = state(ctx).results_dir()
    with open_store(results_dir) as store:
        plan = plan_sweep(requests, store, seed=seed, shuffle=shuffle, fresh=fresh)
    if plan.done:
        message(f"resuming sweep {plan.sweep_id}: {len(plan.done)} of {len(plan.requests)} runs already "
                "done (--fresh measures everything again)")
    if not plan.todo:
        message(f"sweep {plan.sweep_id} is complete; see: aiot results list --sweep {plan.sweep_id}")
        return
    with RichRunListener() as listener:
        records = run_campaign(plan, results_dir, listener,
                               CampaignPolicy(retries=retries, cooldown=_cooldown(cooldown_max_s)))
    _print_records(records, as_json)
    if any(r.status == "failed" for r in records):
        raise typer.Exit(1)


def run(
    ctx: typer.Context,
    model: Annotated[str, typer.Option("--model", "-m", help="Zoo model name.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="Artifact format.")],
    device: Device = None,
    threads: Annotated[int, typer.Option(help="Inference threads.")] = 1,
    weights: Weights = None, dataset: Dataset = None, limit: Limit = None,
    warmup_runs: WarmupRuns = 1, warmup_min_s: WarmupMinS = 0.5, min_runs: MinRuns = 50,
    min_s: MinS = 1.0, max_s: MaxS = 150.0, timeout: Timeout = None, as_json: JsonOpt = False,
    native: Native = None, binary: Binary = None, delegate: Delegate = None,
    binarize: Binarize = None,
    cluster: Annotated[str | None, typer.Option(
        help="Pin the run to one CPU cluster of the device (prime, big, little; see devices info).")] = None,
    cooldown_max_s: CooldownMaxS = 120.0,
    target_cv: TargetCv = None, max_runs: MaxRuns = None, memory: Memory = False,
) -> None:
    """Measure one model in one format on one device at one thread count."""
    from aiot.host.devices import resolve_name
    from aiot.host.runs import MeasureParams

    params = MeasureParams(warmup_runs, warmup_min_s, min_runs, min_s, max_s, timeout_s=timeout,
                           target_cv=target_cv, max_runs=max_runs, memory=memory)
    _sweep(ctx, [resolve_name(device)], [model], [fmt], parse_threads(str(threads)), weights,
           dataset, limit, params, as_json, native, binary, [delegate], binarize,
           [cluster] if cluster else None, cooldown_max_s=cooldown_max_s)


def sweep(
    ctx: typer.Context,
    model: Annotated[str, typer.Option("--model", "-m", help="Zoo model names, comma-separated.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="Formats, comma-separated.")],
    device: Annotated[str | None, typer.Option("--device", "-d", help="Devices, comma-separated (default: $AIOT_DEVICE or local).")] = None,
    threads: Annotated[str, typer.Option(help="Thread counts, comma-separated.")] = "1,2,4,8",
    weights: Weights = None, dataset: Dataset = None, limit: Limit = None,
    warmup_runs: WarmupRuns = 1, warmup_min_s: WarmupMinS = 0.5, min_runs: MinRuns = 50,
    min_s: MinS = 1.0, max_s: MaxS = 150.0, timeout: Timeout = None, as_json: JsonOpt = False,
    native: Native = None, binary: Binary = None, delegate: Delegate = None,
    binarize: Binarize = None,
    cluster: Annotated[str | None, typer.Option(
        help="CPU clusters to pin to, comma-separated (prime, big, little) (default: no pinning).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the run order shuffle (recorded).")] = 0,
    shuffle: Annotated[bool, typer.Option(
        "--shuffle/--no-shuffle", help="Run in a seeded random order rather than grouped.")] = True,
    fresh: Annotated[bool, typer.Option(
        "--fresh", help="Measure every run again instead of resuming this sweep's missing or failed runs.")] = False,
    retries: Annotated[int, typer.Option(
        help="Attempts per run when the device or link fails, with backoff, before the device counts as lost.")] = 3,
    cooldown_max_s: CooldownMaxS = 120.0,
    target_cv: TargetCv = None, max_runs: MaxRuns = None, memory: Memory = False,
) -> None:
    """Measure every combination of devices × models × formats × delegates × clusters × threads.

    Devices run in parallel (each one's runs serially), in a seeded shuffled order; running
    the same command again resumes the sweep (only missing or failed runs are redone).
    """
    from aiot.host.devices import resolve_name
    from aiot.host.runs import MeasureParams

    devices = split_list(device, "devices") if device else [resolve_name(None)]
    params = MeasureParams(warmup_runs, warmup_min_s, min_runs, min_s, max_s, timeout_s=timeout,
                           target_cv=target_cv, max_runs=max_runs, memory=memory)
    _sweep(ctx, devices, split_list(model, "models"), split_list(fmt, "formats"),
           parse_threads(threads), weights, dataset, limit, params, as_json, native, binary,
           split_list(delegate, "delegates") if delegate else None, binarize,
           split_list(cluster, "clusters") if cluster else None,
           seed=seed, shuffle=shuffle, fresh=fresh, retries=retries, cooldown_max_s=cooldown_max_s)


def push(
    ctx: typer.Context,
    model: Annotated[str, typer.Option("--model", "-m", help="Zoo model name.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="Artifact format.")],
    device: Device = None,
    weights: Weights = None,
    binarize: Binarize = None,
    as_json: JsonOpt = False,
) -> None:
    """Convert (if needed) and push an artifact and the device agent to a device."""
    from rich.markup import escape

    from aiot.converters.api import convert_model
    from aiot.host.agent_client import AgentSession
    from aiot.host.cli._output import out, print_json, spinner, state
    from aiot.host.deploy import push_file
    from aiot.host.devices import open_transport, resolve_name

    name = resolve_name(device)
    _validate_names([name], [model], [fmt])
    with spinner(f"converting {model} to {fmt}…"):
        conv = convert_model(model, fmt, state(ctx).results_dir() / "artifacts", weights=weights,
                             binarize=binarize)
    transport = open_transport(name)
    with spinner(f"pushing to {name}…"), AgentSession(transport) as agent:
        pushed = push_file(transport, conv.artifact, conv.sha256)
        sidecar = push_file(transport, conv.sidecar)
    report = {"device": name, "artifact": pushed.remote, "sidecar": sidecar.remote, "sha256": pushed.sha256,
              "size_bytes": pushed.size, "sent": pushed.sent, "agent": agent.root}
    if as_json:
        print_json(report)
        return
    verb = "pushed" if pushed.sent else "already on device, not sent again:"
    out.print(f"[green]✓[/] {verb} {escape(pushed.remote)} ({pushed.size / 1e6:.2f} MB)\n"
              f"  agent in {escape(agent.root)}")


def pull(
    ctx: typer.Context,
    device: Device = None,
    out_dir: Annotated[Path | None, typer.Option("--out", "-o", help="Folder to copy into "
                                                 "(default: RESULTS/pulled/DEVICE).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Copy the files a device left in WORKDIR/outputs (profiles, logs) into the results folder.

    File names come from the device; any that could land outside the folder are refused.
    """
    from rich.markup import escape

    from aiot.host.cli._output import message, out, print_json, spinner, state
    from aiot.host.devices import open_transport, resolve_name
    from aiot.host.pull import outputs_dir, pull_outputs

    name = resolve_name(device)
    transport = open_transport(name)
    dest = out_dir or state(ctx).results_dir() / "pulled" / name
    with spinner(f"pulling from {name}…"):
        pulled = pull_outputs(transport, dest)
    if as_json:
        print_json([{"name": p.name, "local": str(p.local) if p.local else None, "size_bytes": p.size,
                     "refused": p.refused} for p in pulled])
    elif not pulled:
        message(escape(f"nothing to pull: {name}:{outputs_dir(transport)} has no files"))
    for p in pulled if not as_json else []:
        line = f"[red]✗[/] {escape(p.refused)}" if p.refused else f"[green]✓[/] {escape(str(p.local))} ({p.size:,} B)"
        out.print(line)
    if any(p.refused for p in pulled):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("push")(push)
    app.command("pull")(pull)
    app.command("run")(run)
    app.command("sweep")(sweep)
