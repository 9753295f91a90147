"""``aiot push``, ``aiot run`` and ``aiot sweep``: put artifacts on devices and measure them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from aiot.core.errors import UsageError
from aiot.host.engine.input_shapes import SYNTAX, bind_shapes, flat_shapes, parse_shape_args
from aiot.models.model_ref import model_label, split_models
from aiot.core.units import size_text

Device = Annotated[str | None, typer.Option("--device", "-d", help="Device name (default: $AIOT_DEVICE, else the device of $ANDROID_SERIAL, else local).")]
Weights = Annotated[Path | None, typer.Option(help="State-dict file to load (default: the newest aiot train of the model on --dataset, else its packaged weights, else a seeded random init).")]
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
Timeout = Annotated[float | None, typer.Option("--timeout", help="Kill a run's agent after this many seconds and record the run as failed (default: max-s + warm-up + 300).")]
ModelHelp = ("A zoo name (resnet18), <zoo>_<algorithm> for a binarized one (resnet18_bnn), an "
             "artifact file (.tflite, .onnx, .ort, .pte, .ptl, .dab, predict_net.pb), a .pt2 "
             "program, or your code as file.py:factory or module:factory")
FormatHelp = ("Artifact format (default: an artifact file's own; LCE for a binarized zoo model "
              "LCE deploys; else tflite)")
InputShape = Annotated[list[str], typer.Option(
    "--input-shape", metavar=SYNTAX, help="An input's shape (repeatable): 1x3x640x640 for a "
    "single-input model, x=1x3x48x320 by input name, rec.onnx:x=1x3x48x320 for one model of a "
    "sweep. A free batch dim alone runs at 1 without it.")]
InputsFile = Annotated[Path | None, typer.Option(
    "--inputs", help="A .npz with one array per input name: real input values (hashes recorded).")]
Opt = Annotated[list[str], typer.Option(
    "--opt", help="Converter option KEY=VALUE (repeatable), as for aiot convert, e.g. --opt "
                  "quant=int8 to measure the int8 TFLite artifact.")]

Via = Annotated[str, typer.Option(
    "--via", help="How the agent starts on an Android device: shell (adb shell, the shell user's "
                  "background group) or app (the aiot app's Instrumentation, a foreground app: "
                  "aiot app install DEVICE first); comma-separated in a sweep to measure both.")]


def parse_vias(value: str | None) -> list[str]:
    """``"app,shell"`` → ``["app", "shell"]`` (checked, repeats dropped); ``["shell"]`` when empty."""
    from aiot.host.app.via import check_via

    if not value:
        return ["shell"]
    return list(dict.fromkeys(check_via(v) for v in split_list(value, "vias")))


def _with_vias(requests, vias: list[str], native) -> list:
    """Each request once per ``--via``; app runs only on ADB devices and with the agent."""
    from dataclasses import replace

    from aiot.host.devices.resolve import open_transport

    if vias == ["shell"]:
        return requests
    if "app" in vias:
        if native:
            raise UsageError("--via app starts the device agent; native tools run from the shell",
                             "drop --native, or use --via shell")
        for device in dict.fromkeys(r.device for r in requests):
            transport = open_transport(device)
            try:
                kind = transport.kind
            finally:
                transport.close()
            if kind != "adb":
                raise UsageError(f"--via app needs an Android device over ADB; '{device}' is {kind}",
                                 "use --via shell for it")
    return [replace(r, via=v) for r in requests for v in vias]


def parse_options(pairs: list[str]) -> dict[str, str]:
    """``--opt KEY=VALUE`` pairs as a dict (:func:`aiot.host.cli.convert.parse_options`)."""
    from aiot.host.cli.convert import parse_options as parse

    return parse(pairs or [])


def split_list(value: str, what: str) -> list[str]:
    """``"a,b"`` → ``["a", "b"]`` with blanks dropped; empty → UsageError."""
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise UsageError(f"no {what} given")
    return items


MAX_THREADS = 1024  # more than any device's cores; larger counts are typos (or overflow the store)


def parse_threads(value: str) -> list[int]:
    """``"1,2,4,8"`` → ``[1, 2, 4, 8]``, repeats dropped (a sweep measures each count once)."""
    try:
        threads = [int(v) for v in split_list(value, "thread counts")]
    except ValueError:
        raise UsageError(f"thread counts must be integers, got '{value}'", "e.g. --threads 1,2,4") from None
    wrong = [t for t in threads if not 1 <= t <= MAX_THREADS]
    if wrong:
        raise UsageError(f"thread count {wrong[0]} is out of range: it must be 1 to {MAX_THREADS}",
                         "e.g. --threads 1,2,4")
    return list(dict.fromkeys(threads))


#: The cluster names the probe gives (see aiot.host.devices.probe): ``all`` is every core.
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


def check_data_options(weights: Path | None, dataset: str | None, limit: int | None) -> str | None:
    """Refuse a missing ``--weights`` file, an unknown ``--dataset``, a missing image folder
    or a ``--limit`` below 1 before anything converts; returns the dataset's canonical name
    (an alias resolved, ``folder:`` made absolute) for the records."""
    from aiot.core.errors import DatasetError

    if weights is not None and not weights.is_file():
        what = "is a folder" if weights.is_dir() else "does not exist"
        raise UsageError(f"weights file {weights} {what}", "check the --weights path (a state-dict file)")
    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be at least 1, got {limit}")
    if dataset is None:
        return None
    from aiot.models.datasets.load import canonical_name

    try:
        return canonical_name(dataset)
    except DatasetError as exc:  # a missing folder is the user's input to fix
        raise UsageError(exc.message, exc.hint) from None


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
    """Fail fast on unknown device names, and on an SSH key file or known_hosts that cannot
    work, before any work starts."""
    from aiot.host.devices.resolve import open_transport

    for d in devices:
        transport = open_transport(d)
        check_setup = getattr(transport, "check_setup", None)
        if check_setup is not None:
            check_setup()


def resolve_targets(models: list[str], formats: list[str] | None, binarize: str | None,
                    native: str | None = None):
    """``(ModelRef, formats)`` per model: an artifact file runs in its own format (which a
    given ``--format`` list must include; ``all`` takes any), a model that converts in the
    formats given, every one it can be timed in for ``all`` (as ``convert --format all``), or
    its default (:func:`aiot.models.model_ref.default_format`)."""
    from aiot.converters import get_converter
    from aiot.host.cli._output import message, safe
    from aiot.converters import check_format
    from aiot.models.model_ref import default_format, resolve_model

    every = bool(formats) and any(f.strip().lower() == "all" for f in formats)
    if every:
        from aiot.converters.base import all_formats, formats_for
        from aiot.host.native import get_adapter

        formats, left_out = all_formats(get_adapter(native).formats if native else None)
        message("--format all: " + ", ".join(formats)
                + (f"; left out: {', '.join(left_out)}" if left_out else ""))
    wanted = list(dict.fromkeys(get_converter(f).name for f in formats)) if formats else None
    targets = []
    # Canonical references, repeats dropped: "mobilenetv2,MobileNet_V2" is one model.
    for ref in dict.fromkeys(resolve_model(text, binarize) for text in dict.fromkeys(models)):
        if ref.is_artifact:
            if wanted and ref.format not in wanted and not every:
                check_format(ref, wanted[0])  # the one-line "is a X artifact, not Y"
            targets.append((ref, [ref.format]))
        elif every:  # only what it converts to; the rest said, not failed records
            fits, left_out = formats_for(wanted, ref)
            if not fits:
                raise UsageError(f"{ref.label()} converts to none of the formats here",
                                 "; ".join(left_out) or "see: aiot convert --list")
            if left_out:
                message(safe(f"{ref.label()}: left out {', '.join(left_out)}"))
            targets.append((ref, fits))
        else:
            targets.append((ref, wanted or [default_format(ref)]))
    return targets


def _check_inputs_file(path: Path | None):
    """``(path, sha256)`` of a readable ``--inputs`` .npz (checked against each artifact's
    inputs before any run), or ``(None, None)``."""
    if path is None:
        return None, None
    from aiot.core.fileio import sha256_file
    from aiot.host.engine.signature import read_npz

    read_npz(path)  # one line for a missing, damaged or pickled file
    return path, sha256_file(path)


def _print_records(records, as_json: bool) -> None:
    from aiot.host.cli._output import message, print_json, safe
    from aiot.host.cli.profile_view import print_profiles
    from aiot.host.cli.results import print_run_table
    from aiot.host.cli.sweep_view import parity_notes

    if as_json:
        print_json([r.to_dict() for r in records])
    else:
        print_run_table(records, sweep=True)
        print_profiles(records)
    for note in parity_notes(records):
        message(f"[yellow]warning:[/] {safe(note)}")


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
    from aiot.host.engine.cooldown import CooldownPolicy

    return CooldownPolicy(max_wait_s=max_s)


def _sweep(ctx, devices, targets, threads, weights, dataset, limit, params, as_json,
           native=None, binary=None, delegates=None, binarize=None, clusters=None,
           seed: int = 0, shuffle: bool = False, fresh: bool = True, retries: int = 3,
           cooldown_max_s: float | None = 120.0, input_shapes=None, inputs_file=None,
           requests=None, lab: str | None = None, options: dict | None = None,
           vias: list[str] | None = None):
    """Validate everything that can be, then run the campaign of ``targets`` on ``devices``
    (or the ready-made ``requests``, e.g. what was last pushed to each device); with ``lab``,
    on the lab nodes that own the devices."""
    from rich.markup import escape

    from aiot.host.engine.campaign import CampaignPolicy, plan_sweep, run_campaign
    from aiot.host.cli._output import message, state
    from aiot.host.cli.progress import RichRunListener
    from aiot.host.devices.resolve import emulation_warning  # here: devices costs `aiot --help` 60 ms
    from aiot.host.engine.runs import expand_targets
    from aiot.host.store import open_store
    from aiot.host.cli.sweep_view import check_cores, stored_records
    from aiot.host.engine.validity import ValidityPolicy

    params.validate()
    ValidityPolicy.from_env()  # a bad AIOT_VALIDITY: one line now, not after every run
    dataset = check_data_options(weights, dataset, limit)
    session = _lab_session(lab, devices, native, input_shapes, inputs_file)
    if session is None:
        _validate_devices(devices)
    inputs, inputs_sha = _check_inputs_file(inputs_file)
    common = {"weights": weights, "dataset": dataset, "dataset_limit": limit, "params": params,
              "native": native, "binary": binary, "binarize": binarize,
              "inputs": inputs, "inputs_sha256": inputs_sha,
              "options": tuple(sorted((options or {}).items())) or None}
    if requests is None:
        requests = expand_targets(devices, targets, threads, delegates=delegates,
                                  clusters=clusters, **common)
    requests, notes = bind_shapes(_with_vias(requests, vias or ["shell"], native), input_shapes or ())
    for note in notes:
        message(note)
    _validate_requests(requests, native, delegates)
    if session is None:  # a lab node checks its own devices
        _reach_devices(dict.fromkeys(r.device for r in requests))
        _require_agents(requests)
        for line in check_cores(requests):  # unknown --cluster: one line; too many threads: warned
            message(f"[yellow]warning:[/] {escape(line)}")
    if retries < 1:
        raise UsageError("--retries must be at least 1")
    # After every check (a refused sweep is its error alone), before a first run takes minutes.
    if emulated := emulation_warning(devices):
        message(f"[yellow]warning:[/] {escape(emulated)}")
    requests = with_weights(requests, dataset)  # after every check: it may print a warning
    results_dir = state(ctx).results_dir()
    with open_store(results_dir) as store:
        plan = plan_sweep(requests, store, seed=seed, shuffle=shuffle, fresh=fresh)
    message(f"resuming sweep {plan.sweep_id}: {len(plan.done)} of {len(plan.requests)} runs already "
            "done (--fresh measures everything again)" if plan.done else
            f"sweep {plan.sweep_id}: {len(plan.requests)} run(s)")
    if not plan.todo:  # what it measured, as stored
        _print_records(stored_records(results_dir, plan), as_json)
        message(f"sweep {plan.sweep_id} is complete; see: aiot results list --sweep {plan.sweep_id}")
        return
    # The app starts one agent process per command (am cannot feed a session's stdin): where a
    # sweep compares the two, the shell's runs do the same, so a pair differs only in the
    # process context the agent runs in, and load times compare too.
    both_vias = {"app", "shell"} <= set(vias or ())
    if both_vias:
        message("--via app,shell: the shell's runs also start one agent process per run, as the app's do")
    try:
        with RichRunListener() as listener:
            records = run_campaign(plan, results_dir, listener,
                                   CampaignPolicy(retries=retries, cooldown=_cooldown(cooldown_max_s), lab=session,
                                                  persistent_agent=False if both_vias else None))
    finally:
        if session is not None:
            session.close()
    _print_records(records if as_json else stored_records(results_dir, plan), as_json)
    message(f"sweep {plan.sweep_id} done; see: aiot results list --sweep {plan.sweep_id}")
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


def _reach_devices(devices) -> None:
    """Every SSH device answers now: one line naming an unreachable one, before any
    conversion, rather than failed records after them and the campaign's retries.

    ADB devices are asked by :func:`_require_agents`; the local device is always there.
    """
    def answers(transport) -> None:
        if transport.kind == "ssh":
            transport.shell(["true"], timeout=60)

    _preflight(devices, answers)


def _require_agents(requests) -> None:
    """Every device that runs the agent has a Python for it (a phone: after devices setup)."""
    from aiot.host.devices.setup import require_agent_python

    _preflight(dict.fromkeys(r.device for r in requests if not r.native), require_agent_python)


def _preflight(devices, check) -> None:
    """``check(transport)`` for each device. A device out of reach right now stops a sweep of
    that device alone (one line, nothing stored); among several, the others go on and the
    campaign retries it with backoff and records its runs skipped if it stays away, as it does
    for a link that drops mid-sweep. A wrong key, host key or missing Python stops any sweep."""
    from aiot.host.cli._output import message, safe
    from aiot.host.devices.resolve import open_transport
    from aiot.core.errors import AiotError
    from aiot.core.errors import is_transient

    devices = list(devices)
    for device in devices:
        try:
            transport = open_transport(device)
            try:
                check(transport)
            finally:
                transport.close()
        except AiotError as exc:
            if len(devices) == 1 or not is_transient(exc):
                raise
            message(f"[yellow]warning:[/] {safe(device)} is out of reach now ({safe(exc.message)}): "
                    "its runs are retried, then skipped if it stays away")


def _validate_requests(requests, native, delegates) -> None:
    """Per distinct model and format: native tool, binarization, inputs and data set fit."""
    from aiot.host.engine.signature import check_run_inputs

    distinct = list({(r.model, r.model_sha256, r.format, r.binarize): r for r in requests}.values())
    for r in distinct:
        for delegate in delegates or [None]:
            _validate_native(native, [r.format], delegate)
        _validate_binarize(r.binarize, [r.format])
        _check_options(r)
        _check_runnable(r)
    if native:
        _check_native_binaries(native, dict.fromkeys(r.device for r in requests), requests[0].binary)
    for r in distinct:
        check_run_inputs(r)


def _check_options(request) -> None:
    """``--opt`` names options the format has, with values it takes; an artifact file is
    measured as it is, so it takes none."""
    if not request.options:
        return
    from aiot.converters.base import get_converter, resolve_options
    from aiot.host.engine.signature import is_artifact_file

    if is_artifact_file(request):
        raise UsageError(f"--opt configures a conversion, but {request.model} is an artifact "
                         "file measured as it is", "drop --opt, or name a model that converts")
    converter = get_converter(request.format)
    resolved = resolve_options(converter, request.option_dict())
    converter.check_options(resolved)


def with_weights(requests, dataset: str | None):
    """Each request with the weights it runs with: ``--weights`` as given, else its model's
    default (:func:`aiot.host.engine.weights.choose_weights`: the newest ``aiot train`` of it on
    ``dataset``); says once which were chosen, and warns when accuracy is measured untrained."""
    from dataclasses import replace

    from aiot.models.model_ref import resolve_model
    from aiot.host.engine.weights import GIVEN, OWN, WeightsChoice, choose_weights

    chosen: dict[tuple, WeightsChoice] = {}
    done = []
    for r in requests:
        if r.weights is not None:
            done.append(replace(r, weights_origin=r.weights_origin or GIVEN))
            continue
        key = (r.model, r.binarize, r.model_path)
        if key not in chosen:
            chosen[key] = (WeightsChoice(None, OWN) if r.model_path is not None
                           else choose_weights(resolve_model(r.model, r.binarize), None, dataset))
        done.append(replace(r, weights=chosen[key].path, weights_origin=chosen[key].origin))
    announce_weights([(model, binarize, c) for (model, binarize, _), c in chosen.items()], dataset)
    return done


def announce_weights(chosen: list[tuple], dataset: str | None) -> None:
    """For ``(model, binarize, WeightsChoice)`` triples: one line per model whose weights
    were picked for it (a cached training), and one warning for the models whose accuracy
    is measured untrained (chance level, not the model's)."""
    from rich.markup import escape

    from aiot.host.cli._output import message
    from aiot.host.engine.weights import TRAINED, UNTRAINED

    for model, binarize, choice in chosen:
        if choice.origin == TRAINED:
            message(f"{escape(model_label(model, binarize))}: weights {escape(choice.describe())}, "
                    "the newest aiot train (--weights names others)")
    untrained = [(m, b) for m, b, c in chosen if c.untrained]
    if untrained and dataset:
        model, binarize = untrained[0]
        train = f"aiot train {model}" + (f" --binarize {binarize}" if binarize else "")
        names = ", ".join(model_label(m, b) for m, b in untrained)
        message(f"[yellow]warning:[/] {escape(names)}: {UNTRAINED}, so the accuracy on "
                f"{escape(dataset)} is chance level; train first: {escape(train)} --dataset "
                f"{escape(dataset)}")


def _check_runnable(request) -> None:
    """An emit-only format (no runtime the agent drives) needs a native tool to be timed."""
    from aiot.converters import get_converter

    if not request.native and get_converter(request.format).backend is None:
        raise UsageError(f"format '{request.format}' is emit-only: no runtime aiot's agent drives "
                         "can time it", "time it with the format's native benchmark binary "
                         "(--native), or choose another --format")


def _check_native_binaries(native: str, devices, binary: Path | None) -> None:
    """Each device has the ``--native`` tool's file (given, or in its inventory entry)."""
    from aiot.host.native import get_adapter, resolve_binary

    tool = get_adapter(native).tool
    for device in devices:
        found = resolve_binary(tool, device, binary)
        if not found.is_file():
            raise UsageError(f"{tool} binary {found} for '{device}' does not exist",
                             "check --binary or the device's [binaries] entry in the inventory")


def _targets(model: str | None, fmt: str | None, binarize: str | None, native: str | None):
    return resolve_targets(split_models(model),
                           split_list(fmt, "formats") if fmt else None, binarize, native)


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
    profile: Profile = False,
    input_shape: InputShape = [],  # noqa: B006 - Typer needs a literal default
    inputs: InputsFile = None,
    opt: Opt = [],  # noqa: B006 - Typer needs a literal default
    via: Via = "shell",
) -> None:
    """Measure one model in one format on one device at one thread count."""
    from aiot.host.devices.resolve import resolve_name
    from aiot.host.engine.runs import MeasureParams

    params = MeasureParams(warmup_runs, warmup_min_s, min_runs, min_s, max_s, timeout_s=timeout,
                           target_cv=target_cv, max_runs=max_runs, memory=memory, profile=profile)
    targets = _targets(model, fmt, binarize, native)
    if fmt is None and not as_json:
        _chosen(targets)
    _sweep(ctx, [resolve_name(device)], targets, parse_threads(str(threads)), weights,
           dataset, limit, params, as_json, native, binary,
           [delegate.strip().lower()] if delegate else None, binarize,
           parse_clusters(cluster), cooldown_max_s=cooldown_max_s,
           input_shapes=parse_shape_args(input_shape), inputs_file=inputs,
           options=parse_options(opt), vias=parse_vias(via))


def sweep(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option("--model", "-m", help=ModelHelp + "; comma-separated (default: what was last pushed to each device).")] = None,
    fmt: Annotated[str | None, typer.Option("--format", "-f", help="Formats, comma-separated, or all: every format the model can be timed in here, as convert --format all (default: each model's own; see run --help).")] = None,
    device: Annotated[str | None, typer.Option("--device", "-d", help="Devices, comma-separated (default: $AIOT_DEVICE, else the device of $ANDROID_SERIAL, else local).")] = None,
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
    profile: Profile = False,
    input_shape: InputShape = [],  # noqa: B006 - Typer needs a literal default
    inputs: InputsFile = None,
    lab: Annotated[str | None, typer.Option(
        "--lab", envvar="AIOT_LAB",
        help="A lab's HOST:PORT (aiot lab start/join): each device is measured on the lab node that "
             "owns it; records land in this host's store.")] = None,
    opt: Opt = [],  # noqa: B006 - Typer needs a literal default
    via: Via = "shell",
) -> None:
    """Measure every combination of devices × models × formats × delegates × clusters × threads
    (× --via shell,app on Android devices).

    Devices run in parallel (each one's runs serially), in a seeded shuffled order; running
    the same command again resumes the sweep (only missing or failed runs are redone).
    Without --model, each device measures what was last pushed to it (aiot push).
    """
    from aiot.host.devices.resolve import resolve_name
    from aiot.host.engine.runs import MeasureParams

    devices = list(dict.fromkeys(split_list(device, "devices"))) if device else [resolve_name(None)]
    params = MeasureParams(warmup_runs, warmup_min_s, min_runs, min_s, max_s, timeout_s=timeout,
                           target_cv=target_cv, max_runs=max_runs, memory=memory, profile=profile)
    options = {"delegates": parse_delegates(delegate),
               "clusters": parse_clusters(cluster), "opt": parse_options(opt)}
    shapes = parse_shape_args(input_shape)
    dataset = check_data_options(weights, dataset, limit)
    requests = targets = None
    if model is None:
        requests = _last_pushed(ctx, devices, parse_threads(threads), params, fmt or options["opt"],
                                weights, binarize, dataset, limit, native, binary, inputs,
                                delegates=options["delegates"], clusters=options["clusters"])
    else:
        targets = _targets(model, fmt, binarize, native)
        if fmt is None and not as_json:
            _chosen(targets)
    _sweep(ctx, devices, targets, parse_threads(threads), weights, dataset, limit, params,
           as_json, native, binary, options["delegates"], binarize, options["clusters"],
           seed=seed, shuffle=shuffle, fresh=fresh, retries=retries,
           cooldown_max_s=cooldown_max_s, input_shapes=shapes, inputs_file=inputs,
           requests=requests, lab=lab, options=options["opt"], vias=parse_vias(via))


def _last_pushed(ctx, devices, threads, params, fmt, weights, binarize, dataset, limit, native,
                 binary, inputs_file, delegates=None, clusters=None):
    """The runs of a sweep without ``--model``: each device's last pushed model and format."""
    from aiot.host.cli._output import message, state
    from aiot.host.engine.runs import expand_targets
    from aiot.host.store import open_store

    if fmt or weights or binarize:
        raise UsageError("--format, --opt, --weights and --binarize go with --model",
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
                                   binarize=pushed.binarize,
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

    from aiot.host.devices.agent_client import AgentSession
    from aiot.host.cli._output import out, print_json, spinner, state
    from aiot.host.devices.deploy import push_file
    from aiot.host.devices.resolve import open_transport, resolve_name
    from aiot.host.store import Push, open_store

    name = resolve_name(device)
    check_data_options(weights, None, None)
    _validate_devices([name])
    ((ref, (chosen,)),) = resolve_targets([model], [fmt] if fmt else None, binarize)
    _validate_binarize(ref.binarize, [chosen])
    picked = None
    if not ref.is_artifact:  # the weights a run of it would use (a cached training, ...)
        from aiot.host.engine.weights import choose_weights

        picked = choose_weights(ref, weights)
        announce_weights([(ref.name, ref.binarize, picked)], None)
    with spinner(f"converting {ref.label()} to {chosen}…"):
        artifact, sha256 = _artifact_for_push(ctx, ref, chosen, picked.path if picked else None,
                                              input_shape)
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
              f"({size_text(pushed.size)})\n  agent in {escape(agent.root)}\n"
              f"  measure it: aiot sweep --device {escape(name)} --threads 1,2,4,8")


def _artifact_for_push(ctx, ref, fmt: str, weights, input_shape):
    """``(file, sha256)`` to push: a user's artifact as it is, else the converted one."""
    from aiot.converters.api import convert_model
    from aiot.host.cli._output import state

    if ref.is_artifact:
        return ref.path, ref.sha256
    conv = convert_model(_reference(ref), fmt, state(ctx).results_dir() / "artifacts",
                         weights=weights, binarize=ref.binarize,
                         input_shapes=flat_shapes(parse_shape_args(input_shape)))
    return conv.artifact, conv.sha256


def _push_sidecar(transport, artifact: Path) -> str | None:
    """Push a converted artifact's sidecar beside it (a user's artifact has none)."""
    from aiot.converters.sidecar import sidecar_path
    from aiot.host.devices.deploy import push_file

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
    from aiot.host.devices.resolve import open_transport, resolve_name
    from aiot.host.devices.pull import outputs_dir, pull_outputs

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
