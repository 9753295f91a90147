"""One store record per suite run: pending before the work, ok / failed after it."""

from __future__ import annotations

from collections.abc import Callable

from aiot.core.errors import failure_reason
from aiot.core.host_cpus import host_threads
from aiot.host.robust.target import Target
from aiot.host.store.provenance import base_provenance
from aiot.host.training.trainer import torch_threads

#: Record kinds of the three suites (``aiot report`` has a section for each).
KINDS = ("robust-sysnoise", "robust-corrupt", "robust-attack")


def run_recorded(store, kind: str, target: Target, spec: dict, work: Callable[[dict], dict],
                 sweep_id: str | None = None):
    """Run ``work(provenance)`` as one record of ``kind`` and return ``(result, record)``.

    ``work`` returns the result dict; it may add device/artifact facts to ``provenance``.
    The record's ``accuracy`` column is the result's ``clean_accuracy`` when it has one; a
    quantized target's result says its ``quantization`` (method, bits).
    A failure (or Ctrl-C) finishes the record as failed with the reason, then re-raises.
    ``sweep_id`` files the record under a paper procedure's sweep (its resume point).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown robustness record kind {kind!r}")
    provenance = {**base_provenance(), "target": target.to_dict(), "weights": target.weights_provenance()}
    record = store.begin(kind, {**spec, "target": target.to_dict()}, provenance, device=target.device,
                         model=target.label, format=target.fmt or "pytorch", threads=target.threads,
                         sweep_id=sweep_id)
    threads = host_threads()
    provenance["host_threads"] = threads  # PyTorch's threads here (the idle CPUs at the start)
    try:
        with torch_threads(threads):
            result = work(provenance)
        if target.quantize:  # tables group a bit-width sweep by it
            result = {**result, "quantization": target.quantization()}
    except BaseException as exc:
        reason = "interrupted by user" if isinstance(exc, KeyboardInterrupt) else failure_reason(exc)
        store.finish(record.id, "failed", reason=reason, provenance=provenance)
        raise
    store.finish(record.id, "ok", result=result, provenance=provenance,
                 accuracy=result.get("clean_accuracy"),
                 artifact_sha256=(provenance.get("artifact") or {}).get("sha256"),
                 size_bytes=(provenance.get("artifact") or {}).get("size_bytes"))
    return result, store.get(record.id)
