"""Parity of an artifact with its PyTorch original, run through the device agent's backends.

The host checks with the very code the device runs (``aiot.device_agent.backends``), on
deterministic inputs, one image at a time (artifacts are exported at batch 1).
"""

from __future__ import annotations

import contextlib
import gc
import logging
from pathlib import Path

from aiot.host.errors import AccuracyMismatch, ArtifactError
from aiot.host.quiet import toolchain_output_to_log

log = logging.getLogger(__name__)


def compare_outputs(reference, actual, atol: float, rtol: float) -> dict:
    """Error statistics between two ``(N, classes)`` arrays; ``ok`` when within tolerance.

    The relative error is normalised by the largest reference magnitude per sample, so
    near-zero logits do not blow it up.
    """
    import numpy as np

    ref = np.asarray(reference, dtype=np.float64).reshape(len(reference), -1)
    act = np.asarray(actual, dtype=np.float64).reshape(len(actual), -1)
    if ref.shape != act.shape:
        return {"ok": False, "reason": f"output shape {act.shape} != PyTorch {ref.shape}",
                "max_abs": float("inf"), "max_rel": float("inf"), "mean_abs": float("inf"),
                "top1_agreement": 0.0, "n": len(ref), "atol": atol, "rtol": rtol}
    diff = np.abs(ref - act)
    scale = np.maximum(np.abs(ref).max(axis=1, keepdims=True), 1e-6)
    max_abs = float(diff.max())
    max_rel = float((diff / scale).max())
    agreement = float(np.mean(ref.argmax(1) == act.argmax(1)))
    return {
        "ok": bool(max_abs <= atol or max_rel <= rtol),
        "max_abs": max_abs, "max_rel": max_rel, "mean_abs": float(diff.mean()),
        "top1_agreement": agreement, "n": int(len(ref)), "atol": atol, "rtol": rtol,
    }


@contextlib.contextmanager
def _torch_threads_kept():
    """Keep the host's torch thread count: the PyTorch Mobile backend sets it process-wide,
    which is right in the agent's own process but not in this one, where training follows."""
    import sys

    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    try:
        yield
    finally:
        if before is not None:
            torch.set_num_threads(before)


def run_artifact(backend_name: str, artifact: Path, inputs) -> "object":
    """Outputs of ``artifact`` for each row of ``inputs`` (numpy, batch first).

    Raises:
        ArtifactError: the runtime cannot load the file (truncated, corrupt, unsupported).
    """
    import numpy as np

    from aiot.device_agent import backends

    backend = backends.load(backend_name)
    with toolchain_output_to_log(log), _torch_threads_kept():
        try:
            session = backend.open(str(artifact), 1)
        except Exception as exc:
            detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            raise ArtifactError(f"{backend_name} cannot load {artifact}: {detail}",
                                "the file is truncated or corrupt; re-convert it") from None
        rows = [np.array(session.run(np.ascontiguousarray(x[None], dtype=np.float32)
                                     .reshape(session.input_shape)), copy=True) for x in inputs]
        del session  # release the runtime while its chatter still goes to the log
        gc.collect()
    return np.stack([r.reshape(-1) for r in rows])


def check_parity(fmt: str, backend: str, artifact: Path, model, inputs, atol: float,
                 rtol: float = 1e-3) -> dict:
    """Compare ``artifact`` with ``model`` on ``inputs`` (a torch batch).

    Returns:
        The parity report (max_abs, max_rel, mean_abs, top1_agreement, n, atol, rtol, ok).

    Raises:
        AccuracyMismatch: outside tolerance; the report is attached.
    """
    import torch

    with torch.no_grad():
        reference = model(inputs).reshape(len(inputs), -1).numpy()
    actual = run_artifact(backend, artifact, inputs.numpy())
    report = compare_outputs(reference, actual, atol, rtol)
    log.info("%s parity: max abs %.3g, max rel %.3g, top-1 %.0f%%", fmt, report["max_abs"],
             report["max_rel"], 100 * report["top1_agreement"])
    if not report["ok"]:
        raise AccuracyMismatch(fmt, report)
    return report
