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
ModelHelp = ("A zoo name (resnet18), <zoo>_<algorithm> for a binarized one (resnet18_bnn), an "
             "artifact file (.tflite, .onnx, .ort, .pte, .ptl, .dab, predict_net.pb), a .pt2 "
             "program, or your code as file.py:factory or module:factory")
FormatHelp = ("Artifact format (default: an artifact file's own; LCE for a binarized zoo model "
              "LCE deploys; else tflite)")
InputShape = Annotated[list[str], typer.Option(
    "--input-shape", help="Fix an input's shape, NAME=DxDxD (repeatable), e.g. x=1x512 for "
                          "a dynamic dim or a factory that returns a bare module.")]
InputsFile = Annotated[Path | None, typer.Option(
    "--inputs", help="A .npz with one array per input name: real input values (hashes recorded).")]


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


def _validate_devices(devices: list[str]) -> None:
    """Fail fast on unknown device names before any work starts."""
    from aiot.host.devices import open_transport

    for d in devices:
        open_transport(d)


def resolve_targets(models: list[str], formats: list[str] | None, binarize: str | None):
    """``(ModelRef, formats)`` per model: an artifact file runs in its own format (which a
    given ``--format`` list must include), a model that converts in the formats given or its
    default (:func:`aiot.host.model_ref.default_format`)."""
    from aiot.converters import get_converter
    from aiot.host.model_ref import check_format, default_format, resolve_model

    wanted = list(dict.fromkeys(get_converter(f).name for f in formats)) if formats else None
    targets = []
    for text in dict.fromkeys(models):
        ref = resolve_model(text, binarize)
        if ref.is_artifact:
            if wanted and ref.format not in wanted:
                check_format(ref, wanted[0])  # the one-line "is a X artifact, not Y"
            targets.append((ref, [ref.format]))
        else:
            targets.append((ref, wanted or [default_format(ref)]))
    return targets


def parse_input_shapes(values: list[str]) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    """``["x=1x512", "y=4"]`` → ``(("x", (1, 512)), ("y", (4,)))``; None when none given."""
    shapes = {}
    for value in values or []:
        name, sep, dims = value.partition("=")
        try:
            parsed = tuple(int(d) for d in dims.lower().split("x")) if dims.strip() else ()
        except ValueError:
            parsed = ()
        if not sep or not name.strip() or not parsed or any(d < 1 for d in parsed):
            raise UsageError(f"--input-shape '{value}' is not NAME=DxD with sizes ≥ 1",
                             "e.g. --input-shape x=1x3x224x224")
        shapes[name.strip()] = parsed
    return tuple(shapes.items()) or None


def _check_inputs_file(path: Path | None):
    """``(path, sha256)`` of a readable ``--inputs`` .npz (checked against each artifact's
    inputs before any run), or ``(None, None)``."""
    if path is None:
        return None, None
    from aiot.host.fileio import sha256_file
    from aiot.host.signature import read_npz

    read_npz(path)  # one line for a missing, damaged or pickled file
    return path, sha256_file(path)


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


def _sweep(ctx, devices, targets, threads, weights, dataset, limit, params, as_json,
           native=None, binary=None, delegates=None, binarize=None, clusters=None,
           seed: int = 0, shuffle: bool = False, fresh: bool = True, retries: int = 3,
           cooldown_max_s: float | None = 120.0, input_shapes=None, inputs_file=None,
           requests=None, lab: str | None = None):
    """Validate everything that can be, then run the campaign of ``targets`` on ``devices``
    (or the ready-made ``requests``, e.g. what was last pushed to each device); with ``lab``,
    on the lab nodes that own the devices."""
    from aiot.host.campaign import CampaignPolicy, plan_sweep, run_campaign
    from aiot.host.cli._output import message, state
    from aiot.host.cli.progress import RichRunListener
    from aiot.host.runs import expand_targets
    from aiot.host.store import open_store

    params.validate()
    session = _lab_session(lab, devices, native, input_shapes, inputs_file)
    if session is None:
        _validate_devices(devices)
    inputs, inputs_sha = _check_inputs_file(inputs_file)
    common = {"weights": weights, "dataset": dataset, "dataset_limit": limit, "params": params,
              "native": native, "binary": binary, "binarize": binarize,
              "input_shapes": input_shapes, "inputs": inputs, "inputs_sha256": inputs_sha}
    if requests is None:
        requests = expand_targets(devices, targets, threads, delegates=delegates,
                                  clusters=clusters, **common)
    _validate_requests(requests, native, delegates)
    if session is None:  # a lab node checks its own devices
        _require_agents(requests)
    if retries < 1:
        raise UsageError("--retries must be at least 1")
    results_dir = state(ctx).results_dir()
    with open_store(results_dir) as store:
        plan = plan_sweep(requests, store, seed=seed, shuffle=shuffle, fresh=fresh)
    if plan.done:
        message(f"resuming sweep {plan.sweep_id}: {len(plan.done)} of {len(plan.requests)} runs already "
                "done (--fresh measures everything again)")
    if not plan.todo:
        message(f"sweep {plan.sweep_id} is complete; see: aiot results list --sweep {plan.sweep_id}")
        return
    try:
        with RichRunListener() as listener:
            records = run_campaign(plan, results_dir, listener,
                                   CampaignPolicy(retries=retries, cooldown=_cooldown(cooldown_max_s), lab=session))
    finally:
        if session is not None:
            session.close()
    _print_records(records, as_json)
    if any(r.status == "failed" for r in records):
        raise typer.Exit(1)


def _lab_session(address: str | None, devices: list[str], native, input_shapes, inputs_file):
    """The lab the sweep runs on (its devices checked), or None for this host's devices."""
    if not address:
        return None
    if native or input_shapes or inputs_file:
        raise UsageError("--lab sweeps measure with the device agent, from aiot's own inputs",
                         "drop --native / --input-shape / --inputs, or sweep on the host the device hangs off")
    from aiot.host.lab.session import LabSession

    session = LabSession(address)
    session.check_devices(devices)
    return session


def _require_agents(requests) -> None:
    """Every device that runs the agent has a Python for it (a phone: after devices setup)."""
    from aiot.host.device_setup import require_agent_python
    from aiot.host.devices import open_transport

    for device in dict.fromkeys(r.device for r in requests if not r.native):
        transport = open_transport(device)
        try:
            require_agent_python(transport)
        finally:
            transport.close()


def _validate_requests(requests, native, delegates) -> None:
    """Per distinct model and format: native tool, binarization, inputs and data set fit."""
    from aiot.host.signature import (
        artifact_signature,
        check_run_inputs,
        check_shape_names,
        is_artifact_file,
    )

    distinct = list({(r.model, r.model_sha256, r.format, r.binarize): r for r in requests}.values())
    for r in distinct:
        for delegate in delegates or [None]:
            _validate_native(native, [r.format], delegate)
        _validate_binarize(r.binarize, [r.format])
    signatures = [s for s in map(artifact_signature, distinct) if s is not None]
    converts = any(not is_artifact_file(r) for r in distinct)
    check_shape_names(distinct[0].shapes() if distinct else None, signatures, converts)
    for r in distinct:
        check_run_inputs(r)


def _targets(model: str | None, fmt: str | None, binarize: str | None):
    return resolve_targets(split_list(model, "models"),
                           split_list(fmt, "formats") if fmt else None, binarize)


def _chosen(targets) -> None:
    """Say which format each model runs in when the user did not name one."""
    from aiot.host.cli._output import message

    message("; ".join(f"{ref.label()} as {', '.join(formats)}" for ref, formats in targets))


def run(
    ctx: typer.Context,
    model: Annotated[str, typer.Option("--model", "-m", help=ModelHelp)],
    fmt: Annotated[str | None, typer.Option("--format", "-f", help=FormatHelp)] = None,
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
    input_shape: InputShape = [],  # noqa: B006 - Typer needs a literal default
    inputs: InputsFile = None,
) -> None:
    """Measure one model in one format on one device at one thread count."""
    from aiot.host.devices import resolve_name
    from aiot.host.runs import MeasureParams

    params = MeasureParams(warmup_runs, warmup_min_s, min_runs, min_s, max_s, timeout_s=timeout,
                           target_cv=target_cv, max_runs=max_runs, memory=memory)
    targets = _targets(model, fmt, binarize)
    if fmt is None and not as_json:
        _chosen(targets)
    _sweep(ctx, [resolve_name(device)], targets, parse_threads(str(threads)), weights,
           dataset, limit, params, as_json, native, binary, [delegate], binarize,
           [cluster] if cluster else None, cooldown_max_s=cooldown_max_s,
           input_shapes=parse_input_shapes(input_shape), inputs_file=inputs)


def sweep(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option("--model", "-m", help=ModelHelp + "; comma-separated (default: what was last pushed to each device).")] = None,
    fmt: Annotated[str | None, typer.Option("--format", "-f", help="Formats, comma-separated (default: each model's own; see run --help).")] = None,
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
    input_shape: InputShape = [],  # noqa: B006 - Typer needs a literal default
    inputs: InputsFile = None,
    lab: Annotated[str | None, typer.Option(
        "--lab", envvar="AIOT_LAB",
        help="A lab's HOST:PORT (aiot lab start/join): each device is measured on the lab node that "
             "owns it; records land in this host's store.")] = None,
) -> None:
    """Measure every combination of devices × models × formats × delegates × clusters × threads.

    Devices run in parallel (each one's runs serially), in a seeded shuffled order; running
    the same command again resumes the sweep (only missing or failed runs are redone).
    Without --model, each device measures what was last pushed to it (aiot push).
    """
    from aiot.host.devices import resolve_name
    from aiot.host.runs import MeasureParams

    devices = list(dict.fromkeys(split_list(device, "devices"))) if device else [resolve_name(None)]
    params = MeasureParams(warmup_runs, warmup_min_s, min_runs, min_s, max_s, timeout_s=timeout,
                           target_cv=target_cv, max_runs=max_runs, memory=memory)
    options = {"delegates": split_list(delegate, "delegates") if delegate else None,
               "clusters": split_list(cluster, "clusters") if cluster else None}
    shapes = parse_input_shapes(input_shape)
    requests = targets = None
    if model is None:
        requests = _last_pushed(ctx, devices, parse_threads(threads), params, fmt, weights,
                                binarize, dataset, limit, native, binary, shapes, inputs, **options)
    else:
        targets = _targets(model, fmt, binarize)
        if fmt is None and not as_json:
            _chosen(targets)
    _sweep(ctx, devices, targets, parse_threads(threads), weights, dataset, limit, params,
           as_json, native, binary, options["delegates"], binarize, options["clusters"],
           seed=seed, shuffle=shuffle, fresh=fresh, retries=retries,
           cooldown_max_s=cooldown_max_s, input_shapes=shapes, inputs_file=inputs,
           requests=requests, lab=lab)


def _last_pushed(ctx, devices, threads, params, fmt, weights, binarize, dataset, limit, native,
                 binary, input_shapes, inputs_file, delegates=None, clusters=None):
    """The runs of a sweep without ``--model``: each device's last pushed model and format."""
    from aiot.host.cli._output import message, state
    from aiot.host.runs import expand_targets
    from aiot.host.store import open_store

    if fmt or weights or binarize:
        raise UsageError("--format, --weights and --binarize go with --model",
                         "without --model a sweep measures what was last pushed, as pushed")
    with open_store(state(ctx).results_dir()) as store:
        pushes = {d: store.last_push(d) for d in devices}
    missing = [d for d, p in pushes.items() if p is None]
    if missing:
        raise UsageError(f"nothing was pushed to {', '.join(missing)} yet, and no --model given",
                         f"push a model first: aiot push --device {missing[0]} --model "
                         "resnet18_bnn, or name one with --model")
    inputs, inputs_sha = _check_inputs_file(inputs_file)
    requests = []
    for device, pushed in pushes.items():
        targets = resolve_targets([pushed.reference], [pushed.format], pushed.binarize)
        message(f"{device}: sweeping what was last pushed, {targets[0][0].label()} as "
                f"{pushed.format}")
        requests += expand_targets([device], targets, threads, delegates=delegates,
                                   clusters=clusters, params=params, dataset=dataset,
                                   dataset_limit=limit, native=native, binary=binary,
                                   weights=Path(pushed.weights) if pushed.weights else None,
                                   binarize=pushed.binarize, input_shapes=input_shapes,
                                   inputs=inputs, inputs_sha256=inputs_sha)
    return requests


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
    from rich.markup import escape

    from aiot.host.agent_client import AgentSession
    from aiot.host.cli._output import out, print_json, spinner, state
    from aiot.host.deploy import push_file
    from aiot.host.devices import open_transport, resolve_name
    from aiot.host.store import Push, open_store

    name = resolve_name(device)
    _validate_devices([name])
    ((ref, (chosen,)),) = resolve_targets([model], [fmt] if fmt else None, binarize)
    _validate_binarize(ref.binarize, [chosen])
    with spinner(f"converting {ref.label()} to {chosen}…"):
        artifact, sha256 = _artifact_for_push(ctx, ref, chosen, weights, input_shape)
    transport = open_transport(name)
    with spinner(f"pushing to {name}…"), AgentSession(transport) as agent:
        pushed = push_file(transport, artifact, sha256)
        sidecar = _push_sidecar(transport, artifact)
    with open_store(state(ctx).results_dir()) as store:
        store.record_push(Push(name, ref.name, chosen, _reference(ref), ref.binarize,
                               str(weights) if weights else None, pushed.sha256, pushed.remote))
    report = {"device": name, "model": ref.label(), "format": chosen, "artifact": pushed.remote,
              "sidecar": sidecar, "sha256": pushed.sha256, "size_bytes": pushed.size,
              "sent": pushed.sent, "agent": agent.root}
    if as_json:
        print_json(report)
        return
    verb = "pushed" if pushed.sent else "already on device, not sent again:"
    out.print(f"[green]✓[/] {escape(ref.label())} as {chosen}: {verb} {escape(pushed.remote)} "
              f"({pushed.size / 1e6:.2f} MB)\n  agent in {escape(agent.root)}\n"
              f"  measure it: aiot sweep --device {escape(name)} --threads 1,2,4,8")


def _artifact_for_push(ctx, ref, fmt: str, weights, input_shape):
    """``(file, sha256)`` to push: a user's artifact as it is, else the converted one."""
    from aiot.converters.api import convert_model
    from aiot.host.cli._output import state

    if ref.is_artifact:
        return ref.path, ref.sha256
    conv = convert_model(_reference(ref), fmt, state(ctx).results_dir() / "artifacts",
                         weights=weights, binarize=ref.binarize,
                         input_shapes=dict(parse_input_shapes(input_shape) or ()))
    return conv.artifact, conv.sha256


def _push_sidecar(transport, artifact: Path) -> str | None:
    """Push a converted artifact's sidecar beside it (a user's artifact has none)."""
    from aiot.converters.sidecar import sidecar_path
    from aiot.host.deploy import push_file

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
