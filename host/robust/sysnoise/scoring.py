"""Scoring one noise option against the reference pipeline: pixels, predictions, accuracy.

Every option of every noise type becomes an :class:`OptionResult` (one table row). Options
that could not be evaluated keep their reason in ``status`` and no numbers, so they never
count as a zero finding in the type's mean and max.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from aiot.host.robust import metrics

#: ``status`` of an option that was evaluated.
OK = "ok"


@dataclass(frozen=True)
class PixelDiff:
    """How two sets of uint8 images differ.

    Attributes:
        max_abs: largest absolute difference of any channel of any pixel.
        changed: share of pixels with any channel different.
        mean_abs: mean absolute difference over all values.
    """

    max_abs: int
    changed: float
    mean_abs: float

    @property
    def identical(self) -> bool:
        return self.max_abs == 0


def pixel_diff(reference: Sequence[np.ndarray], other: Sequence[np.ndarray]) -> PixelDiff:
    """Compare two equally long sequences of same-shaped uint8 images (sizes may vary by index)."""
    if len(reference) != len(other):
        raise ValueError(f"cannot compare {len(reference)} images with {len(other)}")
    worst, changed, pixels, total, values = 0, 0, 0, 0.0, 0
    for a, b in zip(reference, other, strict=True):
        if a.shape != b.shape:
            raise ValueError(f"image shapes differ: {a.shape} vs {b.shape}")
        diff = np.abs(a.astype(np.int16) - b.astype(np.int16))
        per_pixel = diff if diff.ndim == 2 else diff.max(axis=-1)
        worst = max(worst, int(diff.max(initial=0)))
        changed += int(np.count_nonzero(per_pixel))
        pixels += per_pixel.size
        total += float(diff.sum())
        values += diff.size
    return PixelDiff(worst, changed / pixels if pixels else 0.0, total / values if values else 0.0)


@dataclass
class OptionResult:
    """One option of a noise type, scored against the type's reference.

    Attributes:
        name: option name (``pyav``, ``cv2-linear``, ``int8``, a device name).
        setting: what the option is, or the case it belongs to (``64->28 down``).
        status: :data:`OK`, or why it has no numbers (``unavailable: ...``, ``not applicable: ...``).
        accuracy: top-1 accuracy (None without labels).
        reference_accuracy: the reference's accuracy in the same case (dACC's minuend).
        flip: share of images whose top-1 differs from the reference's.
        pixels: difference of the model-size images from the reference's (pre-processing types).
        max_logit: largest |score difference| from the reference (model-side types).
        extra: anything else a table wants (artifact hash, changed layers).
    """

    name: str
    setting: str = ""
    status: str = OK
    accuracy: float | None = None
    reference_accuracy: float | None = None
    flip: float | None = None
    pixels: PixelDiff | None = None
    max_logit: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def dacc(self) -> float | None:
        """SysNoise's ``dACC = ACC_reference - ACC_option`` (None without labels)."""
        if self.accuracy is None or self.reference_accuracy is None:
            return None
        return self.reference_accuracy - self.accuracy

    @property
    def sni(self) -> float | None:
        """RobustMQ's ``SNI = (ACC_clean - SR) / ACC_clean`` (None without labels or accuracy)."""
        if self.accuracy is None or self.reference_accuracy is None:
            return None
        value = metrics.relative_drop(self.reference_accuracy, self.accuracy)
        return None if math.isnan(value) else value


def score(name: str, reference_pred: np.ndarray, option_pred: np.ndarray, labels: np.ndarray | None,
          setting: str = "", pixels: PixelDiff | None = None,
          reference_scores: np.ndarray | None = None, option_scores: np.ndarray | None = None,
          **extra) -> OptionResult:
    """Score an option's top-1 predictions against the reference's (and the labels, if any)."""
    max_logit = None
    if reference_scores is not None and option_scores is not None:
        max_logit = float(np.abs(reference_scores - option_scores).max(initial=0.0))
    labelled = labels is not None
    return OptionResult(
        name, setting,
        accuracy=metrics.accuracy(option_pred, labels) if labelled else None,
        reference_accuracy=metrics.accuracy(reference_pred, labels) if labelled else None,
        flip=metrics.flip_rate(reference_pred, option_pred), pixels=pixels, max_logit=max_logit,
        extra=extra)


def skipped(name: str, status: str, setting: str = "") -> OptionResult:
    """A row without numbers: the option could not run or cannot matter (``status`` says why)."""
    return OptionResult(name, setting, status=status)


def summarize(results: Sequence[OptionResult]) -> dict[str, float]:
    """A noise type's headline numbers over its evaluated options.

    ``dacc_mean``/``dacc_max`` (SysNoise, labelled data only), ``flip_mean``/``flip_max`` and
    ``agreement_min`` (top-1 agreement = 1 - flip rate) and ``options`` (how many counted).
    """
    done = [r for r in results if r.ok]
    summary: dict[str, float] = {"options": float(len(done))}
    if not done:
        return summary
    flips = [r.flip for r in done if r.flip is not None]
    if flips:
        summary.update(flip_mean=float(np.mean(flips)), flip_max=float(max(flips)),
                       agreement_min=1.0 - float(max(flips)))
    drops = [r.dacc for r in done]
    if all(d is not None for d in drops):
        summary.update(dacc_mean=float(np.mean(drops)), dacc_max=float(max(drops)))
    return summary


def systematic_robustness(results: Sequence[OptionResult]) -> float | None:
    """RobustMQ's systematic robustness: population std of SNI over the methods.

    The methods are the reference itself (SNI 0) and every evaluated option, all scored against
    the same reference; None without labels, without options, or with a zero clean accuracy.
    """
    done = [r for r in results if r.ok]
    if not done or any(r.accuracy is None or r.reference_accuracy is None for r in done):
        return None
    clean = done[0].reference_accuracy
    if any(r.reference_accuracy != clean for r in done):
        raise ValueError("systematic robustness needs one reference accuracy for all methods")
    value = metrics.systematic_robustness(clean, [clean, *(r.accuracy for r in done)])
    return None if math.isnan(value) else value
