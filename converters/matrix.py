"""One model into every registered format: ``aiot convert MODEL --format all``.

Each format becomes a row whatever happens — a failure is a row, never a crash:

* ``ok``: exported, loaded and run by its runtime (or, for emit-only formats, by aiot's
  reference executor of the format), op list checked, parity with PyTorch within tolerance;
* ``unsupported``: the model cannot be expressed in the format (a float model for a
  binarized runtime, a layer the format lacks) — a fact about the pair, not a bug;
* ``unavailable``: the format's toolchain is not installed here (the row says how to fix it);
* ``failed``: export, verification or parity went wrong (the reason is in the row).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from aiot.converters.api import build_source_model, convert_model
from aiot.converters.base import get_converter, user_converters
from aiot.converters.sidecar import read_sidecar
from aiot.converters.source import load_user_model
from aiot.core.errors import AiotError, ConversionError, UsageError, first_line
from aiot.models.model_ref import ZOO, a_format, resolve_model

log = logging.getLogger(__name__)

STATUSES = ("ok", "unsupported", "unavailable", "failed")


def split_options(options: dict[str, str], formats: list[str]) -> dict[str, dict[str, str]]:
    """``{"tflite.quant": "int8"}`` → ``{"tflite": {"quant": "int8"}}``; bare keys refused,
    since one option name can mean different things to different formats."""
    per_format: dict[str, dict[str, str]] = {fmt: {} for fmt in formats}
    for key, value in options.items():
        fmt, sep, name = key.partition(".")
        if not sep or fmt not in per_format:
            raise UsageError(f"option '{key}' does not name a format",
                             "with --format all, prefix options: --opt tflite.quant=int8")
        per_format[fmt][name] = value
    return per_format


def convert_all(model_name: str, out_dir: Path, weights: Path | None = None,
                options: dict[str, str] | None = None, progress=None,
                binarize: str | None = None, input_shapes: dict | None = None,
                feed=None) -> list[dict]:
    """One row per registered format (see the module docstring for the statuses); ``feed``:
    the parity inputs the user gives (:class:`~aiot.converters.inputs.InputFeed`)."""
    # A bad name, file, factory or weights: fail before any row.
    ref = resolve_model(model_name, binarize)
    if ref.is_artifact:
        raise UsageError(f"{ref.name} is already {a_format(ref.format)} artifact: there is nothing to "
                         "convert", "measure it as it is: aiot run --model FILE")
    if ref.kind == ZOO:
        build_source_model(ref.name, weights, ref.binarize)
    else:
        load_user_model(ref, input_shapes)
    formats = [conv.name for conv in user_converters()]
    per_format = split_options(options or {}, formats)
    # The resolved reference to every format: a user's file is read and hashed once.
    return [convert_row(ref, fmt, out_dir, weights, per_format[fmt], progress, binarize,
                        input_shapes, feed) for fmt in formats]


def convert_row(model_name: str, fmt: str, out_dir: Path, weights, options: dict, progress,
                binarize: str | None = None, input_shapes: dict | None = None,
                feed=None) -> dict:
    """One format's row: ok (with parity), unsupported, unavailable or failed, and why."""
    converter = get_converter(fmt)
    row = {"format": fmt, "runs_on": converter.backend or "reference executor (emit-only)",
           "status": None, "reason": None, "size_bytes": None, "max_abs": None, "max_rel": None,
           "top1_agreement": None, "dataset_top1_agreement": None, "seconds": None,
           "artifact": None, "ops": None, "parity_verdict": None}
    avail = converter.availability()
    if not avail.ok:
        hint = avail.hint or (f"pip install 'aiot[{avail.extra}]'" if avail.extra else "")
        return {**row, "status": "unavailable", "reason": f"{avail.reason}; {hint}".strip("; ")}
    if progress:
        progress(fmt)
    started = time.perf_counter()
    try:
        res = convert_model(model_name, fmt, out_dir, weights=weights, options=options,
                            binarize=binarize, input_shapes=input_shapes, feed=feed)
    except ConversionError as exc:
        status = "unsupported" if exc.stage in ("lower", "check", "freeze") else "failed"
        return {**row, "status": status, "reason": exc.detail, "seconds": time.perf_counter() - started}
    except AiotError as exc:
        return {**row, "status": "failed", "reason": exc.message, "seconds": time.perf_counter() - started}
    except Exception as exc:  # a toolchain bug must not hide the other formats' rows
        log.debug("%s conversion crashed", fmt, exc_info=True)
        return {**row, "status": "failed", "reason": first_line(f"{type(exc).__name__}: {exc}"),
                "seconds": time.perf_counter() - started}
    parity = res.parity or {}
    inconclusive = parity.get("inconclusive")  # passed, but as any constant output would
    return {**row, "status": "ok", "size_bytes": res.size_bytes, "artifact": str(res.artifact),
            "reason": inconclusive["reason"] if inconclusive else None,
            "parity_verdict": parity.get("verdict"),
            "max_abs": parity.get("max_abs"), "max_rel": parity.get("max_rel"),
            "top1_agreement": parity.get("top1_agreement"),
            "dataset_top1_agreement": (parity.get("dataset") or {}).get("top1_agreement"),
            "seconds": res.seconds, "cached": res.cached,
            "ops": len((res.facts or read_sidecar(res.artifact)).get("converter", {}).get("ops") or [])}
