"""The work of ``aiot run``, ``aiot sweep``, ``aiot push`` and ``aiot pull`` (their options:
:mod:`aiot.host.cli.measure`): each run or sweep's options read into one
:class:`~aiot.host.engine.spec.SweepSpec`, checked by :mod:`aiot.host.engine.preflight`, measured
by the campaign, and its records shown."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from aiot.converters import api
from aiot.converters.sidecar import sidecar_path
from aiot.core.errors import UsageError
from aiot.core.units import size_text
from aiot.host.app.via import check_via
from aiot.host.cli._output import message, out, print_json, safe, spinner, state
from aiot.host.cli.options import check_seconds, parse_options, parse_threads, split_list
from aiot.host.cli.profile_view import print_profiles
from aiot.host.cli.progress import RichRunListener
from aiot.host.cli.run_table import print_run_table
from aiot.host.cli.sweep_view import parity_notes, sort_key
from aiot.host.devices.agent_client import AgentSession
from aiot.host.devices.deploy import push_file
from aiot.host.devices.pull import outputs_dir, parse_max_bytes, pull_outputs
from aiot.host.devices.resolve import open_transport, resolve_name
from aiot.host.engine.campaign import SweepPlan, plan_sweep, record_key, run_campaign, run_key
from aiot.host.engine.estimate import LONG_S, estimate
from aiot.host.engine.input_shapes import flat_shapes, parse_inputs_args, parse_shape_args
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


def measure_one(ctx: typer.Context, args: dict) -> None:
    """``aiot run``: one run of the command's arguments ``args`` (by parameter name), unshuffled
    and measured anew every time."""
    params = _timing(args)
    targets = _targets(args["model"], args["fmt"], args["binarize"], args["native"])
    if args["fmt"] is None and not args["as_json"]:
        _chosen(targets)
    delegate = args["delegate"]
    spec = SweepSpec(
        devices=(resolve_name(args["device"]),), targets=targets,
        threads=tuple(parse_threads(str(args["threads"]))), params=params, weights=args["weights"],
        dataset=args["dataset"], limit=args["limit"], native=args["native"], binary=args["binary"],
        delegates=(delegate.strip().lower(),) if delegate else None, binarize=args["binarize"],
        clusters=_tuple(parse_clusters(args["cluster"])), cooldown_max_s=args["cooldown_max_s"],
        input_shapes=parse_shape_args(args["input_shape"]), **_inputs(args["inputs"]),
        input_values=parse_value_args(args["input_value"]),
        options=_pairs(parse_options(args["opt"])), vias=tuple(parse_vias(args["via"])),
        validity=args["validity"],
        shuffle=False, fresh=True)  # one run: nothing to order, measured anew every time
    _sweep(ctx, spec, args["as_json"])


def measure_sweep(ctx: typer.Context, args: dict) -> None:
    """``aiot sweep``: every combination of the command's arguments ``args`` (by parameter name),
    resumed where an earlier run of the same sweep stopped."""
    device, model, fmt, weights = args["device"], args["model"], args["fmt"], args["weights"]
    params = _timing(args)
    devices = list(dict.fromkeys(split_list(device, "devices"))) if device else [resolve_name(None)]
    delegates, clusters = parse_delegates(args["delegate"]), parse_clusters(args["cluster"])
    options = parse_options(args["opt"])
    shapes = parse_shape_args(args["input_shape"])
    dataset = check_data_options(weights, args["dataset"], args["limit"])
    targets = None
    if model is None:  # what was last pushed, as pushed
        counts = parse_threads(args["threads"])
        if fmt or options or weights or args["binarize"]:
            raise UsageError("--format, --opt, --weights and --binarize go with --model",
                             "without --model a sweep measures what was last pushed, as pushed")
    else:
        targets = _targets(model, fmt, args["binarize"], args["native"])
        if fmt is None and not args["as_json"]:
            _chosen(targets)
        counts = parse_threads(args["threads"])
    spec = SweepSpec(
        devices=tuple(devices), targets=targets, threads=tuple(counts), params=params,
        weights=weights, dataset=dataset, limit=args["limit"], native=args["native"],
        binary=args["binary"], delegates=_tuple(delegates), binarize=args["binarize"],
        clusters=_tuple(clusters), options=_pairs(options), input_shapes=shapes,
        **_inputs(args["inputs"]), input_values=parse_value_args(args["input_value"]),
        vias=tuple(parse_vias(args["via"])), seed=args["seed"], shuffle=args["shuffle"],
        fresh=args["fresh"], retries=args["retries"], cooldown_max_s=args["cooldown_max_s"],
        lab=args["lab"], validity=args["validity"])
    _sweep(ctx, spec, args["as_json"])


def _timing(args: dict) -> MeasureParams:
    """The timing knobs of run and sweep; every seconds option finite and ≥ 0 first, before
    any work (one line)."""
    check_seconds({"--warmup-min-s": args["warmup_min_s"], "--min-s": args["min_s"],
                   "--max-s": args["max_s"], "--timeout": args["timeout"],
                   "--cooldown-max-s": args["cooldown_max_s"]})
    return MeasureParams(args["warmup_runs"], args["warmup_min_s"], args["min_runs"], args["min_s"],
                         args["max_s"], timeout_s=args["timeout"], target_cv=args["target_cv"],
                         max_runs=args["max_runs"], memory=args["memory"], profile=args["profile"])


def _inputs(values: list[str]) -> dict:
    """``--inputs`` as SweepSpec's two fields (a file for every model, files per model)."""
    bare, scoped = parse_inputs_args(values)
    return {"inputs_file": bare, "scoped_inputs": scoped}


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


def push_model(ctx: typer.Context, model: str, fmt: str | None, device: str | None,
               weights: Path | None, binarize: str | None, input_shape: list[str],
               as_json: bool) -> None:
    """``aiot push``: convert (if needed) and push the artifact and the agent, and remember it."""
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


def pull_files(ctx: typer.Context, device: str | None, out_dir: Path | None, max_bytes: str | None,
               as_json: bool) -> None:
    """``aiot pull``: copy what the device left in WORKDIR/outputs, each name checked."""
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
