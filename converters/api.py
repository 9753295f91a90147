"""The one entry point orchestration uses: model name + format → verified artifact + sidecar."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import aiot
from aiot.converters import conversion_cache
from aiot.converters.base import get_converter, resolve_options, several_input_formats
from aiot.converters.graph import trace
from aiot.converters.inputs import InputFeed, as_args
from aiot.converters.naming import artifact_files, artifact_name, artifact_variant
from aiot.converters.origin import (  # noqa: F401 - api's names for them too
    RANDOM_INIT_SEED,
    Source,
    build_source_model,
    load_source,
    source_weights,
    zoo_ref,
)
from aiot.converters.parity import (  # noqa: F401 - PARITY_DATASET: api's name for it too
    PARITY_DATASET,
    check_parity,
    compare_outputs,
    parity_image_count,
)
from aiot.converters.sidecar import read_sidecar, sidecar_path, verify_artifact, write_sidecar_facts
from aiot.converters.sign_parity import check_sign_parity
from aiot.core import stage_limit
from aiot.core.diskfull import as_disk_error
from aiot.core.errors import (
    AccuracyMismatch,
    AiotError,
    ArtifactError,
    ConversionError,
    MissingDependency,
    UsageError,
    first_line,
)
from aiot.core.fileio import sha256_file
from aiot.core.quiet import toolchain_output_to_log
from aiot.device_agent.signature import positional
from aiot.models.model_ref import ZOO, ModelRef, a_format, resolve_model
from aiot.models.quant.deploy import QDQ_MIN_TOP1, deployment_hint, deployment_refusal
from aiot.models.quant.methods import parse_quantize
from aiot.models.zoo import get_model_spec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConversionResult:
    """A converted artifact with its sidecar and parity report."""

    artifact: Path
    sidecar: Path
    parity: dict
    sha256: str
    size_bytes: int  # all files of the artifact (Caffe2: predict net + init net)
    seconds: float
    cached: bool
    #: The sidecar's contents as written or verified here (callers need not read it back).
    facts: dict = field(default_factory=dict, compare=False, repr=False)


def deployable_model(model, converter, example):
    """What the converter exports: a binarized model frozen into BinaryConv2d layers.

    Binarized models of a deployable algorithm are frozen for every format (the frozen
    model is exactly the eval-mode one, and BinaryConv2d is what the binary emitters read);
    others (XNOR, XNOR++) reach float formats as they are and binary formats not at all.
    """
    from aiot.models.bibench import freeze, verdict

    algorithm = getattr(model, "binarized_with", None)
    if algorithm is None:
        return model
    deployable = all(not verdict(algorithm, lib).refused for lib in ("lce", "dabnn"))
    if converter.binary_native or deployable:
        return freeze(model, converter.name, example)
    return model


def _exported(model, fmt: str):
    """What the exporter gets: an 8-bit quantized model rewritten with explicit Q/DQ
    (:mod:`aiot.converters.qdq`, in the style of its format: ONNX's QDQ for ``onnx`` and
    ``ort``); parity still runs against the fake-quantized model."""
    if getattr(model, "quantized_with", None) is None:
        return model
    from aiot.converters.qdq import qdq_model

    return qdq_model(model, fmt)


def state_sha256(model) -> str:
    """Hash of a model's parameters and buffers, independent of how they were loaded."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def _reusable(converter, artifact: Path, source_hash: str, options: dict,
              inputs: list | None = None) -> dict | None:
    """The sidecar of an existing artifact if it was made from the same model and options
    (and, for a user model, the same inputs: names, dtypes, draw ranges and held values)."""
    if not all(f.exists() for f in artifact_files(converter, artifact)) or not sidecar_path(artifact).exists():
        return None
    try:
        sidecar = verify_artifact(artifact)
    except ArtifactError as exc:
        log.info("re-exporting %s: %s", artifact.name, exc.message)
        return None
    companions = sidecar.get("artifact", {}).get("companions", {})
    for path in artifact_files(converter, artifact):
        if path != artifact and companions.get(path.name) != sha256_file(path):
            log.info("re-exporting %s: %s changed since conversion", artifact.name, path.name)
            return None
    same = (sidecar.get("source", {}).get("state_sha256") == source_hash
            and sidecar.get("converter", {}).get("options") == options
            and sidecar.get("aiot_version") == aiot.__version__
            and (inputs is None or sidecar.get("inputs") == inputs)
            # a parity report from before verdicts may have passed vacuously: check again
            and (sidecar.get("parity") is None or "verdict" in sidecar["parity"]))
    return sidecar if same else None


def _check_ready(fmt: str, options: dict | None, binarize: str | None = None):
    converter = get_converter(fmt)
    if binarize:
        check_deployable(converter, binarize)
    resolved = resolve_options(converter, options)
    converter.check_options(resolved)
    avail = converter.availability()
    if not avail.ok:
        raise MissingDependency(f"the {converter.name} toolchain", avail.extra or "all", avail.reason,
                                hint=avail.hint)
    return converter, resolved


def check_quantized_deployable(converter, quantize: str) -> None:
    """Refuse, before any work, a quantized model that does not deploy in this format
    (:func:`aiot.models.quant.deploy.deployment_refusal` decides)."""
    chosen = parse_quantize(quantize)
    reason = deployment_refusal(chosen, converter.name)
    if reason:
        raise ConversionError(converter.name, "check", reason, deployment_hint(chosen))


def check_deployable(converter, binarize: str) -> None:
    """Refuse, before any work, an unknown algorithm or one BiBench's Table 4 says cannot deploy."""
    from aiot.models.bibench import LIBRARIES, get_algorithm, verdict

    get_algorithm(binarize)  # UnknownName with close names
    if converter.name in LIBRARIES and verdict(binarize, converter.name).refused:
        found = verdict(binarize, converter.name)
        raise ConversionError(converter.name, "check", f"{found.algorithm} is not deployable: "
                              f"{found.reason}", "deploy bnn, dorefa, bireal, reactnet, recu or fda")


def convert_model(model_name: str | ModelRef, fmt: str, out_dir: Path, weights: Path | None = None,
                  options: dict | None = None, parity_samples: int = 8, dataset_samples: int | None = None,
                  reuse: bool = True, progress: Callable[[str], None] | None = None,
                  binarize: str | None = None,
                  input_shapes: dict[str, list[int]] | None = None,
                  feed: InputFeed | None = None) -> ConversionResult:
    """Convert a model, verify the artifact loads in its runtime, and check parity.

    ``model_name`` is any model reference that converts (:mod:`aiot.models.model_ref`): a zoo
    name, ``<zoo>_<algorithm>``, ``file.py:factory``, ``module:factory`` or a ``.pt2``, or the
    :class:`~aiot.models.model_ref.ModelRef` a caller already resolved (``binarize`` is then
    the reference's own); ``input_shapes`` gives a factory that returns a bare module its
    example input; ``feed`` what the user gives the parity check of a user model
    (:class:`~aiot.converters.inputs.InputFeed`: held values, a batch of real inputs).
    ``parity_samples`` noise inputs and ``dataset_samples`` real test images
    are checked (None: as many as the parity rule needs,
    :func:`~aiot.converters.parity.parity_image_count`).

    The stages, in order: :func:`_plan` (everything that can be validated: format, options,
    toolchain, model, weights; before any work), :func:`_reusable` (the cached artifact of the
    same model and options in ``out_dir``, else the machine's copy,
    :mod:`~aiot.converters.conversion_cache`), :func:`_export_artifact`,
    :func:`_check_artifact` (parity: a failure leaves neither artifact nor sidecar behind) and
    :func:`_write_facts` (the sidecar, and the machine's copy). Load, export and parity have
    time limits (:mod:`aiot.core.stage_limit`); a stop before the sidecar leaves no artifact.

    Raises:
        UnknownName, UsageError, MissingDependency: bad input, before any work.
        ConversionError, AccuracyMismatch, StageTimeout: the export or its verification failed.
    """
    started = time.perf_counter()
    request = _request_key(model_name, fmt, out_dir, weights, options, binarize, input_shapes,
                           feed, (parity_samples, dataset_samples)) if reuse else None
    recalled = _recalled(request, out_dir, started) if request else None
    if recalled is not None:
        return recalled
    what = f"{model_name.label() if isinstance(model_name, ModelRef) else model_name} to {fmt}"
    with stage_limit.stage(what, "load"):  # a user's factory runs in a child
        plan = _plan(model_name, fmt, out_dir, weights, options, binarize, input_shapes, feed)
    converter, artifact = plan.converter, plan.artifact
    cached = _reusable(converter, artifact, plan.source_hash, plan.options,
                       plan.source.inputs) if reuse else None
    if not cached:
        key = _cache_key(plan, parity_samples, dataset_samples)
        cached = conversion_cache.fetch(converter, key, artifact, lambda kept: _reusable(
            converter, kept, plan.source_hash, plan.options, plan.source.inputs)) if reuse else None
    if cached:
        if request:
            conversion_cache.remember(request[0], artifact, plan.source_hash, plan.source.inputs)
        return _cached_result(artifact, cached, started)
    sidecar_path(artifact).unlink(missing_ok=True)  # never leave an old sidecar beside a new file
    _notify(progress, "export")
    with stage_limit.stage(what, "export"):
        exported = _export_artifact(plan)
    try:  # from here the artifact file is this conversion's: it goes if the sidecar does not come
        with stage_limit.stage(what, "parity"):
            parity = _check_artifact(plan, exported, parity_samples, dataset_samples, progress)
            if exported.deployed is not None:
                exported.deployed["training_graph"] = _change_cost(
                    exported.trained, exported.model, plan.source, parity_samples, dataset_samples)
        sidecar, written, total = _write_facts(plan, exported, parity, time.perf_counter() - started)
    except BaseException:  # Ctrl-C, a failure: neither artifact nor sidecar is left behind
        for path in artifact_files(converter, artifact):
            path.unlink(missing_ok=True)
        raise
    conversion_cache.keep(converter, key, artifact)  # a stop now: the artifact is kept
    if request:
        conversion_cache.remember(request[0], artifact, plan.source_hash, plan.source.inputs)
    return ConversionResult(artifact, sidecar, parity, written["artifact"]["sha256"], total,
                            time.perf_counter() - started, cached=False, facts=written)


def _cached_result(artifact: Path, sidecar: dict, started: float) -> ConversionResult:
    return ConversionResult(artifact, sidecar_path(artifact), sidecar["parity"],
                            sidecar["artifact"]["sha256"],
                            sidecar["artifact"].get("total_bytes", sidecar["artifact"]["size_bytes"]),
                            time.perf_counter() - started, cached=True, facts=sidecar)


def _request_key(model_name, fmt: str, out_dir: Path, weights: Path | None, options: dict | None,
                 binarize: str | None, input_shapes: dict | None, feed: InputFeed | None,
                 parity: tuple) -> tuple[str, object, dict] | None:
    """``(key, converter, resolved options)`` of a request whose artifact can be recalled
    without building its model (:func:`aiot.converters.conversion_cache.recalled`), else None.

    Only a zoo model (binarized or not) whose weights are a file the caller names or a seeded
    initialisation qualifies: its source is aiot's own code (in the key) and that file, stamped
    by size and modification time. User code, quantized models, packaged weights, held input
    values and given input shapes always go the whole way.
    """
    if not conversion_cache.enabled() or input_shapes or (feed and (feed.values or feed.npz)):
        return None
    try:
        ref = (model_name if isinstance(model_name, ModelRef)
               else resolve_model(model_name, binarize, quantized_ok=True))
        if ref.kind != ZOO or ref.quantize:
            return None
        if weights is None and not ref.binarize and get_model_spec(ref.name).default_weights:
            return None
        converter, resolved = _check_ready(fmt, options, ref.binarize)
        stamp = None
        if weights is not None:
            found = Path(weights).resolve().stat()
            stamp = [str(Path(weights).resolve()), found.st_size, found.st_mtime_ns]
    except (AiotError, OSError):
        return None  # the whole way says what is wrong, in its own words
    identity = {"ref": [ref.kind, ref.name, ref.binarize], "format": converter.name,
                "options": resolved, "out_dir": str(Path(out_dir).resolve()), "weights": stamp,
                "parity": list(parity)}
    return conversion_cache.source_key(identity), converter, resolved


def _recalled(request: tuple, out_dir: Path, started: float) -> ConversionResult | None:
    """The artifact an earlier conversion of the same request made, if it is still intact and
    its sidecar names the same source and options (:func:`_reusable`); None otherwise."""
    key, converter, resolved = request
    memo = conversion_cache.recalled(key)
    if memo is None:
        return None
    artifact = Path(out_dir) / memo["artifact"]
    sidecar = _reusable(converter, artifact, memo["source_hash"], resolved, memo.get("inputs"))
    if sidecar is None:
        return None
    log.info("%s: recalled without building the model", artifact.name)
    return _cached_result(artifact, sidecar, started)


def _cache_key(plan: _Plan, parity_samples: int, dataset_samples: int | None) -> str:
    """The machine conversion cache's key for ``plan`` (:mod:`aiot.converters.conversion_cache`)."""
    source = plan.source
    given = None if source.given is None else [
        hashlib.sha256(t.numpy().tobytes()).hexdigest() for t in as_args(source.given)]
    what_in = source.input if source.inputs is None else {
        "input": source.input, "inputs": source.inputs, "given": given}
    return conversion_cache.conversion_key(
        plan.converter, plan.artifact.name, plan.options, plan.source_hash, source.facts,
        what_in, (parity_samples, dataset_samples))


@dataclass(frozen=True)
class _Plan:
    """A conversion once everything is checked: what it starts from and where it writes."""

    converter: object
    options: dict  # resolved: every option of the format, defaults filled in
    source: Source
    source_hash: str  # the source model's state (a cached artifact must match it)
    artifact: Path


def _plan(model_name, fmt: str, out_dir: Path, weights: Path | None, options: dict | None,
          binarize: str | None, input_shapes: dict | None, feed: InputFeed | None) -> _Plan:
    """Stage 1: resolve and check everything, load the source model and name its artifact."""
    ref = (model_name if isinstance(model_name, ModelRef)
           else resolve_model(model_name, binarize, quantized_ok=True))
    if ref.is_artifact:
        raise UsageError(f"{ref.name} is already {a_format(ref.format)} artifact: there is "
                         "nothing to convert", "measure it as it is: aiot run --model FILE")
    converter, resolved = _check_ready(fmt, options, ref.binarize)
    if ref.quantize:
        check_quantized_deployable(converter, ref.quantize)
    source = load_source(ref, weights, input_shapes, feed)
    if source.inputs is not None and not converter.keeps_input_names:
        source.inputs = [{**i, "runtime_name": positional("input", k)}
                         for k, i in enumerate(source.inputs)]
    if source.several and not converter.several_inputs:
        raise ConversionError(converter.name, "check", f"{ref.name} takes {len(source.example)} "
                              f"inputs ({', '.join(i['name'] for i in source.inputs)}) and a "
                              f"{converter.name} artifact holds one",
                              "convert to " + ", ".join(several_input_formats()))
    # Weights named by the caller (--weights, a cached training) mark the file; a zoo
    # model's own init (packaged or seeded) is its plain name.
    variant = artifact_variant(converter, resolved, None if _own_weights(source, weights)
                               else source.facts.get("weights_sha256"))
    artifact = Path(out_dir) / artifact_name(source.label, converter.name, converter.extension, variant)
    return _Plan(converter, resolved, source, state_sha256(source.model), artifact)


@dataclass
class _Exported:
    """What the export stage made: the model the runtime runs and the converter's facts."""

    trained: object  # the training graph
    model: object  # what was exported (a deployed form of ``trained`` where the runtime needs one)
    deployed: dict | None  # what the deployed form changed, or None
    facts: dict  # the converter's own (ops, versions), for the sidecar


def _export_artifact(plan: _Plan) -> _Exported:
    """Stage 3: the deployable model exported to the artifact file."""
    converter, example = plan.converter, plan.source.example
    model = deployable_model(plan.source.model, converter, example)
    trained, model, deployed = _deployed_form(converter, model, example)
    facts = _export(converter, _exported(model, converter.name), example, plan.artifact, plan.options,
                    plan.source.spec if converter.uses_spec else None)
    return _Exported(trained, model, deployed, facts)


def _check_artifact(plan: _Plan, exported: _Exported, parity_samples: int,
                    dataset_samples: int | None, progress) -> dict | None:
    """Stage 4: parity of the artifact in its runtime (or reference executor) with PyTorch
    (a failure removes the artifact's files: :func:`convert_model`). None where the converter
    checks no parity."""
    converter, model, source, artifact = plan.converter, exported.model, plan.source, plan.artifact
    runner = (converter.backend or converter.reference_outputs) if converter.parity_check else None
    if runner is None:
        return None
    _notify(progress, "parity")
    tolerance = _tolerance(converter, plan.options, model)
    try:
        if _signs_decide(converter, model):  # the signs decide, not top-1
            return _binary_parity(converter, runner, artifact, model, source, parity_samples,
                                  parity_image_count(dataset_samples, None), tolerance)
        images = source.images(parity_image_count(dataset_samples, tolerance["min_top1"]))
        return check_parity(converter.name, runner, artifact, model,
                            source.noise(parity_samples, seed=1), dataset=images, **tolerance)
    except ArtifactError as exc:  # not a damaged file: one written a moment ago
        raise ConversionError(converter.name, "verify", "its runtime refuses the file just "
                              f"written ({exc.message})", f"{converter.backend} cannot run "
                              "what this export wrote (a converter bug, not a damaged file): "
                              "run with --verbose for the runtime's log; report it") from None


def _write_facts(plan: _Plan, exported: _Exported, parity: dict | None,
                 seconds: float) -> tuple[Path, dict, int]:
    """Stage 5: the sidecar, written atomically; ``(its path, its contents, the artifact's
    total bytes)``. A sidecar that cannot be written takes the artifact with it (an artifact
    without its sidecar is never reused). ``seconds``: how long the conversion took (export
    and parity), kept so that later work can be estimated from it."""
    converter, artifact, source, model = plan.converter, plan.artifact, plan.source, exported.model
    sha, size = sha256_file(artifact), artifact.stat().st_size
    total = sum(p.stat().st_size for p in artifact_files(converter, artifact))
    try:
        sidecar, written = write_sidecar_facts(artifact, {
            "aiot_version": aiot.__version__,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "convert_seconds": round(seconds, 1),
            "format": converter.name, "backend": converter.backend,
            "artifact": {"file": artifact.name, "sha256": sha, "size_bytes": size, "total_bytes": total,
                         **_companions(converter, artifact)},
            "source": {**source.facts, "binarize": getattr(model, "binarized_with", None),
                       "state_sha256": plan.source_hash},
            "input": source.input,
            **({"inputs": source.inputs} if source.inputs is not None else {}),
            **({"outputs": source.outputs} if source.outputs and len(source.outputs) > 1 else {}),
            "num_classes": source.spec.num_classes if source.spec is not None else None,
            "converter": {"name": converter.name, "options": plan.options, **exported.facts},
            "toolchain": converter.toolchain_versions(),
            "parity": parity,
            **({"deployed_form": exported.deployed} if exported.deployed is not None else {}),
        })
    except OSError as exc:
        for path in artifact_files(converter, artifact):
            path.unlink(missing_ok=True)
        raise _disk_failure(converter, exc, artifact, "sidecar") or exc
    return sidecar, written, total


def _own_weights(source: Source, weights: Path | None) -> bool:
    """Whether the model has its own weights: none named, or a zoo model's packaged file."""
    if weights is None:
        return True
    spec = source.spec
    if spec is None or spec.default_weights is None or source.facts.get("binarize"):
        return False
    return Path(weights).resolve() == Path(spec.weights_file()).resolve()


def _signs_decide(converter, model) -> bool:
    """Whether the artifact of a binarized model is judged by its binary layers' signs (a
    binary-native format that can show them) rather than by its logits."""
    return _is_binarized(model) and converter.binary_inputs is not None


def _binary_parity(converter, runner, artifact: Path, model, source, parity_samples: int,
                   dataset_samples: int, tolerance: dict) -> dict:
    """Parity of a binarized artifact: sign agreement per binary layer decides (see
    :mod:`aiot.converters.sign_parity`); the logits' errors are reported, not judged."""
    noise, images = source.noise(parity_samples, seed=1), source.images(dataset_samples)
    report = check_parity(converter.name, runner, artifact, model, noise, atol=None, rtol=None,
                          dataset=images)
    batches = [noise] + ([images[1]] if images is not None else [])
    signs = check_sign_parity(converter, model, artifact, batches, tolerance)
    report.update(ok=signs["ok"], rule="sign-agreement", signs=signs,
                  logits_judged=False)
    if not signs["ok"]:
        raise AccuracyMismatch(converter.name, report)
    return report


def _deployed_form(converter, model, example):
    """``(training model, model the runtime runs, facts or None)``: a converter whose runtime
    cannot run the training graph as it is says what it changes (daBNN drops clamps that
    float layers read); parity is measured against the changed model, never silently."""
    if not _is_binarized(model):
        return model, model, None
    changed, facts = converter.deployed_form(model, example)
    return model, changed, facts


def _change_cost(trained, deployed, source, parity_samples: int, dataset_samples: int | None) -> dict:
    """What the deployed form's change alone does: the training graph against the changed
    PyTorch model on the parity inputs (noise and real images), top-1 and logits."""
    import numpy as np
    import torch

    batches = [source.noise(parity_samples, seed=1)]
    images = source.images(parity_image_count(dataset_samples, None))
    if images is not None:
        batches.append(images[1])
    inputs = torch.cat(batches)
    with torch.no_grad():
        before = trained(inputs).reshape(len(inputs), -1).numpy()
        after = deployed(inputs).reshape(len(inputs), -1).numpy()
    report = compare_outputs(before, after, None, None)
    return {"top1_agreement": report["top1_agreement"], "max_abs": report["max_abs"],
            "n": report["n"], "inputs": "noise" + (f" + {images[0]}" if images is not None else ""),
            "identical": bool(np.array_equal(before, after))}


def _companions(converter, artifact: Path) -> dict:
    """``{"companions": {file name: sha256}}`` for the other files of a multi-file artifact."""
    others = {p.name: sha256_file(p) for p in artifact_files(converter, artifact) if p != artifact}
    return {"companions": others} if others else {}


#: A binarized model in a float runtime cannot match logits: sign(x) of an activation within
#: rounding error of 0 flips when the runtime folds BatchNorm or reorders sums, and one flip
#: moves a logit by whole units. Such artifacts are judged like quantized ones, on top-1.
BINARY_IN_FLOAT_MIN_TOP1 = 0.9


def _tolerance(converter, options: dict, model=None) -> dict:
    """``atol``/``rtol``/``min_top1`` for parity: per options where the converter says so."""
    tolerance = dict(converter.parity_tolerance(options))
    if getattr(model, "quantized_with", None) is not None and tolerance["min_top1"] is None:
        tolerance["min_top1"] = QDQ_MIN_TOP1
    if tolerance["min_top1"] is None and model is not None and _is_binarized(model) and (
            not converter.binary_native or _has_residual_add(model)):
        # A binary runtime binarizes exactly what it computes, but a residual addition is
        # float arithmetic in another order: a sum within rounding of 0 flips the next sign.
        tolerance["min_top1"] = BINARY_IN_FLOAT_MIN_TOP1
    return tolerance


def _has_residual_add(model) -> bool:
    """Whether the model adds tensors (ResNet shortcuts); False if it cannot be traced."""
    import operator

    import torch

    try:
        graph = trace(model)
    except Exception:  # noqa: BLE001 - untraceable models keep the strict rule
        return False
    return any(node.target in (operator.add, torch.add, "add") for node in graph.nodes)


def _is_binarized(model) -> bool:
    from aiot.models.bibench import BinarizedLayer
    from aiot.models.binary import BinaryConv2d

    return any(isinstance(m, (BinaryConv2d, BinarizedLayer)) for m in model.modules())


def _export(converter, model, example, artifact: Path, options: dict, spec=None) -> dict:
    """Run the converter, turning toolchain exceptions into a ConversionError."""
    extra = {"spec": spec} if spec is not None else {}
    try:
        with toolchain_output_to_log(log):
            return converter.export(model, example, artifact, options, **extra)
    except Exception as exc:
        disk = _disk_failure(converter, exc, artifact, "export")  # also a toolchain's words
        if disk is not None:
            raise disk from None
        if isinstance(exc, AiotError):
            raise
        detail = first_line(exc)
        log.debug("export of %s failed", artifact.name, exc_info=True)
        raise ConversionError(converter.name, "export", f"{type(exc).__name__}: {detail}",
                              "run with --verbose for the toolchain's traceback") from None


def _disk_failure(converter, exc: BaseException, artifact: Path, stage: str) -> ConversionError | None:
    """A conversion that found its folder full or read-only, as one line naming the errno and
    the folder (every writer is atomic: no temporary is left behind), or None."""
    disk = as_disk_error(exc, f"writing {artifact.name}", artifact.parent)
    return None if disk is None else ConversionError(converter.name, stage, disk.message, disk.hint)


def _notify(progress: Callable[[str], None] | None, stage: str) -> None:
    if progress:
        progress(stage)


__all__ = ["ConversionResult", "build_source_model", "convert_model", "read_sidecar",
           "verify_artifact"]
