"""Latency statistics over raw samples (standard library only)."""

from __future__ import annotations

import math
import statistics


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile ``q`` in [0, 100] of already sorted values."""
    if not sorted_values:
        raise ValueError("no samples")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    frac = pos - lo
    return sorted_values[lo] * (1 - frac) + sorted_values[hi] * frac


def summarize_ms(samples_ns: list[int]) -> dict:
    """Summary of per-iteration latencies in milliseconds.

    Fields follow pytest-benchmark's set plus p90/p99 and the coefficient of variation.
    """
    values = sorted(s / 1e6 for s in samples_ns)
    n = len(values)
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if n > 1 else 0.0
    q1, median, q3 = percentile(values, 25), percentile(values, 50), percentile(values, 75)
    return {
        "count": n,
        "min": values[0],
        "max": values[-1],
        "mean": mean,
        "std": std,
        "median": median,
        "q1": q1,
        "q3": q3,
        "iqr": q3 - q1,
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "cv": std / mean if mean > 0 else 0.0,
    }
