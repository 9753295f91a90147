"""A prediction kept as a store record (kind ``prediction``), so a later run checks it."""

from __future__ import annotations

from pathlib import Path

from aiot.host.predict.predictor import Prediction, Predictor
from aiot.host.store import open_store
from aiot.host.store.predictions import PREDICTION
from aiot.host.store.provenance import base_provenance
from aiot.models.model_ref import ModelRef


def store_prediction(results_dir: Path, prediction: Prediction, ref: ModelRef,
                     predictor: Predictor):
    """Write ``prediction`` of ``ref`` as an ok ``prediction`` record and return the record.

    Its columns are a run's (device, model, format, threads) so the run that measures the model
    later finds it (:func:`aiot.host.store.predictions.predicted_before`); the predicted times
    live in its result only: ``median_ms`` is never a prediction.
    """
    spec = {"device": prediction.device, "model": ref.name, "model_sha256": ref.sha256,
            "format": prediction.format, "threads": prediction.threads,
            "predictor": prediction.predictor}
    provenance = {**base_provenance(), "source": ref.source(),
                  "predictor": {k: predictor.provenance.get(k) for k in
                                ("fitted_at", "aiot_version", "sklearn_version", "runs", "kernel_samples")}}
    result = {"predicted_ms": prediction.ms, "low_ms": prediction.low_ms, "high_ms": prediction.high_ms,
              "interval": "95 %", "kernels": len(prediction.kernels),
              "warnings": len(prediction.warnings), "warning_lines": prediction.warnings,
              "by_kernel": [k.to_dict() for k in prediction.kernels]}
    with open_store(results_dir) as store:
        record = store.begin(PREDICTION, spec, provenance, device=prediction.device, model=ref.name,
                             format=prediction.format, threads=prediction.threads)
        store.finish(record.id, "ok", result=result)
        return store.get(record.id)
