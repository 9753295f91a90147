"""Latency statistics over raw samples (standard library only).

Besides the classic moments, the summary carries robust measures, because device latencies
are right-skewed with sporadic spikes (scheduler, GC, thermal): the median with a
distribution-free confidence interval, the MAD, a trimmed mean, and Tukey outlier flags.
"""

from __future__ import annotations

import math
import statistics

#: Scales the MAD to estimate the standard deviation of normally distributed data
#: (1 / Φ⁻¹(3/4)), so ``robust_cv`` and ``cv`` agree on Gaussian noise.
MAD_TO_SIGMA = 1.4826
TRIM = 0.10  # trimmed mean: this fraction is cut from each end
CI_LEVEL = 0.95
TUKEY_K = 1.5
OUTLIER_INDEX_CAP = 100
#: Above this count the binomial tail is summed in floating point (see ``median_ci_ranks``).
EXACT_CI_MAX_N = 10_000


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile ``q`` in [0, 100] of already sorted values."""
    if not sorted_values:
        raise ValueError("no samples")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    frac = pos - lo
    return sorted_values[lo] * (1 - frac) + sorted_values[hi] * frac


def mad(sorted_values: list[float], median: float) -> float:
    """Median absolute deviation from ``median``, unscaled (same unit as the values)."""
    return statistics.median(abs(v - median) for v in sorted_values)


def robust_cv(values: list[float]) -> float:
    """``MAD_TO_SIGMA * MAD / median``: a CV that one latency spike cannot inflate."""
    ordered = sorted(values)
    median = percentile(ordered, 50)
    return MAD_TO_SIGMA * mad(ordered, median) / median if median > 0 else 0.0


def trimmed_mean(sorted_values: list[float], trim: float = TRIM) -> float:
    """Mean after dropping ``floor(trim * n)`` values from each end (SciPy's ``trim_mean``).

    With fewer than ``1 / trim`` values nothing is dropped, so it equals the mean.
    """
    cut = math.floor(trim * len(sorted_values))
    return statistics.fmean(sorted_values[cut:len(sorted_values) - cut])


def median_ci_ranks(n: int, level: float = CI_LEVEL) -> tuple[int, int] | None:
    """1-based ranks ``(l, n + 1 - l)`` of a distribution-free CI of the median, or None.

    The count of samples below the true median is Binomial(n, 1/2), so the order statistics
    ``[x(l), x(n+1-l)]`` cover it with probability ``1 - 2 * P(B <= l - 1)``. The largest
    ``l`` whose coverage is still at least ``level`` gives the narrowest such interval; when
    even ``l = 1`` falls short (n < 6 for 95 %) there is none. Up to ``EXACT_CI_MAX_N`` the
    tail is summed in exact integers; beyond, that costs O(n²), so it is summed in floats
    from 10 standard deviations below the mode (by Hoeffding the part skipped is < 2e-22),
    which can move the rank only if the tail lies within ~1e-12 of ``(1 - level) / 2``.
    """
    alpha = (1 - level) / 2
    lower = _lower_rank_exact(n, alpha) if n <= EXACT_CI_MAX_N else _lower_rank_float(n, alpha)
    return (lower, n + 1 - lower) if lower >= 1 else None


def _lower_rank_exact(n: int, alpha: float) -> int:
    """Largest ``l`` with ``P(B <= l - 1) <= alpha``, B ~ Binomial(n, 1/2), in integers."""
    from fractions import Fraction

    share = Fraction(alpha).limit_denominator(10**6)  # 0.025 -> exactly 1/40
    limit = share.numerator << n  # compare tail * denominator with numerator * 2^n
    term, tail, k = 1, 0, 0  # term = C(n, k)
    while k <= n and (tail + term) * share.denominator <= limit:
        tail += term
        term = term * (n - k) // (k + 1)
        k += 1
    return k


def _lower_rank_float(n: int, alpha: float) -> int:
    """``_lower_rank_exact`` for large n: the same tail, summed in floats near the mode."""
    k = max(0, math.floor(n / 2 - 5 * math.sqrt(n)))  # 10 sd (sd = sqrt(n) / 2) below n / 2
    term = math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                    - n * math.log(2))
    tail = 0.0
    while k <= n and tail + term <= alpha:
        tail += term
        term = term * (n - k) / (k + 1)
        k += 1
    return k


def tukey_outliers(samples_ms: list[float], q1: float, q3: float) -> dict:
    """Samples outside Tukey's fences ``[q1 - 1.5 IQR, q3 + 1.5 IQR]``.

    ``indices`` point into the raw (unsorted) samples, in run order, at most
    ``OUTLIER_INDEX_CAP`` of them; ``count`` is the full number.
    """
    spread = TUKEY_K * (q3 - q1)
    low_fence, high_fence = q1 - spread, q3 + spread
    low = [i for i, v in enumerate(samples_ms) if v < low_fence]
    high = [i for i, v in enumerate(samples_ms) if v > high_fence]
    return {"count": len(low) + len(high), "low": len(low), "high": len(high),
            "fences": [low_fence, high_fence],
            "indices": sorted(low + high)[:OUTLIER_INDEX_CAP]}


def summarize_ms(samples_ns: list[int]) -> dict:
    """Summary of per-iteration latencies in milliseconds.

    Fields follow pytest-benchmark's set plus p90/p99 and the coefficient of variation, and
    the robust set: ``mad`` (unscaled), ``robust_cv`` (see ``robust_cv``), ``trimmed_mean``
    (10 % cut from each end), ``median_ci`` (95 %, ``{"level", "low", "high", "ranks"}`` with
    1-based ranks, or None below 6 samples) and Tukey ``outliers``.
    """
    raw = [s / 1e6 for s in samples_ns]
    values = sorted(raw)
    n = len(values)
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if n > 1 else 0.0
    q1, median, q3 = percentile(values, 25), percentile(values, 50), percentile(values, 75)
    deviation = mad(values, median)
    ranks = median_ci_ranks(n)
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
        "mad": deviation,
        "robust_cv": MAD_TO_SIGMA * deviation / median if median > 0 else 0.0,
        "trimmed_mean": trimmed_mean(values),
        "median_ci": None if ranks is None else {
            "level": CI_LEVEL, "low": values[ranks[0] - 1], "high": values[ranks[1] - 1],
            "ranks": list(ranks)},
        "outliers": tukey_outliers(raw, q1, q3),
    }
