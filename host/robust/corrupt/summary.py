"""The corruption suite's scores from an accuracy table (pure; ``../shared/spec.md`` §2, §4).

Per corruption c, over the severities evaluated:

* ``NR_c``  = mean accuracy over the severities (RobustMQ);
* ``G_c``   = ``A_clean - NR_c``, the corruption gap (BiBench);
* ``NCI_c`` = ``(A_clean - NR_c) / A_clean`` (RobustMQ).

Over corruptions: ``mNR``, mean G and mean NCI are plain means. With a binarized model evaluated
on the same images, ``OM_robust = sqrt(mean_c (G_c / G_c^bi)^2)`` (BiBench; E over architectures
is over the single architecture evaluated).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from aiot.host.robust.metrics import corruption_gap, mean_over, om_robust, relative_drop


def per_corruption(clean: float, accuracies: Mapping[str, Mapping[int, float]]) -> dict[str, dict]:
    """``{corruption: {"NR", "G", "NCI"}}`` from ``{corruption: {severity: accuracy}}``."""
    scores = {}
    for name, by_severity in accuracies.items():
        nr = mean_over({str(s): a for s, a in by_severity.items()})
        scores[name] = {"NR": nr, "G": corruption_gap(clean, nr), "NCI": relative_drop(clean, nr)}
    return scores


def summarize(clean: float, accuracies: Mapping[str, Mapping[int, float]]) -> dict[str, float]:
    """The headline numbers: clean accuracy, mNR, mean G and mean NCI."""
    scores = per_corruption(clean, accuracies)
    return {"clean_accuracy": clean,
            "mNR": mean_over({c: s["NR"] for c, s in scores.items()}),
            "mean_G": mean_over({c: s["G"] for c, s in scores.items()}),
            "mean_NCI": mean_over({c: s["NCI"] for c, s in scores.items()})}


def om_robust_of(fp_clean: float, fp_acc: Mapping[str, Mapping[int, float]],
                 bin_clean: float, bin_acc: Mapping[str, Mapping[int, float]]) -> float:
    """BiBench's OM_robust of one full-precision / binarized pair of the same architecture.

    Corruptions where the binarized gap is 0 have no ratio and are left out (NaN if none is left).
    """
    fp = per_corruption(fp_clean, fp_acc)
    bi = per_corruption(bin_clean, bin_acc)
    shared = [c for c in fp if c in bi]
    return om_robust({c: [fp[c]["G"]] for c in shared}, {c: [bi[c]["G"]] for c in shared})


def json_safe(value):
    """``value`` with every NaN / infinity replaced by None (the store keeps strict JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
