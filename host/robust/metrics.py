"""The robustness papers' metrics, as pure functions over predictions and accuracies.

Accuracies are fractions in [0, 1]. Formulas (``../shared/spec.md`` §2–5):

* SysNoise: ``dACC = ACC_original - ACC_sysnoise``, mean and max over a noise type's options;
  flip rate = share of images whose top-1 changes (needs no labels).
* RobustMQ systematic: ``SNI = (ACC_clean - SR) / ACC_clean``; systematic robustness = std of
  SNI over the methods. Natural: ``NCI = (ACC_clean - NR) / ACC_clean``, ``mNR`` = mean NR over
  corruptions; flip probability ``FP`` = share of consecutive frames whose prediction changes,
  ``mFP`` = its mean over corruptions. Adversarial: ``AR = 1 - ASR`` (accuracy under attack),
  ``AAI = (ACC_clean - AR) / ACC_clean``, ``WCAR`` = accuracy when any attack in the set that
  succeeds counts as a failure.
* BiBench: corruption gap ``G = A_norm - A_corr``; ``OM_robust = sqrt(mean_i E^2(G_i / G_i^bi))``
  (FP gap over binarized gap, per corruption i, E = mean over architectures).
* ARBiBench: ``ACC*`` = accuracy on adversarial examples; normalized = ``ACC* / ACC_clean``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np


def accuracy(predicted: np.ndarray, labels: np.ndarray) -> float:
    """Top-1 accuracy of predicted class ids against labels (0.0 for no images)."""
    predicted, labels = np.asarray(predicted), np.asarray(labels)
    if predicted.shape != labels.shape:
        raise ValueError(f"{predicted.shape[0] if predicted.ndim else 0} predictions for "
                         f"{labels.shape[0] if labels.ndim else 0} labels")
    return float((predicted == labels).mean()) if len(labels) else 0.0


def flip_rate(reference: np.ndarray, other: np.ndarray) -> float:
    """Share of images whose top-1 class differs between two pipelines (no labels needed)."""
    reference, other = np.asarray(reference), np.asarray(other)
    if reference.shape != other.shape:
        raise ValueError(f"cannot compare {reference.shape} predictions with {other.shape}")
    return float((reference != other).mean()) if len(reference) else 0.0


def dacc(reference_acc: float, option_accs: Mapping[str, float]) -> dict:
    """SysNoise's accuracy drop of each option, and its mean and max over the options."""
    drops = {name: reference_acc - acc for name, acc in option_accs.items()}
    values = list(drops.values())
    return {"per_option": drops, "mean": float(np.mean(values)) if values else 0.0,
            "max": max(values) if values else 0.0}


def relative_drop(clean: float, perturbed: float) -> float:
    """``(clean - perturbed) / clean``: RobustMQ's NCI (natural) and SNI (systematic)."""
    if clean <= 0:
        return math.nan
    return (clean - perturbed) / clean


def systematic_robustness(clean: float, method_accs: Iterable[float]) -> float:
    """RobustMQ: population std of SNI over the decoding/resize methods (lower is steadier)."""
    snis = [relative_drop(clean, acc) for acc in method_accs]
    return float(np.std(snis)) if snis else math.nan


def corruption_gap(clean: float, corrupted: float) -> float:
    """BiBench's ``G = A_norm - A_corr``."""
    return clean - corrupted


def om_robust(fp_gaps: Mapping[str, Sequence[float]], bin_gaps: Mapping[str, Sequence[float]]) -> float:
    """BiBench's ``sqrt(mean_i E^2(G_i / G_i^bi))`` over corruptions ``i``.

    Args:
        fp_gaps: per corruption, the full-precision models' gaps (one per architecture).
        bin_gaps: per corruption, the binarized models' gaps, same architectures and order.

    Corruptions whose binarized gap is 0 (the ratio is undefined) are left out; NaN if none is left.
    """
    squares = []
    for name, fp in fp_gaps.items():
        bi = bin_gaps.get(name)
        if bi is None or len(bi) != len(fp) or not len(fp):
            continue
        ratios = [f / b for f, b in zip(fp, bi) if b != 0]
        if len(ratios) == len(fp):
            squares.append(float(np.mean(ratios)) ** 2)
    return math.sqrt(float(np.mean(squares))) if squares else math.nan


def flip_probability(sequence_predictions: np.ndarray) -> float:
    """RobustMQ/ImageNet-P ``FP``: share of consecutive frames whose top-1 changes.

    Args:
        sequence_predictions: ``(sequences, frames)`` class ids, frames in order of
            increasing perturbation.
    """
    seq = np.asarray(sequence_predictions)
    if seq.ndim != 2 or seq.shape[1] < 2:
        raise ValueError("flip probability needs (sequences, frames >= 2) predictions")
    return float((seq[:, 1:] != seq[:, :-1]).mean())


def mean_over(values: Mapping[str, float]) -> float:
    """Mean over named values (mNR over corruptions, mFP over perturbation types)."""
    finite = [v for v in values.values() if not math.isnan(v)]
    return float(np.mean(finite)) if finite else math.nan


def aai(clean: float, robust: float) -> float:
    """RobustMQ's adversarial accuracy index ``(ACC_clean - AR) / ACC_clean``."""
    return relative_drop(clean, robust)


def normalized_adversarial_accuracy(clean: float, robust: float) -> float:
    """ARBiBench: ``ACC* / ACC_clean``."""
    return robust / clean if clean > 0 else math.nan


def worst_case_accuracy(correct_per_attack: Mapping[str, np.ndarray]) -> float:
    """RobustMQ's WCAR: an image counts only if it is classified correctly under every attack.

    Args:
        correct_per_attack: per attack, a boolean ``(N,)`` of "still correct" over the same images.
    """
    arrays = [np.asarray(v, dtype=bool) for v in correct_per_attack.values()]
    if not arrays:
        return math.nan
    if len({a.shape for a in arrays}) != 1:
        raise ValueError("every attack must be evaluated on the same images")
    return float(np.logical_and.reduce(arrays).mean()) if len(arrays[0]) else 0.0
