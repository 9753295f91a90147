"""The model-side noise types: inference variants, numeric precision, platform.

All three run the reference pipeline's inputs (:attr:`SuiteContext.reference_inputs`) and
change the model instead: a modified PyTorch copy (variants), an FP16 or INT8 TFLite artifact
against the FP32 one (precision), or the same artifact on each device against the PyTorch
reference on the host (platform). The last two need a deployed artifact (``--format``).
"""

from __future__ import annotations

from aiot.converters import get_converter
from aiot.core.errors import AiotError
from aiot.host.robust.deployed import open_deployed
from aiot.host.robust.predictor import predict_all
from aiot.host.robust.sysnoise import variants
from aiot.host.robust.sysnoise.context import SuiteContext, TypeReport
from aiot.host.robust.sysnoise.preprocessing import REFERENCE_STATUS, reference_row
from aiot.host.robust.sysnoise.scoring import score, skipped, summarize

#: Precision options: the tflite converter's ``quant`` values, reference first.
PRECISIONS = ("fp32", "fp16", "int8")
#: The converter whose artifacts come in FP32, FP16 and INT8.
PRECISION_FORMAT = "tflite"

NEEDS_FORMAT = "skipped: needs a deployed artifact (pass --format, e.g. --format ort)"


def _first_line(exc: BaseException) -> str:
    text = exc.one_line() if isinstance(exc, AiotError) else str(exc)
    lines = text.strip().splitlines()
    return lines[0] if lines else exc.__class__.__name__


def variants_type(ctx: SuiteContext) -> TypeReport:
    """Each inference variant of the PyTorch model vs the unmodified model."""
    import torch

    x = ctx.reference_inputs
    reference = ctx.reference_scores
    reference_top1 = reference.argmax(axis=1)
    rows = [reference_row(ctx, "pytorch", "as trained", reference_top1)]
    notes = []
    example = torch.from_numpy(x[:1].copy())
    for name, build in variants.BUILDERS.items():
        try:
            variant, changes = build(ctx.model, example)
        except variants.NotApplicable as exc:
            rows.append(skipped(name, f"not applicable: {exc}", variants.VARIANTS[name]))
            notes.append(f"{name}: not applicable to {ctx.target.label}: {exc}.")
            continue
        ctx.progress(f"variant: {name}…")
        try:
            scores = variants.variant_logits(variant, x)
        except RuntimeError as exc:
            # A deployment whose operator changes the shapes breaks a later layer: a finding.
            rows.append(skipped(name, f"does not run: {_first_line(exc)}", "; ".join(changes)))
            notes.append(f"{name}: the variant does not run ({'; '.join(changes)}).")
            continue
        rows.append(score(name, reference_top1, scores.argmax(axis=1), ctx.labels, "; ".join(changes),
                          reference_scores=reference, option_scores=scores))
    summary = summarize(rows[1:])
    return TypeReport("variants", rows, notes, _with_logit(summary, rows[1:]))


def _with_logit(summary: dict, rows) -> dict:
    logits = [r.max_logit for r in rows if r.ok and r.max_logit is not None]
    return {**summary, "max_logit": max(logits)} if logits else summary


def _deployed_scores(ctx: SuiteContext, target):
    """``(scores, provenance)`` of ``target``'s artifact on its device for the reference inputs."""
    predictor = open_deployed(target, ctx.workspace)
    try:
        return predict_all(predictor, ctx.reference_inputs), predictor.provenance
    finally:
        predictor.close()


def precision_type(ctx: SuiteContext) -> TypeReport:
    """FP16 and INT8 TFLite artifacts vs the FP32 one, on the first device."""
    device = ctx.devices[0]
    if ctx.target.fmt is None:
        return TypeReport("precision", [skipped(q, NEEDS_FORMAT, PRECISION_FORMAT) for q in PRECISIONS])
    base = dict(ctx.target.options) if ctx.target.fmt == PRECISION_FORMAT else {}
    rows, reference = [], None
    for quant in PRECISIONS:
        setting = f"{PRECISION_FORMAT} quant={quant} @ {device}"
        if quant != PRECISIONS[0] and reference is None:
            rows.append(skipped(quant, "skipped: the FP32 reference artifact failed", setting))
            continue
        ctx.progress(f"precision: {setting}…")
        target = ctx.target.with_format(PRECISION_FORMAT, device, {**base, "quant": quant})
        try:
            scores, provenance = _deployed_scores(ctx, target)
        except AiotError as exc:
            rows.append(skipped(quant, f"failed: {_first_line(exc)}", setting))
            continue
        sha = (provenance.get("artifact") or {}).get("sha256")
        if reference is None:
            reference = scores
            rows.append(reference_row(ctx, quant, setting, scores.argmax(axis=1)))
            rows[-1].extra["sha256"] = sha
            continue
        rows.append(score(quant, reference.argmax(axis=1), scores.argmax(axis=1), ctx.labels, setting,
                          reference_scores=reference, option_scores=scores, sha256=sha))
    notes = [_calibration_note({**base, "quant": "int8"})]
    if ctx.target.fmt != PRECISION_FORMAT:
        notes.append(f"precision compares {PRECISION_FORMAT} artifacts (the converter with FP16/INT8 "
                     f"variants), not {ctx.target.fmt}.")
    options = [r for r in rows if r.status != REFERENCE_STATUS]
    return TypeReport("precision", rows, notes, _with_logit(summarize(options), options))


def _calibration_note(options: dict) -> str:
    """Which images INT8 was calibrated on (the converter's defaults unless --opt changed them)."""
    defaults = {k: default for k, (default, _help) in get_converter(PRECISION_FORMAT).options.items()}
    merged = {**defaults, **options}
    return (f"precision: INT8 calibrated on {merged.get('calibration')} (train split, "
            f"{merged.get('calibration_samples')} images; --format tflite --opt calibration=... changes it).")


def platform_type(ctx: SuiteContext) -> TypeReport:
    """The same artifact on each device vs the PyTorch reference on the host."""
    reference = ctx.reference_scores
    reference_top1 = reference.argmax(axis=1)
    rows = [reference_row(ctx, "pytorch", "host", reference_top1)]
    if ctx.target.fmt is None:
        rows += [skipped(d, NEEDS_FORMAT) for d in ctx.devices]
        return TypeReport("platform", rows)
    hashes = {}
    for device in ctx.devices:
        target = ctx.target.with_format(ctx.target.fmt, device)
        ctx.progress(f"platform: {ctx.target.fmt} @ {device}…")
        try:
            scores, provenance = _deployed_scores(ctx, target)
        except AiotError as exc:
            rows.append(skipped(device, f"failed: {_first_line(exc)}", ctx.target.fmt))
            continue
        info = provenance.get("device") or {}
        artifact = provenance.get("artifact") or {}
        hashes[device] = artifact.get("sha256")
        ctx.provenance.setdefault("artifact", artifact)
        ctx.provenance.setdefault("devices", {})[device] = info
        setting = f"{ctx.target.fmt} on {info.get('abi') or 'unknown abi'}"
        rows.append(score(device, reference_top1, scores.argmax(axis=1), ctx.labels, setting,
                          reference_scores=reference, option_scores=scores, sha256=hashes[device]))
    notes = []
    if len(set(hashes.values())) > 1:
        notes.append("platform: the devices ran different artifacts: "
                     + ", ".join(f"{d} {h[:12]}" for d, h in hashes.items() if h))
    elif hashes:
        sha = next(iter(hashes.values())) or ""
        notes.append(f"platform: the same {ctx.target.fmt} artifact (sha256 {sha[:12]}…) ran on "
                     f"{', '.join(hashes)}: its differences from PyTorch are the runtime's and the CPU's.")
    return TypeReport("platform", rows, notes, _with_logit(summarize(rows[1:]), rows[1:]))
