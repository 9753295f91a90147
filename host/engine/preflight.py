"""Preflight: everything a run, sweep or push can check before its first conversion or run.

A refused measurement is its error alone, one :class:`~aiot.core.errors.AiotError`, before
anything converts or takes minutes: unknown names, files that are not there, options a format
does not take, a native tool that cannot run a format, a device out of reach or without a
Python for the agent, a ``--cluster`` the device lacks. What is not an error (a device out of
reach among several, too many threads for a device's cores, an emulated device, the weights
chosen) is said in one line through :mod:`aiot.core.notices`.

:func:`check_sweep` runs every check of a :class:`~aiot.host.engine.spec.SweepSpec`, in the
order the CLI has always run them, and returns the runs it will measure; the CLI, lab nodes and
the papers' procedures call the single checks they need.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple, Self

from aiot.converters import get_converter
from aiot.converters.api import check_deployable
from aiot.converters.base import all_formats, check_format, formats_for, resolve_options
from aiot.converters.keras import is_keras_file, tflite_of
from aiot.core import notices, stage_limit
from aiot.core.errors import AiotError, DatasetError, UsageError, is_transient
from aiot.core.fileio import sha256_file
from aiot.device_agent import backends as agent_backends
from aiot.host.devices.affinity import cluster_cpus
from aiot.host.devices.agent_client import AgentSession
from aiot.host.devices.resolve import emulation_warning, open_transport
from aiot.host.devices.setup import require_agent_python
from aiot.host.engine.gates import (
    check_delegate,
    check_native_formats,
    check_native_via,
    check_reserved,
    check_runnable,
    device_runner,
    native_binary,
)
from aiot.host.engine.input_shapes import bind_inputs, bind_shapes
from aiot.host.engine.runs import RunRequest, expand_targets
from aiot.host.engine.signature import (
    FreeDims,
    check_run_inputs,
    free_dims_refusal,
    is_artifact_file,
    read_npz,
)
from aiot.host.engine.spec import SweepSpec
from aiot.host.engine.validity import ValidityPolicy, threads_warning
from aiot.host.engine.weights import GIVEN, OWN, TRAINED, UNTRAINED, WeightsChoice, choose_weights
from aiot.host.native import get_adapter, inventory_binaries
from aiot.host.store import open_store
from aiot.models.model_ref import default_format, model_label, resolve_model
from aiot.models.quant.deploy import deployment_hint, deployment_refusal
from aiot.models.quant.methods import parse_quantize


class Checked(NamedTuple):
    """What preflight hands on to the campaign: the runs (models resolved, shapes, vias and
    weights bound), the open lab session (None: this host's devices) and each device's probe
    as the checks read it (its workspace starts from it rather than probing again)."""

    requests: list[RunRequest]
    lab: object
    probes: dict[str, dict]


def check_sweep(spec: SweepSpec, results_dir: Path, lab=None) -> Checked:
    """Validate everything that can be, then the runs of ``spec`` (each with its shapes, via
    and weights bound) and, for ``spec.lab``, the open session of the lab whose nodes own the
    devices (the caller closes it), opened with ``lab`` (the lab's
    :class:`~aiot.host.lab.session.LabSession`: the lab drives the engine, so the engine
    imports none of it).

    Without targets the runs are what was last pushed to each device (:func:`last_pushed`).
    """
    requests = None if spec.targets is not None else last_pushed(spec, results_dir)
    spec.params.validate()
    stage_limit.limit_s()  # a bad AIOT_CONVERT_TIMEOUT_S: one line now, not at each conversion
    # A bad AIOT_VALIDITY or --validity: one line now, not after every run.
    ValidityPolicy.from_env(option=spec.validity)
    dataset = check_data_options(spec.weights, spec.dataset, spec.limit)
    check_reserved(spec.devices)
    session = lab_session(spec, lab)
    try:
        with Links() as links:  # each device's transport opened once for all the checks
            return Checked(_check_runs(spec, requests, dataset, session, links), session, links.probes)
    except BaseException:
        if session is not None:
            session.close()
        raise


def _check_runs(spec: SweepSpec, requests, dataset: str | None, session,
                links: Links) -> list[RunRequest]:
    """The checks of :func:`check_sweep` once its settings passed (the lab's session open)."""
    if session is None:
        validate_devices(spec.devices, links)
    if requests is None:
        requests = spec.requests(dataset, *check_inputs_file(spec.inputs_file))
    if spec.scoped_inputs:
        requests = bind_inputs(requests, tuple((scope, *check_inputs_file(path))
                                               for scope, path in spec.scoped_inputs))
    requests, notes = bind_shapes(with_vias(requests, spec.vias, spec.native), spec.input_shapes)
    for note in notes:
        notices.say(note)
    validate_requests(requests, spec.native, spec.delegates)
    if session is None:  # a lab node checks its own devices
        reach_devices(dict.fromkeys(r.device for r in requests), links)
        require_agents(requests, links)
        require_runtimes(requests, links)
        # unknown --cluster: one line; too many threads: warned (unless --validity threads=off)
        for line in check_cores(requests, ValidityPolicy.from_env(option=spec.validity), links):
            notices.warn(line)
    if spec.retries < 1:
        raise UsageError("--retries must be at least 1")
    # After every check (a refused sweep is its error alone), before a first run takes minutes.
    if emulated := emulation_warning(spec.devices):
        notices.warn(emulated)
    return with_weights(requests, dataset)  # after every check: it may warn


# -- the settings themselves ---------------------------------------------------------------------

def check_data_options(weights: Path | None, dataset: str | None, limit: int | None) -> str | None:
    """Refuse a missing ``--weights`` file, an unknown ``--dataset``, a missing image folder
    or a ``--limit`` below 1 before anything converts; returns the dataset's canonical name
    (an alias resolved, ``folder:`` made absolute) for the records."""
    if weights is not None and not weights.is_file():
        what = "is a folder" if weights.is_dir() else "does not exist"
        raise UsageError(f"weights file {weights} {what}", "check the --weights path (a state-dict file)")
    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be at least 1, got {limit}")
    if dataset is None:
        return None
    # The data sets pull NumPy: loaded when a run names one, so `aiot run --help` stays light.
    from aiot.models.datasets.load import canonical_name

    try:
        return canonical_name(dataset)
    except DatasetError as exc:  # a missing folder is the user's input to fix
        raise UsageError(exc.message, exc.hint) from None


def check_inputs_file(path: Path | None) -> tuple[Path | None, str | None]:
    """``(path, sha256)`` of a readable ``--inputs`` .npz (checked against each artifact's
    inputs before any run), or ``(None, None)``."""
    if path is None:
        return None, None
    read_npz(path)  # one line for a missing, damaged or pickled file
    return path, sha256_file(path)


def keras_as_tflite(text: str) -> str:
    """A ``--model`` value naming a Keras file as its ``.tflite`` (TensorFlow's converter in
    the ``lce`` toolchain, parity checked, cached per content), said on stderr; else ``text``."""
    if not is_keras_file(text):
        return text
    done = tflite_of(Path(text).expanduser())
    notices.say(f"{Path(text).name}: a Keras model, run as {done.artifact.name} (TFLiteConverter"
                f"{', cached' if done.cached else f', {done.seconds:.0f} s'}; parity vs Keras: "
                f"max |diff| {done.parity['max_abs_diff']:.2g})")
    return str(done.artifact)


def resolve_targets(models: list[str], formats: list[str] | None, binarize: str | None,
                    native: str | None = None) -> list[tuple]:
    """``(ModelRef, formats)`` per model: an artifact file runs in its own format (which a
    given ``--format`` list must include; ``all`` takes any), a model that converts in the
    formats given, every one it can be timed in for ``all`` (as ``convert --format all``), or
    its default (:func:`aiot.models.model_ref.default_format`)."""
    every = bool(formats) and any(f.strip().lower() == "all" for f in formats)
    if every:
        formats, left_out = all_formats(get_adapter(native).formats if native else None)
        notices.say("--format all: " + ", ".join(formats)
                    + (f"; left out: {', '.join(left_out)}" if left_out else ""))
    wanted = list(dict.fromkeys(get_converter(f).name for f in formats)) if formats else None
    targets = []
    # Canonical references, repeats dropped: "mobilenetv2,MobileNet_V2" is one model.
    for ref in dict.fromkeys(resolve_model(keras_as_tflite(text), binarize, quantized_ok=True)
                             for text in dict.fromkeys(models)):
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
                notices.say(f"{ref.label()}: left out {', '.join(left_out)}")
            targets.append((ref, fits))
        else:
            targets.append((ref, wanted or [default_format(ref)]))
        if ref.quantize:
            for fmt in targets[-1][1]:
                check_quantized(ref, fmt)
    return targets


def check_quantized(ref, fmt: str) -> None:
    """A quantized model runs only where it deploys (:mod:`aiot.models.quant.deploy`):
    else one line with the reason, before any work."""
    chosen = parse_quantize(ref.quantize)
    reason = deployment_refusal(chosen, fmt)
    if reason:
        raise UsageError(f"{ref.label()} cannot run as {fmt}: {reason}", deployment_hint(chosen))


def validate_native(native: str | None, formats: list[str], delegate: str | None) -> None:
    """The native tool exists, runs every requested format and knows the delegate."""
    check_delegate(native, delegate)
    if native is not None:
        check_native_formats(native, formats, delegate)


def validate_binarize(binarize: str | None, formats: list[str]) -> None:
    """Unknown algorithm, or one Table 4 says cannot deploy to a format: fail before any run."""
    if not binarize:
        return
    for fmt in formats:
        check_deployable(get_converter(fmt), binarize)


def validate_requests(requests: list[RunRequest], native: str | None, delegates) -> None:
    """Per distinct model and format: native tool, binarization, inputs and data set fit."""
    distinct = list({(r.model, r.model_sha256, r.format, r.binarize): r for r in requests}.values())
    for r in distinct:
        for delegate in delegates or [None]:
            validate_native(native, [r.format], delegate)
        validate_binarize(r.binarize, [r.format])
        _check_options(r)
        check_runnable(r.format, r.native)
    if native:
        _check_native_binaries(native, dict.fromkeys(r.device for r in requests), requests[0].binary)
        if requests[0].input_values:
            raise UsageError("--input-value fills inputs the agent makes; a --native tool makes "
                             "its own", "drop --native, or drop --input-value")
    # Every model's free dims in one refusal (fixed in one try, not one model per try).
    refused: dict[str, FreeDims] = {}
    for r in distinct:
        try:
            check_run_inputs(r)
        except FreeDims as free:
            refused.setdefault(free.model, free)
    if refused:
        several = len({r.model for r in requests}) > 1
        raise free_dims_refusal(list(refused.values())) if several else next(iter(refused.values()))


def _check_options(request: RunRequest) -> None:
    """``--opt`` names options the format has, with values it takes; an artifact file is
    measured as it is, so it takes none."""
    if not request.options:
        return
    if is_artifact_file(request):
        raise UsageError(f"--opt configures a conversion, but {request.model} is an artifact "
                         "file measured as it is", "drop --opt, or name a model that converts")
    converter = get_converter(request.format)
    converter.check_options(resolve_options(converter, request.option_dict()))


def _check_native_binaries(native: str, devices, binary: Path | None) -> None:
    """Each device has the ``--native`` tool's file (given, or in its inventory entry)."""
    tool = get_adapter(native).tool
    for device in devices:
        native_binary(tool, device, binary)


def check_push(spec: SweepSpec) -> WeightsChoice | None:
    """The push of ``spec``'s one target checked (its binarization deploys to its format); the
    weights a run of it would use (a cached training, ...), said when picked for it, or None
    for an artifact file, pushed as it is."""
    ((ref, (fmt,)),) = spec.targets
    validate_binarize(ref.binarize, [fmt])
    if ref.is_artifact:
        return None
    picked = choose_weights(ref, spec.weights)
    announce_weights([(ref.name, ref.binarize, picked)], None)
    return picked


def push_runner(transport, fmt: str) -> str | None:
    """Who will time a push of ``fmt`` to the device of ``transport``, asked before it
    converts: None for the agent, else the ``--native`` tool its inventory configures
    (:func:`~aiot.host.engine.gates.device_runner` refuses a device that has neither)."""
    return device_runner(fmt, transport.name, _runtimes(transport), inventory_binaries(transport.name))


def _runtimes(transport) -> dict:
    """``{backend: truthy when the device's agent runs it}``, from the agent's hello. A runtime
    kept in a toolchain environment of its own (LCE on this host) counts as there."""
    if transport.kind == "local":  # the agent here is this Python: no process to ask
        runtimes = agent_backends.versions()
    else:
        with AgentSession(transport) as agent:
            runtimes = dict(agent.hello().get("runtimes") or {})
    for backend, version in runtimes.items():
        runtimes[backend] = version or transport.python(backend) != transport.python()
    return runtimes


def require_runtimes(requests: list[RunRequest], links: Links | None = None) -> None:
    """Every agent run's format has its runtime on its device (one hello per device), before
    anything converts: a phone without LCE or torch is refused with its fix, not failed in
    every record after minutes of converting."""
    wanted: dict[str, set[str]] = {}
    for r in requests:
        if not r.native and get_converter(r.format).backend is not None:
            wanted.setdefault(r.device, set()).add(r.format)

    def check(transport) -> None:
        runtimes = _runtimes(transport)
        binaries = inventory_binaries(transport.name)
        for fmt in sorted(wanted.get(transport.name, ())):
            tool = device_runner(fmt, transport.name, runtimes, binaries)
            if tool is not None:
                raise UsageError(f"{transport.name}'s agent has no runtime for {fmt}; its "
                                 f"inventory configures {tool}, which does",
                                 f"add --native {tool}, or choose a --format the device runs")

    _each_device(wanted, check, links)


# -- the devices ----------------------------------------------------------------------------------

class Links:
    """The transports preflight opened, one per device, closed together: every check of a
    device reuses its link (no transport opened, nor inventory read, per check)."""

    def __init__(self) -> None:
        self._open: dict[str, object] = {}
        self.probes: dict[str, dict] = {}  # each device's probe, read once (check_cores)

    def __call__(self, device: str):
        """``device``'s transport, opened on first use (a failure to open is not kept)."""
        if device not in self._open:
            self._open[device] = open_transport(device)
        return self._open[device]

    def close(self) -> None:
        for transport in self._open.values():
            transport.close()
        self._open.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def validate_devices(devices, links: Links | None = None) -> None:
    """Fail fast on unknown device names, and on an SSH key file or known_hosts that cannot
    work, before any work starts."""
    for d in devices:
        with _link(d, links) as transport:
            check_setup = getattr(transport, "check_setup", None)
            if check_setup is not None:
                check_setup()


def lab_session(spec: SweepSpec, lab):
    """The lab the sweep runs on, opened with ``lab`` (a ``LabSession`` class) and its devices
    checked, or None for this host's devices."""
    if not spec.lab:
        return None
    if (spec.native or spec.input_shapes or spec.inputs_file or spec.scoped_inputs
            or spec.input_values):
        raise UsageError("--lab sweeps measure with the device agent, from aiot's own inputs",
                         "drop --native / --input-shape / --inputs / --input-value, or sweep on "
                         "the host the device hangs off")
    if lab is None:  # a caller of the engine that drives no lab
        raise UsageError("--lab needs a driver that opens the lab", "run the sweep with aiot sweep --lab")
    session = lab(spec.lab)
    session.check_devices(list(spec.devices))
    return session


def with_vias(requests: list[RunRequest], vias, native: str | None) -> list[RunRequest]:
    """Each request once per ``--via``; app runs only on ADB devices and with the agent."""
    vias = list(vias or ["shell"])
    if vias == ["shell"]:
        return requests
    if "app" in vias:
        check_native_via(native, vias)
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


def reach_devices(devices, links: Links | None = None) -> None:
    """Every SSH device answers now: one line naming an unreachable one, before any
    conversion, rather than failed records after them and the campaign's retries.

    ADB devices are asked by :func:`require_agents`; the local device is always there.
    """
    def answers(transport) -> None:
        if transport.kind == "ssh":
            transport.shell(["true"], timeout=60)

    _each_device(devices, answers, links)


def require_agents(requests: list[RunRequest], links: Links | None = None) -> None:
    """Every device that runs the agent has a Python for it (a phone: after devices setup)."""
    _each_device(dict.fromkeys(r.device for r in requests if not r.native), require_agent_python,
                 links)


def _each_device(devices, check, links: Links | None = None) -> None:
    """``check(transport)`` for each device. A device out of reach right now stops a sweep of
    that device alone (one line, nothing stored); among several, the others go on and the
    campaign retries it with backoff and records its runs skipped if it stays away, as it does
    for a link that drops mid-sweep. A wrong key, host key or missing Python stops any sweep."""
    devices = list(devices)
    for device in devices:
        try:
            with _link(device, links) as transport:
                check(transport)
        except AiotError as exc:
            if len(devices) == 1 or not is_transient(exc):
                raise
            notices.warn(f"{device} is out of reach now ({exc.message}): "
                         "its runs are retried, then skipped if it stays away")


def check_cores(requests: list[RunRequest], policy: ValidityPolicy | None = None,
                links: Links | None = None) -> list[str]:
    """Check each device's cores against its runs before any of them starts: one line per
    device (and ``--cluster``) whose runs ask for more threads than it has cores (those runs
    will be INVALID). Each device is probed once (one shell round trip, no agent).

    Raises:
        UsageError: a device has no ``--cluster`` of that name (its clusters are listed).
    """
    wanted: dict[tuple[str, str | None], set[int]] = {}
    for r in requests:
        wanted.setdefault((r.device, r.cluster), set()).add(r.threads)
    infos: dict[str, dict] = {}
    lines = []
    for (device, cluster), threads in wanted.items():
        if device not in infos:
            infos[device] = _probe(device, required=any(c for d, c in wanted if d == device),
                                   links=links)
        if infos[device] is None:  # out of reach now: the campaign retries it, then skips it
            continue
        try:
            cpus = cluster_cpus(infos[device], cluster) if cluster else None
        except UsageError as exc:
            raise UsageError(f"'{device}': {exc.message}", exc.hint) from None
        line = threads_warning(device if not cluster else f"{device} ({cluster} cluster)",
                               sorted(threads), infos[device], cpus, policy)
        if line:
            lines.append(line)
    return lines


def _probe(device: str, required: bool, links: Links | None = None) -> dict | None:
    """The device's probe; None when it cannot be had now and nothing depends on it."""
    if links is not None and device in links.probes:
        return links.probes[device]
    try:
        with _link(device, links) as transport:
            info = transport.info()
    except AiotError:
        if required:  # a --cluster cannot be checked without it
            raise
        return None
    if links is not None:
        links.probes[device] = info
    return info


@contextmanager
def _link(device: str, links: Links | None):
    """``device``'s transport: the shared one of ``links``, else one opened for this check."""
    if links is not None:
        yield links(device)
        return
    transport = open_transport(device)
    try:
        yield transport
    finally:
        transport.close()


# -- what was pushed, the weights ------------------------------------------------------------------

def last_pushed(spec: SweepSpec, results_dir: Path) -> list[RunRequest]:
    """The runs of a sweep without models: each device's last pushed model and format (``aiot
    push``), with its weights, at ``spec``'s threads, delegates and clusters.

    Raises:
        UsageError: nothing was pushed to a device yet.
    """
    dataset = check_data_options(None, spec.dataset, spec.limit)
    with open_store(results_dir) as store:
        pushes = {d: store.last_push(d) for d in spec.devices}
    missing = [d for d, p in pushes.items() if p is None]
    if missing:
        raise UsageError(f"nothing was pushed to {', '.join(missing)} yet, and no --model given",
                         f"push a model first: aiot push --device {missing[0]} --model "
                         "resnet18_bnn, or name one with --model")
    inputs, inputs_sha = check_inputs_file(spec.inputs_file)
    requests = []
    for device, pushed in pushes.items():
        targets = resolve_targets([pushed.reference], [pushed.format], pushed.binarize)
        notices.say(f"{device}: sweeping what was last pushed, {targets[0][0].label()} as "
                    f"{pushed.format}")
        requests += expand_targets([device], targets, list(spec.threads),
                                   delegates=list(spec.delegates) if spec.delegates else None,
                                   clusters=list(spec.clusters) if spec.clusters else None,
                                   params=spec.params, dataset=dataset,
                                   dataset_limit=spec.limit, native=spec.native, binary=spec.binary,
                                   weights=Path(pushed.weights) if pushed.weights else None,
                                   binarize=pushed.binarize,
                                   inputs=inputs, inputs_sha256=inputs_sha,
                                   input_values=spec.input_values or None)
    return requests


def with_weights(requests: list[RunRequest], dataset: str | None) -> list[RunRequest]:
    """Each request with the weights it runs with: ``--weights`` as given, else its model's
    default (:func:`aiot.host.engine.weights.choose_weights`: the newest ``aiot train`` of it on
    ``dataset``); says once which were chosen, and warns when accuracy is measured untrained."""
    chosen: dict[tuple, WeightsChoice] = {}
    done = []
    for r in requests:
        if r.weights is not None:
            done.append(replace(r, weights_origin=r.weights_origin or GIVEN))
            continue
        key = (r.model, r.binarize, r.model_path)
        if key not in chosen:
            chosen[key] = (WeightsChoice(None, OWN) if r.model_path is not None
                           else choose_weights(_resolved(r), None, dataset))
        done.append(replace(r, weights=chosen[key].path, weights_origin=chosen[key].origin))
    announce_weights([(model, binarize, c) for (model, binarize, _), c in chosen.items()], dataset)
    return done


def _train_command(model: str, binarize: str | None) -> str:
    """The ``aiot train`` that makes weights for ``model`` (``tiny_cnn_lsq4``: ``aiot train
    tiny_cnn --quantize lsq:4``)."""
    try:
        ref = resolve_model(model, quantized_ok=True)
    except AiotError:
        ref = None
    if ref is not None and ref.quantize:
        return f"aiot train {ref.name} --quantize {ref.quantize}"
    return f"aiot train {model}" + (f" --binarize {binarize}" if binarize else "")


def _resolved(request: RunRequest):
    """The request's model as resolved by :func:`resolve_targets` (no name resolved twice)."""
    ref = request.resolved()
    return ref if not isinstance(ref, str) else resolve_model(ref, request.binarize, quantized_ok=True)


def announce_weights(chosen: list[tuple], dataset: str | None) -> None:
    """For ``(model, binarize, WeightsChoice)`` triples: one line per model whose weights
    were picked for it (a cached training), and one warning for the models whose accuracy
    is measured untrained (chance level, not the model's)."""
    for model, binarize, choice in chosen:
        if choice.origin == TRAINED:
            notices.say(f"{model_label(model, binarize)}: weights {choice.describe()}, "
                        "the newest aiot train (--weights names others)")
    untrained = [(m, b) for m, b, c in chosen if c.untrained]
    if untrained and dataset:
        model, binarize = untrained[0]
        train = _train_command(model, binarize)
        names = ", ".join(model_label(m, b) for m, b in untrained)
        notices.warn(f"{names}: {UNTRAINED}, so the accuracy on {dataset} is chance level; "
                     f"train first: {train} --dataset {dataset}")
