"""Execute one RunRequest end to end and record it."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from aiot.converters import get_converter
from aiot.converters.api import convert_model
from aiot.converters.inputs import InputFeed
from aiot.converters.naming import artifact_files
from aiot.converters.sidecar import read_sidecar
from aiot.core.errors import AiotError, UsageError, failure_reason, is_transient
from aiot.core.paths import cache_dir
from aiot.device_agent.spec import RunSpec
from aiot.host import native
from aiot.host.devices.affinity import cluster_cpus, cpu_mask
from aiot.host.devices.agent_messages import check_columns
from aiot.host.devices.deploy import Pushed, push_beside, push_file, run_with_intact_blobs
from aiot.host.devices.telemetry import read_telemetry
from aiot.host.engine.cooldown import (
    CooldownPolicy,
    detect_throttling,
    device_state_changes,
    wait_for_cooldown,
)
from aiot.host.engine.gates import (
    check_delegate,
    check_native_formats,
    check_native_via,
    check_runnable,
    native_binary,
)
from aiot.host.engine.profiles import agent_profile
from aiot.host.engine.runs import RunListener, RunRequest
from aiot.host.engine.shards import prepare_shard
from aiot.host.engine.signature import artifact_shapes, artifact_signature
from aiot.host.engine.user_artifact import user_artifact
from aiot.host.engine.validity import judge
from aiot.host.engine.weights import weights_provenance
from aiot.host.engine.workspace import Workspace
from aiot.host.store.provenance import base_provenance
from aiot.host.store.store import RunRecord, Store

log = logging.getLogger(__name__)

#: One conversion at a time in this process. A sweep's device workers reach the same model
#: and format together; converting it once lets the others reuse the cached artifact, and
#: torch's export machinery keeps global state that is not thread-safe (two concurrent
#: ``torch.manual_seed`` calls raised KeyError 'custom' in ``fx.traceback.annotate``).
_CONVERSION = threading.Lock()


def _agent_spec(request: RunRequest, artifact: str, backend: str, dataset: dict | None,
                cpus: list[int] | None = None, inputs: str | None = None,
                sidecar: dict | None = None) -> dict:
    """The run spec sent to the agent. ``input_shapes`` and ``inputs`` go on the wire only
    when asked (``RunSpec.to_wire``): an older agent on a device refuses no spec it was sent
    before. Shapes go to a user's artifact only (an artifact aiot made has the shapes it was
    made with). An artifact aiot made from a user's model has its integer inputs' ranges in
    its ``sidecar``; they, and ``--input-value`` names, reach the agent under the names the
    runtime knows the inputs by (a .pte's are positional)."""
    p = request.params
    runtime = {i["name"]: i.get("runtime_name", i["name"]) for i in (sidecar or {}).get("inputs") or ()}
    values = {runtime.get(name, name): value for name, value in request.input_values or ()}
    ranges = {runtime[i["name"]]: {"range": i["range"], "range_from": i.get("range_from", "model")}
              for i in (sidecar or {}).get("inputs") or () if "range" in i}
    return RunSpec(
        backend=backend, artifact=artifact, threads=request.threads, warmup_runs=p.warmup_runs,
        warmup_min_s=p.warmup_min_s, min_runs=p.min_runs, min_s=p.min_s, max_s=p.max_s,
        seed=p.seed, dataset=dataset, target_cv=p.target_cv, max_runs=p.max_runs, cpus=cpus,
        input_shapes=_artifact_shapes(request) or None, inputs=inputs or None,
        input_values=values or None, input_ranges=ranges or None,
    ).to_wire()


def _artifact_shapes(request: RunRequest) -> dict | None:
    """The ``--input-shape`` values that name inputs of the request's own artifact file."""
    if not request.input_shapes:
        return None
    return artifact_shapes(request, artifact_signature(request))


def _affinity(request: RunRequest, device_info: dict) -> dict | None:
    """The CPUs a run is pinned to (its ``--cluster``), as recorded in provenance."""
    if not request.cluster:
        return None
    cpus = cluster_cpus(device_info, request.cluster)
    return {"cluster": request.cluster, "cpus": cpus, "mask": cpu_mask(cpus)}


def _push_companions(transport, converter, artifact: Path, pushed: Pushed) -> list[Pushed]:
    """The other files of a multi-file artifact (an ONNX model's external data), each pushed
    beside it under the name the model gives it."""
    folder = Path(artifact).resolve().parent
    return [push_beside(transport, pushed, extra, extra.resolve().relative_to(folder).as_posix())
            for extra in artifact_files(converter, artifact)[1:]]


def _push_dataset(request: RunRequest, workspace: Workspace, transport) -> dict[str, Pushed]:
    if not request.dataset:
        return {}
    x_path, y_path = prepare_shard(request.model, request.dataset, request.dataset_limit,
                                   request.params.seed, cache_dir())
    return {"x": push_file(transport, x_path), "y": push_file(transport, y_path)}


def _measure(request: RunRequest, workspace: Workspace, listener: RunListener,
             provenance: dict) -> dict:
    """Convert, push and run; fills ``provenance`` and returns the finishing columns."""
    converter = get_converter(request.format)
    provenance["via"] = request.via
    # The gates preflight asked of the whole sweep, asked again of a request built without it.
    check_native_via(request.native, [request.via])
    if request.native:
        return _measure_native(request, workspace, listener, provenance)
    check_delegate(request.native, request.delegate)
    check_runnable(request.format, request.native)
    conv, sidecar = _convert(request, workspace, listener)
    listener.on_stage(request, "push")
    session = workspace.session(request.device, request.via)
    provenance["device"] = workspace.device_info(request.device)
    pushed = push_file(session.transport, conv.artifact, conv.sha256)
    beside = _push_companions(session.transport, converter, conv.artifact, pushed)
    data = _push_dataset(request, workspace, session.transport)
    inputs = push_file(session.transport, request.inputs) if request.inputs else None
    affinity = _affinity(request, provenance["device"])
    spec = _agent_spec(request, pushed.remote, converter.backend,
                       {k: v.remote for k, v in data.items()} or None,
                       affinity["cpus"] if affinity else None, inputs.remote if inputs else None,
                       sidecar)
    listener.on_stage(request, "measure")
    blobs = [pushed, *beside, *data.values(), *([inputs] if inputs else [])]
    result, repushed = run_with_intact_blobs(session.transport, blobs, lambda: session.run(
        spec, timeout=request.params.run_timeout(),
        on_progress=lambda phase, done, total: listener.on_progress(request, phase, done, total)))
    if repushed:  # the device's copy was damaged in place ("already on device" was wrong)
        provenance["repushed"] = repushed
    if request.params.memory:
        listener.on_stage(request, "memory")
        result["memory"] = session.memory(spec, timeout=request.params.run_timeout())
    if request.params.profile:
        listener.on_stage(request, "profile")
        result["profile"] = agent_profile(session, spec, request.params.run_timeout())
    provenance.update(_artifact_provenance(conv, sidecar, request.weights_origin), affinity=affinity,
                      runtime={"backend": result["backend"], "version": result["runtime_version"]},
                      agent_process=session.process_kind(converter.backend))
    if request.via == "app":
        # How many system calls the app's seccomp filter trapped and the agent skipped.
        provenance["app"] = {**session.provenance(), "sigsys_skipped": result.get("sigsys_skipped")}
    accuracy = result.get("accuracy")
    return {
        "result": result,
        "artifact_sha256": conv.sha256,
        "size_bytes": conv.size_bytes,
        "median_ms": result["stats_ms"]["median"],
        "p90_ms": result["stats_ms"]["p90"],
        "load_ms": result["load_ms"],
        "accuracy": accuracy["top1"] if accuracy else None,
    }


def _convert(request: RunRequest, workspace: Workspace, listener: RunListener):
    """The request's artifact (converted, or reused from the cache) and its sidecar.

    A user's artifact file is measured as it is: no conversion and no parity (there is no
    PyTorch reference), which its sidecar-like facts say.
    """
    if workspace.shipped is not None:  # a lab node: the driver converted and sent it
        return workspace.shipped
    if request.model_path is not None:
        found = user_artifact(request)
        if found is not None:
            return found
    listener.on_stage(request, "convert")
    with _CONVERSION:
        key = _conversion_key(request)
        kept = workspace.conversions.get(key)
        if kept is not None and kept.intact():
            return kept.conv, kept.sidecar
        conv = convert_model(request.resolved(), request.format, workspace.artifacts_dir,
                             weights=request.weights, binarize=request.binarize,
                             options=request.option_dict() or None, input_shapes=request.shapes(),
                             feed=InputFeed(request.input_values or ()))
        kept = Converted.keep(conv, conv.facts or read_sidecar(conv.artifact),
                              artifact_files(get_converter(request.format), conv.artifact))
        workspace.conversions[key] = kept
        return kept.conv, kept.sidecar


def _conversion_key(request: RunRequest) -> tuple:
    """What one conversion depends on: the runs of a campaign that share it share its artifact
    (thread counts, devices, clusters and vias do not change the file)."""
    return (request.model, request.model_sha256, request.reference(), request.format,
            request.weights, request.binarize, request.options, request.input_shapes,
            request.input_values)


@dataclass(frozen=True)
class Converted:
    """An artifact a campaign converted (or verified in the cache) once and keeps for its
    other runs: no model rebuilt, no weights or artifact hashed again per run.

    ``stamps`` are its files' sizes and modification times when it was kept: a file replaced
    or rewritten since (by hand, by another process's conversion) is converted again.
    """

    conv: object
    sidecar: dict
    stamps: tuple

    @classmethod
    def keep(cls, conv, sidecar: dict, files) -> Converted:
        return cls(conv, sidecar, _stamps([*files, conv.sidecar]))

    def intact(self) -> bool:
        """Whether every file is still the one kept (a stat each: no hashing)."""
        try:
            return _stamps(path for path, *_ in self.stamps) == self.stamps
        except OSError:
            return False


def _stamps(paths) -> tuple:
    return tuple((Path(p), st.st_size, st.st_mtime_ns) for p in paths for st in [Path(p).stat()])


def _artifact_provenance(conv, sidecar: dict, weights_origin: str | None = None) -> dict:
    """What a record keeps about the artifact it measured, whoever ran it.

    An artifact aiot converted also says which weights it holds (origin, file name,
    sha256: see :mod:`aiot.host.engine.weights`); a user's artifact file has no such facts.
    """
    facts = {"artifact": {"file": conv.artifact.name, "sha256": conv.sha256,
                          "size_bytes": conv.size_bytes, "parity": conv.parity,
                          # copied from the machine's conversion cache: which conversion
                          **({"from_cache": sidecar["from_cache"]} if sidecar.get("from_cache")
                             else {})},
             "converter": sidecar.get("converter"), "toolchain": sidecar.get("toolchain"),
             "source": sidecar.get("source")}
    source = sidecar.get("source") or {}
    if source and source.get("kind") != "artifact":
        weights = source.get("weights")
        facts["weights"] = weights_provenance(
            Path(weights) if weights else None,
            weights_origin or _origin_from_source(source), source.get("weights_sha256"))
    return facts


def _origin_from_source(source: dict) -> str:
    """A sidecar's weights origin when the run did not say (a request built by API)."""
    if source.get("weights"):
        return "given"
    return "random" if source.get("kind") in (None, "zoo") else "own"


def _measure_native(request: RunRequest, workspace: Workspace, listener: RunListener,
                    provenance: dict) -> dict:
    """Convert, push artifact and binary, run the user's native benchmark tool, parse it."""
    adapter = check_native_formats(request.native, [request.format])
    binary = native_binary(adapter.tool, request.device, request.binary)
    conv, sidecar = _convert(request, workspace, listener)
    listener.on_stage(request, "push")
    transport = workspace.transport(request.device)
    provenance["device"] = workspace.device_info(request.device, agent=False)
    pushed = push_file(transport, conv.artifact, conv.sha256)
    companions = {}
    if request.format == "onnx":  # external data: beside the model, where its runtime looks
        _push_companions(transport, get_converter(request.format), conv.artifact, pushed)
    else:
        for extra in artifact_files(get_converter(request.format), conv.artifact):
            if extra != conv.artifact:  # e.g. Caffe2's init net beside its predict net
                companions[extra.name.split(".")[-2]] = push_file(transport, extra).remote
    deployed = native.ensure_binary(transport, binary)
    shape = _native_input_shape(request, sidecar)
    p = request.params
    affinity = _affinity(request, provenance["device"])
    spec = native.NativeSpec(threads=request.threads if adapter.supports_threads else None,
                             warmup=p.warmup_runs, runs=p.min_runs, delegate=request.delegate,
                             affinity=affinity["mask"] if affinity else None,
                             inputs=(native.InputSpec(shape),), companions=companions)
    listener.on_stage(request, "measure")
    result = native.run_native(transport, adapter, deployed.remote, pushed.remote, spec,
                               timeout=p.run_timeout(), env=deployed.env())
    # The tool's delegation lines, judged for the delegate asked for and against the file.
    result["placement"] = adapter.placement(result, conv.artifact, request.delegate)
    if p.profile:
        listener.on_stage(request, "profile")
        result["profile"] = native.profile_native(transport, adapter, deployed.remote, pushed.remote,
                                                  spec, timeout=p.run_timeout(), env=deployed.env())
    provenance.update(_artifact_provenance(conv, sidecar, request.weights_origin), affinity=affinity,
                      runtime={"backend": result["backend"], "version": result.get("runtime_version"),
                               "binary": binary.name, "binary_digest": deployed.digest})
    stats = result.get("stats_ms") or {}
    return {
        "result": result, "artifact_sha256": conv.sha256, "size_bytes": conv.size_bytes,
        # Most tools print a mean only: the median column stays empty rather than invented.
        "median_ms": stats.get("median"), "p90_ms": stats.get("p90"),
        "load_ms": result.get("load_ms"), "accuracy": None,
    }


def _native_input_shape(request: RunRequest, sidecar: dict) -> tuple[int, ...]:
    """The input shape a native tool is told: the converted model's, or ``--input-shape``."""
    shapes = request.shapes()
    if shapes:
        if len(shapes) != 1:
            raise UsageError("native tools here take one input shape",
                             "give one --input-shape, or time it with the agent")
        return tuple(next(iter(shapes.values())))
    facts = sidecar.get("input")
    if not facts:
        raise UsageError(f"the input shape of {request.model} is not known to aiot",
                         "give --input-shape NAME=1x3x224x224 for the native tool")
    return (facts.get("batch", 1), *facts["shape"])


def skip_run(request: RunRequest, store: Store, sweep_id: str | None, reason: str,
             context: dict | None = None) -> RunRecord:
    """Record ``request`` as skipped with ``reason`` (a sweep keeps a row for every run)."""
    record = store.begin(
        "latency", request.to_spec(), {**base_provenance(), **(context or {})}, sweep_id=sweep_id,
        device=request.device, model=request.model, format=request.format, threads=request.threads,
    )
    store.finish(record.id, "skipped", reason=reason)
    return store.get(record.id)


def measure_run(request: RunRequest, workspace: Workspace, listener: RunListener, provenance: dict,
                cooldown=None) -> dict:
    """The device's side of a run: wait for cool-down, convert (or take the workspace's
    shipped artifact), push, run, and compare the device's state before and after.

    Fills ``provenance`` and returns the record's finishing columns; raises what failed.
    """
    watch = _DeviceWatch(request, workspace, listener, cooldown)
    columns = _measure(request, workspace, listener, provenance)
    provenance["device_state"] = watch.finish()
    return columns


def execute_run(request: RunRequest, store: Store, workspace: Workspace,
                listener: RunListener, sweep_id: str | None = None, context: dict | None = None,
                cooldown=None, measure=measure_run, validity=None) -> RunRecord:
    """Record ``request`` as pending, run it, and close the record as ok or failed.

    Args:
        context: extra provenance (a campaign's sweep seed, order index and attempt).
        cooldown: a :class:`aiot.host.engine.cooldown.CooldownPolicy` gating the run on the device's
            temperature and frequencies, or None.
        measure: :func:`measure_run`'s stand-in; a lab runs it on the node owning the device
            (:class:`aiot.host.lab.session.LabDevice`), while this store stays the one writer.
        validity: the ValidityPolicy that judges the run (None: ``AIOT_VALIDITY``'s); the
            limits it used are stored with the verdict.
    """
    provenance = {**base_provenance(), **(context or {})}
    if request.batch_defaulted:  # the free batch dims aiot set to 1 (the spec has the shapes)
        provenance["input_shapes_defaulted"] = list(request.batch_defaulted)
    record = store.begin(
        "latency", request.to_spec(), provenance, sweep_id=sweep_id, device=request.device,
        model=request.model, format=request.format, threads=request.threads,
    )
    try:
        columns = measure(request, workspace, listener, provenance, cooldown)
    except KeyboardInterrupt:
        store.finish(record.id, "failed", reason="interrupted by user", provenance=provenance)
        raise
    except Exception as exc:
        if not isinstance(exc, AiotError):
            # Not a failure aiot foresaw: its one line is the record's reason (the run's output
            # and the table show it); the traceback is for --verbose, and the sweep goes on.
            log.debug("run %s failed unexpectedly", request.label(), exc_info=True)
        error = {"type": getattr(exc, "remote_type", type(exc).__name__), "transient": is_transient(exc)}
        store.finish(record.id, "failed", reason=failure_reason(exc), provenance=provenance,
                     result={"error": error})
    else:
        if (wrong := check_columns(columns)) is not None:  # a native tool's output too
            store.finish(record.id, "failed", reason=f"{request.device}: {wrong}",
                         provenance=provenance, result={"error": {"type": "DeviceMessageError",
                                                                  "transient": False}})
            return store.get(record.id)
        verdict = _verdict(request, columns["result"], provenance, validity)
        columns["result"]["validity"] = verdict
        store.finish(record.id, "ok", provenance=provenance, validity=verdict["verdict"], **columns)
    return store.get(record.id)


class _DeviceWatch:
    """Telemetry around one run: gate its start on cool-down, compare before and after.

    The device's baseline (temperature, frequency caps) is taken once per workspace, at its
    first run; every run then waits until the device is back near it (no fixed sleep), and
    throttling or a battery/charger change during the run invalidates it.
    """

    def __init__(self, request: RunRequest, workspace: Workspace, listener: RunListener,
                 policy=None) -> None:
        self.policy = policy or CooldownPolicy()
        # Agent runs ask the agent's session (no shell round trip per reading); native runs
        # run the telemetry script over the device's transport.
        self.source = (partial(read_telemetry, workspace.transport(request.device)) if request.native
                       else workspace.session(request.device, request.via).telemetry)
        self.baseline = workspace.baseline(request.device, self.source)
        self.cooldown = None
        if policy is not None:
            listener.on_stage(request, "cool-down")
            self.cooldown = wait_for_cooldown(self.source, self.baseline, self.policy,
                                              sleep=getattr(workspace, "pause", time.sleep))
        # The gate's last reading is the state the run starts from: no second round trip.
        self.before = self.cooldown.after if self.cooldown else self.source()

    def finish(self) -> dict:
        """Telemetry after the run and what changed, for the record's provenance."""
        after = self.source()
        return {
            "baseline": self.baseline.to_dict(),
            "cooldown": self.cooldown.to_dict() if self.cooldown else None,
            "before": self.before.to_dict(), "after": after.to_dict(),
            "throttling": detect_throttling(self.before, after, self.baseline, self.policy),
            "changes": device_state_changes(self.before, after),
        }


def _verdict(request: RunRequest, result: dict, provenance: dict, policy=None) -> dict:
    """VALID / INVALID with reasons and the limits used, from the samples, the telemetry and
    the device (``policy``: the run's ValidityPolicy, None for AIOT_VALIDITY's)."""
    state = provenance.get("device_state") or {}
    affinity = provenance.get("affinity") or {}
    return judge(result, request.params.min_runs, provenance.get("device") or {},
                 throttling=state.get("throttling"), state_changes=state.get("changes"),
                 threads=request.threads, cpus=affinity.get("cpus"), policy=policy)
