"""Do devices compute the same outputs for the same artifact?

Every run stores an output fingerprint of the artifact on the agent's seeded input (size, L2
norm, first values; see the agent's ``output`` result field). Runs of one artifact (same
SHA-256) on different devices, runtimes or architectures, x86_64 and an emulated arm64 board
for instance, should agree up to floating-point reassociation. This module groups stored runs
by artifact and compares each fingerprint with a reference run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Allowed difference: |a - b| <= ATOL + RTOL * |b| per value, as numpy.allclose with
#: tolerances loose enough for reordered float32 sums and tight enough to catch a wrong kernel.
ATOL = 1e-4
RTOL = 1e-3


@dataclass(frozen=True)
class Drift:
    """One run compared with its artifact's reference run."""

    record_id: str
    reference_id: str
    device: str
    reference_device: str
    model: str | None
    format: str | None
    threads: int | None
    artifact_sha256: str
    max_abs: float  # largest difference over the fingerprinted values
    l2_rel: float  # relative difference of the output's L2 norms
    verdict: str  # "match" | "mismatch" | "not comparable: why"

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def compare_fingerprints(out: dict, ref: dict, atol: float = ATOL, rtol: float = RTOL) -> tuple[float, float, str]:
    """(max abs difference, relative L2 difference, verdict) of two output fingerprints."""
    if out.get("size") != ref.get("size") or len(out.get("head", [])) != len(ref.get("head", [])):
        return math.nan, math.nan, f"not comparable: output sizes {out.get('size')} vs {ref.get('size')}"
    pairs = list(zip(out["head"], ref["head"]))
    max_abs = max((abs(a - b) for a, b in pairs), default=0.0)
    close = all(abs(a - b) <= atol + rtol * abs(b) for a, b in pairs)
    l2_rel = abs(out["l2"] - ref["l2"]) / max(abs(ref["l2"]), 1e-30)
    close = close and l2_rel <= rtol + atol / max(abs(ref["l2"]), 1e-30)
    return max_abs, l2_rel, "match" if close else "mismatch"


def _is_emulated(record) -> bool:
    labels = ((record.provenance or {}).get("device") or {}).get("labels") or {}
    return bool(labels.get("emulated"))


def _reference(runs: list, prefer_device: str | None):
    """The run others are compared with: the named device's, else a real device's, else the first."""
    if prefer_device:
        named = [r for r in runs if r.device == prefer_device]
        if named:
            return named[0]
    real = [r for r in runs if not _is_emulated(r)]
    return (real or runs)[0]


def output_drift(records, reference_device: str | None = None,
                 atol: float = ATOL, rtol: float = RTOL) -> list[Drift]:
    """Compare every ok run that has a fingerprint with its artifact's reference run.

    Artifacts run on a single device only have nothing to compare and are left out.
    """
    by_artifact: dict[str, list] = {}
    for record in records:
        if record.status == "ok" and record.artifact_sha256 and (record.result or {}).get("output"):
            by_artifact.setdefault(record.artifact_sha256, []).append(record)
    drifts = []
    for sha, runs in by_artifact.items():
        if len({r.device for r in runs}) < 2:
            continue
        ref = _reference(runs, reference_device)
        for run in runs:
            if run is ref:
                continue
            max_abs, l2_rel, verdict = compare_fingerprints(run.result["output"], ref.result["output"], atol, rtol)
            drifts.append(Drift(run.id, ref.id, run.device or "", ref.device or "", run.model, run.format,
                                run.threads, sha, max_abs, l2_rel, verdict))
    return drifts


__all__ = ["ATOL", "RTOL", "Drift", "compare_fingerprints", "output_drift"]
