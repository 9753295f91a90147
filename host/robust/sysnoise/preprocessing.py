"""The pre-processing noise types: JPEG decoder, resize method, colour round trip.

Each option changes one step of the reference pipeline (:mod:`.pipeline`) and is scored on the
pre-processing predictor against the reference pipeline's predictions. Options that cannot
run here (a package missing) or that give bit-identical pixels are rows without numbers, with
the reason, and a note; they never count as a zero in the type's mean and max.
"""

from __future__ import annotations

import importlib
import logging

from aiot.host.robust.sysnoise import colour, decoders, resize
from aiot.host.robust.sysnoise.context import SuiteContext, TypeReport
from aiot.host.robust.sysnoise.pipeline import Pipeline
from aiot.host.robust.sysnoise.scoring import (
    OptionResult,
    pixel_diff,
    score,
    skipped,
    summarize,
    systematic_robustness,
)

log = logging.getLogger(__name__)

#: ``status`` of a reference row.
REFERENCE_STATUS = "reference"


def reference_row(ctx: SuiteContext, name: str, setting: str, predictions) -> OptionResult:
    """The reference as a table row (accuracy shown; not counted in the type's mean and max)."""
    row = score(name, predictions, predictions, ctx.labels, setting)
    row.status = REFERENCE_STATUS
    return row


def _failure(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"failed: {exc.__class__.__name__}: {text[0] if text else ''}".rstrip(": ")


def _missing(package_module: str, package: str) -> str | None:
    try:
        importlib.import_module(package_module)
    except ImportError as exc:
        return f"unavailable: {package} is not installed ({exc}); pip install {package}"
    return None


# --- decoder ---------------------------------------------------------------------------------


def self_test() -> tuple[dict, dict[str, int | None]]:
    """Decode the colour probe JPEG (:func:`decoders.probe_jpeg`) with every decoder.

    Returns:
        ``(table, max_abs)``: a result table (decoder, expected, status, max |Δ|, changed px)
        and each decoder's max |Δ| from Pillow (None where it did not run).
    """
    probe = [decoders.probe_jpeg()]
    reference = decoders.decode_all(decoders.REFERENCE, probe, gray=False)
    rows, worst = [], {}
    for name, decoder in decoders.DECODERS.items():
        expected = "same as Pillow" if decoder.same_library else "differs"
        reason = decoders.unavailable(name)
        if reason:
            rows.append([name, decoder.title, expected, f"unavailable: {reason}", None, None])
            worst[name] = None
            continue
        try:
            diff = pixel_diff(reference, decoders.decode_all(name, probe, gray=False))
        except Exception as exc:  # noqa: BLE001 - a broken decoder is a row, not a crash
            rows.append([name, decoder.title, expected, _failure(exc), None, None])
            worst[name] = None
            continue
        worst[name] = diff.max_abs
        status = "bit-identical" if diff.identical else "differs"
        rows.append([name, decoder.title, expected, status, diff.max_abs, diff.changed])
    table = {"name": "decoder-selftest", "columns": ["decoder", "library", "expected", "status",
                                                     "max |Δ| px", "changed px"],
             "title": "Decoder self-test: a 4:2:0 colour probe JPEG decoded by each decoder vs Pillow",
             "rows": rows}
    return table, worst


def _identical_note(decoder: decoders.Decoder, n: int, gray: bool, probe_max: int | None) -> str:
    what = f"the {n} evaluation JPEGs" + (" (grayscale)" if gray else "")
    probe = ("" if probe_max is None else
             " and the colour probe" if probe_max == 0 else
             f"; on the 4:2:0 colour probe it differs by up to {probe_max} levels")
    return f"{decoder.title} decodes {what} bit-identically to Pillow{probe}: not a finding."


def decoder_type(ctx: SuiteContext) -> TypeReport:
    """Every decoder vs Pillow on the down camera's JPEGs."""
    stages = ctx.stages("down")
    setting = f"{stages.source_size()[0]} px JPEG" if ctx.cameras["down"].side else "source JPEG"
    reference = stages.decoded(decoders.REFERENCE)
    rows = [reference_row(ctx, decoders.REFERENCE, setting, ctx.reference_predictions)]
    table, probe_max = self_test()
    notes = []
    for name, decoder in decoders.DECODERS.items():
        if name == decoders.REFERENCE:
            continue
        reason = decoders.unavailable(name)
        if reason:
            rows.append(skipped(name, f"unavailable: {reason}", setting))
            continue
        ctx.progress(f"decoder: {name}…")
        try:
            diff = pixel_diff(reference, stages.decoded(name))
        except Exception as exc:  # noqa: BLE001 - a broken decoder is a row, not a crash
            log.warning("decoder %s failed: %s", name, exc)
            rows.append(skipped(name, _failure(exc), setting))
            continue
        if diff.identical:
            rows.append(skipped(name, "bit-identical to Pillow (not a finding)", setting))
            notes.append(_identical_note(decoder, len(reference), ctx.gray, probe_max.get(name)))
            continue
        if decoder.same_library:
            notes.append(f"{decoder.title} was expected to match Pillow but differs (max {diff.max_abs}): "
                         "its bundled libjpeg differs from Pillow's; counted as an option.")
        predictions = ctx.predict(stages.images(Pipeline(decoder=name))).argmax(axis=1)
        rows.append(score(name, ctx.reference_predictions, predictions, ctx.labels, setting, pixels=diff))
    options = [r for r in rows if r.status != REFERENCE_STATUS]
    summary = summarize(options)
    sr = systematic_robustness(options)
    if sr is not None:
        summary["systematic_robustness"] = sr
    return TypeReport("decoder", rows, notes, summary, [table])


# --- resize ----------------------------------------------------------------------------------


def _case_setting(ctx: SuiteContext, case: str) -> str:
    h, w = ctx.target_size
    side = ctx.cameras[case].side
    return f"{case} {f'{side} px' if side else 'source'}->{h}x{w}"


def resize_type(ctx: SuiteContext) -> TypeReport:
    """Pillow's and OpenCV's resize methods vs Pillow bilinear, downscaling and upscaling."""
    rows, notes, summary = [], [], {}
    cv2_missing = _missing("cv2", "opencv-python-headless")
    for case in ("down", "up"):
        stages = ctx.stages(case)
        direction = resize.direction(stages.source_size(), ctx.target_size, ctx.crop)
        if direction != case:
            notes.append(f"resize {case}: the {case} camera's images need no {case}scaling "
                         f"({direction}); case skipped.")
            continue
        setting = _case_setting(ctx, case)
        reference_images = stages.images(Pipeline())
        reference = (ctx.reference_predictions if case == "down"
                     else ctx.predict(reference_images).argmax(axis=1))
        case_rows = [reference_row(ctx, resize.REFERENCE, setting, reference)]
        for name in resize.RESIZERS:
            if name == resize.REFERENCE:
                continue
            if name.startswith("cv2-") and cv2_missing:
                case_rows.append(skipped(name, cv2_missing, setting))
                continue
            ctx.progress(f"resize {case}: {name}…")
            images = stages.images(Pipeline(resizer=name))
            predictions = ctx.predict(images).argmax(axis=1)
            case_rows.append(score(name, reference, predictions, ctx.labels, setting,
                                   pixels=pixel_diff(reference_images, images)))
        sr = systematic_robustness([r for r in case_rows if r.status != REFERENCE_STATUS])
        if sr is not None:
            summary[f"systematic_robustness_{case}"] = sr
        rows.extend(case_rows)
    summary = {**summarize([r for r in rows if r.status != REFERENCE_STATUS]), **summary}
    return TypeReport("resize", rows, notes, summary)


# --- colour ----------------------------------------------------------------------------------

_COLOUR_MODULES = {"opencv-python-headless": "cv2", "av": "av"}


def colour_type(ctx: SuiteContext) -> TypeReport:
    """The NV12 round trips vs unchanged RGB, on the reference pipeline's model-size images."""
    stages = ctx.stages("down")
    setting = "gray->RGB->NV12->RGB->gray" if ctx.gray else "RGB->NV12->RGB"
    reference_images = stages.images(Pipeline())
    rows = [reference_row(ctx, colour.REFERENCE, "unchanged", ctx.reference_predictions)]
    for name, (_convert, package) in colour.COLOURS.items():
        missing = _missing(_COLOUR_MODULES[package], package)
        if missing:
            rows.append(skipped(name, missing, setting))
            continue
        ctx.progress(f"colour: {name}…")
        images = stages.images(Pipeline(colour=name))
        predictions = ctx.predict(images).argmax(axis=1)
        rows.append(score(name, ctx.reference_predictions, predictions, ctx.labels, setting,
                          pixels=pixel_diff(reference_images, images)))
    return TypeReport("colour", rows, [], summarize(rows[1:]))
