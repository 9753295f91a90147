"""Stored records as people read them: a spreadsheet-ready CSV and ``results show``'s lines.

The CSV has one flat column per fact a spreadsheet filters or plots by (latency statistics,
input shape, runtime and version, SoC and CPU, via, delegate, the placement, emulated, the
validity reasons); the JSON blobs of statistics and provenance stay as the last two columns
for whatever the flat ones leave out. Text a spreadsheet would run as a formula, and control
characters, are neutralised (:func:`aiot.core.untrusted.csv_cell`); the store keeps them.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from aiot.core.untrusted import csv_cell
from aiot.host.engine.input_values import values_detail
from aiot.host.engine.validity import limits_text, verdict_text
from aiot.host.store.identity import host_name_of, shape_label
from aiot.host.store.placement import placement_text
from aiot.host.transports.probe import emulated

if TYPE_CHECKING:  # annotations only: the store stays out of `aiot --help`'s imports
    from aiot.host.store.store import RunRecord

#: The record's own columns, first and in this order (older exports had exactly these, less
#: ``host``: the host that drove the run, :func:`aiot.host.store.identity.host_name_of`).
#: With :data:`CSV_EXTRA` and the two JSON blobs, the export's columns whatever its rows hold
#: (:data:`CSV_COLUMNS`): a column with one value in every row, or with none, stays.
FLAT_COLUMNS = ("id", "sweep_id", "kind", "status", "reason", "created_at", "finished_at", "device",
                "host", "model", "format", "threads", "artifact_sha256", "size_bytes", "median_ms",
                "p90_ms", "load_ms", "accuracy")

#: What a CSV row adds: statistics, what ran where, and what makes two runs of a model differ.
CSV_EXTRA = ("mean_ms", "min_ms", "max_ms", "std_ms", "n", "robust_cv", "input_shape",
             "input_values",
             "runtime", "runtime_version", "soc", "cpu", "cores", "via", "native", "delegate",
             "placement", "emulated", "validity", "validity_reasons", "validity_limits", "parity",
             "quant", "binarize", "cluster", "weights")

#: ``results export --format csv``'s header: every file has exactly these columns.
CSV_COLUMNS = (*FLAT_COLUMNS, *CSV_EXTRA, "stats_ms", "provenance")


def input_shape(record: RunRecord) -> str | None:
    """``1x3x224x224``, or ``a=1x4 b=1x4`` for several inputs, as the tables show it."""
    text = shape_label(record, width=None)
    return None if text == "—" else text


def csv_extras(record: RunRecord) -> dict:
    """The flat columns :data:`CSV_EXTRA` of one record (None where a fact is unknown)."""
    spec, prov, result = record.spec or {}, record.provenance or {}, record.result or {}
    stats = result.get("stats_ms") or {}
    device = prov.get("device") or {}
    runtime = prov.get("runtime") or {}
    converter = prov.get("converter") or {}
    quant = ((spec.get("options") or {}).get("quant") or converter.get("quant")
             or (converter.get("options") or {}).get("quant"))
    recorded = prov.get("weights") if isinstance(prov.get("weights"), dict) else {}
    validity = result.get("validity") or {}
    parity = (prov.get("artifact") or {}).get("parity") or {}
    return {
        "mean_ms": stats.get("mean"), "min_ms": stats.get("min"), "max_ms": stats.get("max"),
        "std_ms": stats.get("std"), "n": stats.get("count"), "robust_cv": stats.get("robust_cv"),
        "input_shape": input_shape(record),
        # given values, or made-up integers and their range (a control input's path)
        "input_values": values_detail(result),
        "runtime": runtime.get("backend"), "runtime_version": runtime.get("version"),
        "soc": device.get("soc_name") or device.get("soc"), "cpu": device.get("cpu_model"),
        "cores": device.get("cores"), "via": spec.get("via") or ("shell" if record.kind == "latency" else None),
        "native": spec.get("native"), "delegate": spec.get("delegate"),
        "placement": placement_text(result),  # which operators the engine took, or None
        "emulated": emulated(device) if device else None,
        "validity": verdict_text(validity) or record.validity,
        "validity_reasons": "; ".join(validity.get("reasons") or []) or None,
        "validity_limits": limits_text(validity["limits"]) if validity.get("limits") else None,
        "parity": parity.get("verdict"), "quant": quant, "binarize": spec.get("binarize"),
        "cluster": spec.get("cluster"),
        "weights": spec.get("weights") or recorded.get("file") or recorded.get("origin"),
    }


def to_csv(records) -> str:
    """One row per record: :data:`FLAT_COLUMNS`, :data:`CSV_EXTRA`, then the JSON blobs."""
    return "".join(csv_chunks(records))


def export_row(record: RunRecord) -> dict:
    """One record's values under :data:`CSV_COLUMNS`, as they are (not yet CSV text): a CSV
    row, a Parquet row and a DataFrame row of ``results export`` and the Python API."""
    row = {k: getattr(record, k, None) for k in FLAT_COLUMNS}
    row["host"] = host_name_of(record)  # the store's column, not the record's: its provenance's
    row.update(csv_extras(record))
    row["stats_ms"] = json.dumps((record.result or {}).get("stats_ms"))
    row["provenance"] = json.dumps(record.provenance, sort_keys=True)
    return row


def csv_chunks(records: Iterable) -> Iterator[str]:
    """:func:`to_csv`'s text a row at a time (a whole store is never in memory)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in records:
        # A device's text may hold formulas and control bytes (ESC, a lone "\r" that readers
        # take for a line end): each cell as aiot.core.untrusted writes CSV text.
        writer.writerow({k: csv_cell(v) for k, v in export_row(r).items()})
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()
    yield buf.getvalue()  # the header of an empty export


class Counted:
    """The items of an iterable, counted as they go through (a streamed export's total)."""

    def __init__(self, items: Iterable) -> None:
        self.items, self.count = items, 0

    def __iter__(self) -> Iterator:
        for item in self.items:
            self.count += 1
            yield item


def json_chunks(records: Iterable) -> Iterator[str]:
    """``json.dumps([r.to_dict() ...], indent=2, sort_keys=True) + "\n"`` (what
    ``results export --format json`` writes and ``compare``/``import`` read), a record at a
    time: the same bytes, never the whole list in memory."""
    opened = False
    for r in records:
        text = json.dumps(r.to_dict(), indent=2, sort_keys=True, default=str)
        yield ("," if opened else "[") + "\n  " + text.replace("\n", "\n  ")
        opened = True
    yield "\n]\n" if opened else "[]\n"


def _ms(value) -> str:
    """Milliseconds to about four significant digits, as the run tables print them."""
    if not isinstance(value, (int, float)):
        return "—"
    return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"


def stats_line(stats: dict) -> str:
    """``n 50 · median 1.234 (95% CI 1.2–1.25) · mean … · p90 … · robust CV 1.2% · 2 outliers``:
    every number rounded, the unit in the row's label, each name once."""
    parts = [f"n {stats['count']}"] if stats.get("count") is not None else []
    median = stats.get("median")
    if median is not None:
        ci = stats.get("median_ci")
        ci_text = f" ({ci['level']:.0%} CI {_ms(ci['low'])}–{_ms(ci['high'])})" if ci else ""
        parts.append(f"median {_ms(median)}{ci_text}")
    parts += [f"{name} {_ms(stats[key])}" for name, key in (
        ("mean", "mean"), ("min", "min"), ("max", "max"), ("std", "std"), ("p90", "p90"),
        ("p99", "p99")) if stats.get(key) is not None]
    if stats.get("robust_cv") is not None:
        parts.append(f"robust CV {stats['robust_cv']:.1%}")
    elif stats.get("cv") is not None:
        parts.append(f"CV {stats['cv']:.1%}")
    outliers = stats.get("outliers")
    if outliers:
        parts.append(f"{outliers['count']} outlier{'s' if outliers['count'] != 1 else ''}")
    return " · ".join(parts)


def parity_line(parity: dict | None) -> str | None:
    """``inconclusive: <why>; fix: …`` or ``pass (max abs 1e-07, top-1 100%)``; None without one."""
    if not parity:
        return None
    if parity.get("checked") is False:  # a user's artifact: nothing to compare with
        return f"not checked: {parity.get('reason') or 'no PyTorch original'}"
    verdict = parity.get("verdict") or ("pass" if parity.get("ok") else "fail")
    if parity.get("inconclusive"):
        return f"inconclusive: {parity['inconclusive']['reason']}; fix: {parity['inconclusive']['fix']}"
    facts = []
    if parity.get("nonfinite"):
        facts.append(nonfinite_text(parity["nonfinite"]))
    if parity.get("max_abs") is not None:
        facts.append(f"max abs {parity['max_abs']:.1e}")
    if parity.get("top1_agreement") is not None:
        facts.append(f"top-1 {parity['top1_agreement']:.0%}")
    line = f"{verdict} ({', '.join(facts)})" if facts else verdict
    per_output = outputs_parity_text(parity)
    return f"{line}; {per_output}" if per_output else line


def outputs_parity_text(parity: dict | None) -> str | None:
    """``per output: scores max abs 2.1e-07, top-1 100%; boxes …`` for a model with several
    outputs (each judged alone, after all of them together); None for one output."""
    outputs = (parity or {}).get("outputs")
    if not outputs:
        return None
    return "per output: " + "; ".join(
        f"{o['name']} {'' if o['ok'] else 'FAILS: '}max abs {o['max_abs']:.1e}, "
        f"top-1 {o['top1_agreement']:.0%}" for o in outputs)


def nonfinite_text(counts: dict) -> str:
    """``NaN/Inf: PyTorch 4, the artifact 4, at the same places`` from a parity report's
    ``nonfinite``, or ``2 NaN, 1 Inf, 1 -Inf of 4 values`` from an output fingerprint's."""
    if "reference" in counts:
        where = ("at the same places" if not counts["disagree"]
                 else f"{counts['disagree']} place(s) differ")
        return f"NaN/Inf: PyTorch {counts['reference']}, the artifact {counts['artifact']}, {where}"
    parts = [f"{counts[k]} {name}" for k, name in (("nan", "NaN"), ("inf", "Inf"), ("-inf", "-Inf"))
             if counts.get(k)]
    return ", ".join(parts) or "none"

