"""Predictions as records of their own kind, and the measurements that later check them.

``aiot predict -m MODEL`` stores each prediction as a ``prediction`` record (device, model,
format, threads as any run's; the predicted median and interval in its result; no
``median_ms``, which is only ever measured). A later VALID run of the same model (same file
hash for a user's model) on the same device, format and thread count checks it: ``aiot results
show`` and the report put the two side by side. This module only reads and matches records, so
the views below the predictor (the CLI's record view, the report) need nothing of it.
"""

from __future__ import annotations

PREDICTION = "prediction"


def _target(record) -> tuple:
    spec = record.spec or {}
    return (record.device, record.model, spec.get("model_sha256"), record.format, record.threads)


def checks(prediction, measured) -> bool:
    """Whether ``measured`` (a latency record) is a later run of what ``prediction`` predicted."""
    spec = measured.spec or {}
    return (prediction.kind == PREDICTION and measured.kind == "latency" and prediction.status == "ok"
            and measured.status == "ok" and measured.median_ms is not None
            and _target(prediction) == _target(measured) and not spec.get("native")
            and not spec.get("options") and not spec.get("input_shapes")
            and measured.created_at >= prediction.created_at and _after(measured, prediction))


def _after(measured, prediction) -> bool:
    """Whether ``measured`` ended after ``prediction`` was stored: a record's start is kept to
    the second, its end to the microsecond, so a run of the same second is told apart."""
    return (measured.finished_at or "") > (prediction.finished_at or "")


def predicted_before(store, measured):
    """The newest prediction of ``measured``'s model and target made before it ran, or None."""
    if measured.kind != "latency":
        return None
    found = [p for p in store.query(kind=PREDICTION, device=measured.device, model=measured.model,
                                    fmt=measured.format) if checks(p, measured)]
    return found[-1] if found else None


def pairs(records) -> list[tuple]:
    """``(prediction, measured)`` for every latency record of ``records`` that a prediction
    among them came before (the newest such prediction), oldest measurement first."""
    predictions = sorted((r for r in records if r.kind == PREDICTION and r.status == "ok"),
                         key=lambda r: r.created_at)
    out = []
    for measured in sorted((r for r in records if r.kind == "latency"), key=lambda r: r.created_at):
        before = [p for p in predictions if checks(p, measured)]
        if before:
            out.append((before[-1], measured))
    return out


def error_pct(prediction, measured) -> float | None:
    """How far the measurement lies from the prediction, in % of the measurement."""
    predicted = (prediction.result or {}).get("predicted_ms")
    if not isinstance(predicted, (int, float)) or not measured.median_ms:
        return None
    return 100.0 * (predicted - measured.median_ms) / measured.median_ms


def inside(prediction, measured) -> bool | None:
    """Whether the measurement lies inside the prediction's interval (None: it has none)."""
    result = prediction.result or {}
    low, high = result.get("low_ms"), result.get("high_ms")
    if not isinstance(low, (int, float)) or not isinstance(high, (int, float)):
        return None
    return low <= measured.median_ms <= high


def line(prediction, measured) -> str:
    """``2.84 ms (2.51–3.20) by the predictor of 2026-12-02 (record 1a2b3c4d); measured 2.95 ms:
    -3.7 %, inside the interval``: one line for a record view."""
    result = prediction.result or {}
    error = error_pct(prediction, measured)
    where = inside(prediction, measured)
    text = (f"{result.get('predicted_ms', 0):.4g} ms ({result.get('low_ms', 0):.4g}–"
            f"{result.get('high_ms', 0):.4g}) on {prediction.created_at[:10]} "
            f"(record {prediction.id[:8]}); measured {measured.median_ms:.4g} ms")
    if error is not None:
        text += f": prediction {error:+.1f} %"
    if where is not None:
        text += ", inside the interval" if where else ", outside the interval"
    if measured.validity != "VALID":
        text += f" (this run is {measured.validity or 'unjudged'})"
    return text
