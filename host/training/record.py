"""Train a zoo model and store the outcome as a ``train`` record."""

from __future__ import annotations

from collections.abc import Callable

from aiot.core.errors import failure_reason
from aiot.host.store.provenance import base_provenance
from aiot.host.store.store import RunRecord, Store
from aiot.host.training.trainer import train, training_threads


def train_and_record(config, store: Store, progress: Callable[[str, int, int], None] | None = None,
                     reuse: bool = True) -> tuple[object, RunRecord]:
    """Run :func:`aiot.host.training.trainer.train` and record it (pending → ok / failed)."""
    import torch

    provenance = {**base_provenance(), "toolchain": {"torch": torch.__version__},
                  "host_threads": training_threads(config)}
    spec = {k: getattr(config, k) for k in config.__dataclass_fields__}
    record = store.begin("train", spec, provenance, model=config.model, device="host")
    try:
        result = train(config, progress=progress, reuse=reuse)
    except BaseException as exc:
        reason = ("interrupted by user; the same command resumes from the last finished epoch"
                  if isinstance(exc, KeyboardInterrupt) else failure_reason(exc))
        store.finish(record.id, "failed", reason=reason)
        raise
    summary = {
        "weights_path": str(result.weights_path), "test_accuracy": result.test_accuracy,
        "train_loss": result.train_loss, "epochs_run": result.epochs_run, "seconds": result.seconds,
        "cached": result.cached, "history": list(result.history),
    }
    store.finish(record.id, "ok", result=summary, accuracy=result.test_accuracy)
    return result, store.get(record.id)
