"""What a sweep tells the person running it after it ran: its table (the checks before it runs,
a ``--cluster`` the device lacks, more threads than cores, are :mod:`aiot.host.engine.preflight`'s).

The runs sorted by device, model, format and threads (never run order, which is shuffled),
each with its speed-up over the same configuration at 1 thread and its throughput; a measured
but INVALID run says why in its row, an emulated device says so.
"""

from __future__ import annotations

import re

from rich.markup import escape

from aiot.core.errors import AiotError
from aiot.core.untrusted import visible
from aiot.host.engine.validity import (
    INVALID,
    VALID,
    emulated,
    limit_changes,
    relaxed_limits,
    short_reasons,
)
from aiot.host.store.identity import Configuration, configuration, latency_ms, sort_key, variant
from aiot.host.store.store import RunRecord
from aiot.models.quant.deploy import deployment_refusal
from aiot.models.quant.methods import split_suffix

__all__ = ["brief_reason", "device_cell", "format_cell", "int8_speedups", "invalid_reasons", "latency_ms", "parity_notes",
           "sort_key", "speedups", "status_cell", "throughput"]

#: Converter options that make an artifact integer (TFLite's full-integer and dynamic-range).
INT8_QUANT = ("int8", "dynamic-int8")


def speedups(records: list[RunRecord]) -> dict[str, float | None]:
    """Per record id: the 1-thread latency of its configuration
    (:func:`aiot.host.store.identity.configuration`) over its own, or None
    where either is missing (no 1-thread run, or a failed one)."""
    base = {configuration(r): latency_ms(r) for r in records if r.threads == 1 and latency_ms(r)}
    out: dict[str, float | None] = {}
    for r in records:
        mine, one = latency_ms(r), base.get(configuration(r))
        out[r.id] = one / mine if mine and one else None
    return out


def float_twin(record: RunRecord) -> Configuration | None:
    """The configuration of the float run an int8 run is compared with, or None when
    ``record`` is no int8 run: TFLite's ``quant=int8``/``dynamic-int8`` against the same
    artifact without ``quant``; an 8-bit quantized zoo model deployed as integer
    (``tiny_cnn_lsq8`` as int8 ONNX QDQ, XNNPACK int8 or TFLite int8) against its float model
    (``tiny_cnn``) in the same format. Device, runtime (format, native tool, delegate), cluster
    and shapes stay the same."""
    mine = configuration(record)
    options = dict(mine.options or ())
    if options.get("quant") in INT8_QUANT:
        rest = tuple(sorted((k, v) for k, v in options.items() if k != "quant")) or None
        return mine._replace(options=rest)
    base, _, suffix = (mine.model or "").rpartition("_")
    try:
        chosen = split_suffix(suffix) if base else None
    except AiotError:
        return None
    if chosen is None or chosen.bits != 8 or deployment_refusal(chosen, mine.format):
        return None
    return mine._replace(model=base)


def int8_speedups(records: list[RunRecord]) -> dict[str, float | None]:
    """Per int8 run (:func:`float_twin`): the latency of the float run of the same model,
    runtime, device and thread count over its own; None where the sweep has no such float
    run (or either failed). Runs that are not int8 are left out."""
    floats = {(configuration(r), r.threads): latency_ms(r) for r in records if latency_ms(r)}
    gains: dict[str, float | None] = {}
    for r in records:
        twin = float_twin(r)
        if twin is not None:
            mine, other = latency_ms(r), floats.get((twin, r.threads))
            gains[r.id] = other / mine if mine and other else None
    return gains


def format_cell(record: RunRecord) -> str:
    """The format with what changes how it runs (``tflite[quant=int8]+nnapi
    (benchmark_model) @big``; ``via`` is the device cell's): an int8 run and the float one
    are two rows that say so."""
    return variant(record, via=False)


def throughput(record: RunRecord) -> float | None:
    """Inferences per second, one after another: 1000 / latency in ms."""
    ms = latency_ms(record)
    return 1000.0 / ms if ms else None


def invalid_reasons(record: RunRecord) -> str:
    """The names of the reasons an INVALID run is INVALID (``device busy; CV above limit``)."""
    validity = (record.result or {}).get("validity") or {}
    return short_reasons(validity.get("reasons") or [])


#: The most characters of a failed or skipped run's reason its status cell shows; the whole
#: reason is the run's own output line, the record's and ``aiot results show ID``'s.
STATUS_REASON_CHARS = 80
#: ``tflite conversion failed at export: `` (a ConversionError) said as ``tflite export: ``.
_CONVERSION = re.compile(r"\b(\S+) conversion failed at (\S+): ")
#: A hint that only repeats what ``-v`` is for.
_VERBOSE_HINT = re.compile(r"\s*\(run with --verbose[^)]*\)$")


def brief_reason(reason: str | None, width: int = STATUS_REASON_CHARS) -> str:
    """A failed or skipped run's reason for its table cell: one line, a conversion's stage
    said short (``tflite export: RuntimeError: …``), ``run with --verbose`` left out, at most
    ``width`` characters."""
    text = " ".join((reason or "").split())
    text = _VERBOSE_HINT.sub("", _CONVERSION.sub(r"\1 \2: ", text))
    return text if len(text) <= width else text[:width - 1].rstrip() + "…"


def status_cell(record: RunRecord) -> str:
    """``ok``, ``ok INVALID: threads above online cores``, ``ok VALID (relaxed)`` (judged
    under looser limits than the defaults: :func:`limits_note` names them), ``failed: tflite
    export: RuntimeError: …`` and ``skipped: …`` with their reason (:func:`brief_reason`)."""
    status = "[green]ok[/]" if record.status == "ok" else f"[red]{record.status}[/]"
    if record.status in ("failed", "skipped") and record.reason:
        status += f": {escape(visible(brief_reason(record.reason)))}"
    if record.validity == INVALID:
        why = invalid_reasons(record)
        status += f" [yellow]INVALID[/]{': ' + escape(visible(why)) if why else ''}"
    elif record.validity == VALID:
        relaxed = relaxed_limits(((record.result or {}).get("validity") or {}).get("limits"))
        if relaxed:  # never a plain VALID under looser limits; the footnote names them
            status += " [yellow]VALID (relaxed)[/]"
    return status


def limits_note(records) -> str | None:
    """``validity judged with load≤2, cv off (not the defaults)``: the footnote of a table
    whose runs were judged under limits other than the defaults; None when all were default."""
    seen: dict[str, None] = {}
    for r in records:
        for change in limit_changes(((r.result or {}).get("validity") or {}).get("limits")):
            seen[change] = None
    if not seen:
        return None
    return (f"validity judged with {', '.join(seen)} (not the defaults; set by --validity or "
            "AIOT_VALIDITY)")


def busy_note(records) -> str | None:
    """The first "device busy" reason in full (what was busy and what to do), for the line
    under a table whose cells only name it; None when no run was INVALID for load."""
    for r in records:
        for reason in ((r.result or {}).get("validity") or {}).get("reasons") or []:
            if reason.startswith("device busy:"):
                return reason
    return None


def device_cell(record: RunRecord) -> str:
    """The device's name, ``(via app)`` when the app started the agent, ``(emulated)`` when
    the timings are this host's."""
    device = record.device or "—"
    spec, prov = record.spec or {}, record.provenance or {}
    if spec.get("via"):
        device = f"{device} (via {spec['via']})"
    if emulated(prov.get("device") or {}):
        device = f"{device} (emulated)"
    return device


def parity_notes(records: list[RunRecord]) -> list[str]:
    """One line per artifact whose parity with PyTorch was inconclusive (its conversion's
    line is not seen when a run converts): the model, the format, why, and the fix."""
    seen: dict[tuple, str] = {}
    for r in records:
        parity = ((r.provenance or {}).get("artifact") or {}).get("parity") or {}
        inconclusive = parity.get("inconclusive")
        key = (r.model, (r.spec or {}).get("binarize"), r.format, r.artifact_sha256)
        if inconclusive and key not in seen:
            seen[key] = (f"{r.model} as {r.format}: parity with PyTorch inconclusive: "
                         f"{inconclusive['reason']}; {inconclusive['fix']}")
    return list(seen.values())
