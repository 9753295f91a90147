"""The report's part on predictions (``aiot predict -m``): each stored prediction beside the
runs that measured its model afterwards, on the same device, format and thread count.

It reads the ``prediction`` records (:mod:`aiot.host.store.predictions`) and the report's own
runs; the predictor itself is never imported. A summarised report (a large store) pairs them
with the newest runs it lists.
"""

from __future__ import annotations

from aiot.host.report.page import Section
from aiot.host.report.robust import kind_table
from aiot.host.store import identity
from aiot.host.store.predictions import PREDICTION


def without(others: dict[str, list]) -> dict[str, list]:
    """``others`` less the predictions, which have this section rather than a generic one."""
    return {kind: records for kind, records in others.items() if kind != PREDICTION}


def _later(prediction, runs) -> list:
    """The report's ok runs of what ``prediction`` predicted, made after it (oldest first)."""
    return sorted((r for r in runs if r.status == "ok" and r.latency_ms is not None
                   and (r.device, r.model, r.format, r.threads) == (
                       prediction.device, prediction.model, prediction.format, prediction.threads)
                   and not r.native and not r.cluster and r.created_at >= prediction.created_at),
                  key=lambda r: r.created_at)


def rows(predictions, runs) -> list[dict]:
    """One row per prediction and later run (a prediction not measured yet: one row alone)."""
    out = []
    for p in sorted(predictions, key=lambda r: r.created_at):
        result = p.result or {}
        head = {"device": p.device, "host": identity.host_name_of(p), "model": p.model,
                "format": p.format, "status": p.status, "accuracy": None, "threads": p.threads,
                "predicted_ms": result.get("predicted_ms"), "low_ms": result.get("low_ms"),
                "high_ms": result.get("high_ms"), "predicted_at": p.created_at}
        later = _later(p, runs)
        for run in later:
            error = (100.0 * (head["predicted_ms"] - run.latency_ms) / run.latency_ms
                     if isinstance(head["predicted_ms"], (int, float)) else None)
            out.append({**head, "measured_ms": run.latency_ms, "error_pct": error,
                        "measured_at": run.created_at, "validity": run.validity, "id": run.id})
        if not later:
            out.append({**head, "measured_ms": None, "error_pct": None, "measured_at": None,
                        "validity": None, "id": p.id})
    return out


def sections(report) -> list[Section]:
    """The predictions section, or none when the records hold no prediction."""
    predictions = report.others.get(PREDICTION) or []
    if not predictions:
        return []
    found = rows(predictions, report.runs)
    measured = [r for r in found if r["measured_ms"] is not None]
    intro = ("Latency predicted by aiot predict before a model ran, beside each run that measured "
             "it later on the same device, format and threads (error: predicted against measured, "
             "in % of the measurement; a row without a measurement is a prediction not checked yet).")
    if measured:
        inside = sum(1 for r in measured if r["low_ms"] is not None and r["high_ms"] is not None
                     and r["low_ms"] <= r["measured_ms"] <= r["high_ms"])
        within = sum(1 for r in measured if r["error_pct"] is not None and abs(r["error_pct"]) <= 10)
        intro += (f" {within} of {len(measured)} measurements lie within ±10 % of their prediction, "
                  f"{inside} inside its 95 % interval.")
    return [Section("predictions", "Predicted against measured", intro,
                    tables=(kind_table(f"kind_{PREDICTION}", "Predictions and later runs", found),))]
