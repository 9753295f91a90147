"""The SysNoise suite: run the chosen noise types and assemble the stored result dict."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence

from aiot.core.errors import UnknownName
from aiot.host.robust.data import PHOTOS
from aiot.host.robust.metrics import accuracy
from aiot.host.robust.predictor import TorchPredictor
from aiot.host.robust.sysnoise import camera, model_side, preprocessing
from aiot.host.robust.sysnoise.context import SuiteContext, TypeReport
from aiot.host.robust.sysnoise.scoring import OptionResult
from aiot.host.robust.target import reference_model

log = logging.getLogger(__name__)

#: Noise types in run order, with their table titles.
TYPES = {
    "decoder": "JPEG decoder (reference: Pillow)",
    "resize": "Resize method (reference: Pillow bilinear)",
    "colour": "Colour space round trip (reference: unchanged)",
    "precision": "Numeric precision (reference: FP32 artifact)",
    "variants": "Model-inference variants (reference: the PyTorch model as trained)",
    "platform": "Platform: the same artifact per device (reference: PyTorch on the host)",
}
#: ImageNet evaluation's centre crop (shorter side to 256, centre 224), used for photos.
PHOTO_CROP = 0.875
#: Types that need a deployed artifact (``--format``).
DEPLOYED = ("precision", "platform")

_RUNNERS: dict[str, Callable[[SuiteContext], TypeReport]] = {
    "decoder": preprocessing.decoder_type,
    "resize": preprocessing.resize_type,
    "colour": preprocessing.colour_type,
    "precision": model_side.precision_type,
    "variants": model_side.variants_type,
    "platform": model_side.platform_type,
}

_PIXEL_COLUMNS = ["option", "setting", "status", "accuracy", "dACC", "SNI", "flip rate",
                  "max |Δ| px", "changed px", "mean |Δ| px"]
_MODEL_COLUMNS = ["option", "setting", "status", "accuracy", "dACC", "flip rate", "max |Δ logit|"]

#: Packages whose versions the record keeps (decoders and resizers change with them).
LIBRARIES = ("numpy", "torch", "Pillow", "opencv-python-headless", "av", "simplejpeg",
             "pylibjpeg-libjpeg", "kornia-rs", "imageio")


def parse_types(value: str | Sequence[str] | None) -> list[str]:
    """Noise type names from a comma list (None or ``all``: every type), in run order.

    Raises:
        UnknownName: a name that is not a noise type (with close names).
    """
    if value is None:
        return list(TYPES)
    parts = value.split(",") if isinstance(value, str) else [p for v in value for p in v.split(",")]
    names = {p.strip().lower() for p in parts if p.strip()}
    if not names or names == {"all"}:
        return list(TYPES)
    aliases = {"color": "colour", "decoders": "decoder", "variant": "variants", "platforms": "platform"}
    names = {aliases.get(n, n) for n in names}
    for name in names:
        if name not in TYPES:
            raise UnknownName("sysnoise type", name, TYPES)
    return [t for t in TYPES if t in names]


def run_sysnoise(ctx: SuiteContext, types: Sequence[str]) -> dict:
    """Run ``types`` on ``ctx`` and return the suite's result dict (JSON-safe).

    Adds what the run learned about devices and artifacts to ``ctx.provenance``.
    """
    reports = [_RUNNERS[name](ctx) for name in types]
    clean = None
    if ctx.labels is not None:
        clean = accuracy(ctx.reference_predictions, ctx.labels)
    return {
        "suite": "sysnoise",
        "clean_accuracy": clean,
        "summary": _json_safe(_summary(reports, clean)),
        "tables": [t for r in reports for t in (_table(r), *r.tables)],
        "curves": [],
        "notes": _pipeline_notes(ctx) + [n for r in reports for n in r.notes],
        "data": {**ctx.evalset.describe(), "jpeg": _jpeg_facts(ctx), "types": list(types)},
        "libraries": libraries(),
    }


def _summary(reports: list[TypeReport], clean: float | None) -> dict[str, float]:
    summary = {} if clean is None else {"clean_accuracy": clean}
    for report in reports:
        summary.update({f"{report.name}.{key}": value for key, value in report.summary.items()})
    return summary


def _row(result: OptionResult, model_side: bool) -> list:
    common = [result.name, result.setting, result.status, result.accuracy, result.dacc]
    if model_side:
        return [*common, result.flip, result.max_logit]
    pixels = result.pixels
    return [*common, result.sni, result.flip, pixels.max_abs if pixels else None,
            pixels.changed if pixels else None, pixels.mean_abs if pixels else None]


def _table(report: TypeReport) -> dict:
    model_side_type = report.name in ("precision", "variants", "platform")
    return {"name": report.name, "title": TYPES[report.name],
            "columns": _MODEL_COLUMNS if model_side_type else _PIXEL_COLUMNS,
            "rows": _json_safe([_row(r, model_side_type) for r in report.rows])}


def _jpeg_facts(ctx: SuiteContext) -> dict:
    return {"encoder": "Pillow", "quality": camera.QUALITY, "crop": ctx.crop,
            "subsampling": None if ctx.gray else "4:2:0", "grayscale": ctx.gray,
            "cameras": {name: cam.side for name, cam in ctx.cameras.items()},
            "model_input": list(ctx.target_size)}


def _pipeline_notes(ctx: SuiteContext) -> list[str]:
    """How the images were prepared (the issue asks to state it)."""
    h, w = ctx.target_size
    down, up = ctx.cameras["down"], ctx.cameras["up"]
    kind = "grayscale" if ctx.gray else "4:2:0 colour"
    side = "" if ctx.crop == 1 else f" to {camera.needed_side(ctx.target_size, ctx.crop)} px"
    capture = ("kept at their own size" if down.side is None
               else f"resampled to {down.side} px (Pillow bicubic)")
    notes = [(f"{ctx.evalset.name} images {capture} and re-encoded as {kind} JPEG (Pillow, quality "
              f"{camera.QUALITY}), so decoding and resizing to the model's {h}x{w} matter; the "
              f"upscaling case captures them at {up.side} px."),
             (f"Pipeline: JPEG -> decoder -> resize (shorter side{side}, centre crop {h}x{w}) -> colour "
              "-> the model's normalisation; each noise type changes exactly one step of the "
              "reference (Pillow, Pillow bilinear, unchanged RGB).")]
    if ctx.labels is None:
        notes.append("Unlabelled images: flip rate and top-1 agreement only (no accuracy, dACC or SNI).")
        notes.append(_confidence_note(ctx))
    return notes


def _confidence_note(ctx: SuiteContext) -> str:
    """How sure the reference is: without labels, flips on near-ties are the expected kind."""
    import numpy as np

    scores = ctx.reference_scores.astype(np.float64)
    probs = np.exp(scores - scores.max(axis=1, keepdims=True))
    top1 = (probs / probs.sum(axis=1, keepdims=True)).max(axis=1)
    unsure = int((top1 < 0.5).sum())
    return (f"Reference top-1 probability (softmax of the PyTorch scores): median {np.median(top1):.2f}; "
            f"{unsure} of {len(top1)} images below 0.5, where a small change can swap near-tied classes.")


def libraries() -> dict[str, str]:
    """Versions of the packages and bundled codecs the decoders and resizers depend on."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in LIBRARIES:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            continue
    found.update(_codec_versions())
    return found


def _codec_versions() -> dict[str, str]:
    """libjpeg-turbo in Pillow and OpenCV, FFmpeg in PyAV (they decide the pixels)."""
    codecs = {}
    for name, probe in (("libjpeg-turbo (Pillow)", _pillow_jpeg), ("libjpeg (OpenCV)", _opencv_jpeg),
                        ("libavcodec (PyAV)", _pyav_codec)):
        try:
            found = probe()
        except Exception as exc:  # noqa: BLE001 - optional facts; a missing library is no error
            log.debug("no %s version: %s", name, exc)
            continue
        if found:
            codecs[name] = found
    return codecs


def _pillow_jpeg() -> str | None:
    from PIL import features

    return features.version("libjpeg_turbo")


def _opencv_jpeg() -> str | None:
    import re

    import cv2

    match = re.search(r"JPEG:\s*([^\n]+)", cv2.getBuildInformation())
    return match.group(1).strip() if match else None


def _pyav_codec() -> str:
    import av

    return ".".join(map(str, av.library_versions["libavcodec"]))


def _json_safe(value):
    """NaN -> None, numpy scalars -> Python numbers, recursively."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def evaluate(target, evalset, *, types: Sequence[str] | None = None, devices: Sequence[str] | None = None,
             workspace=None, crop: float | None = None, predictor=None,
             progress: Callable[[str], None] | None = None) -> tuple[dict, dict]:
    """Build the PyTorch reference of ``target`` and run the suite on ``evalset``.

    Args:
        target: the model (and, for precision/platform, its format and first device).
        evalset: images and labels (``labels=None``: flip rate and agreement only).
        types: noise types (default: all of :data:`TYPES`).
        devices: devices of the platform type (default: ``[target.device]``).
        workspace: sessions and artifacts (needed by precision and platform with a format).
        crop: centre-crop share of the resize step (default: :data:`PHOTO_CROP` for the
            ``photos`` set, 1 for datasets whose images are the model's size).
        predictor: scores the pre-processing types (default: the PyTorch reference).
        progress: called with a short line before each slow step.

    Returns:
        ``(result, provenance)``: the result dict and the device/artifact facts learned.
    """
    spec, model = reference_model(target)
    if crop is None:
        crop = PHOTO_CROP if evalset.name == PHOTOS else 1.0
    ctx = SuiteContext(target, spec, model, evalset, predictor or TorchPredictor(model), workspace,
                       list(devices or [target.device]), crop, progress)
    return run_sysnoise(ctx, parse_types(list(types) if types else None)), ctx.provenance
