"""The robustness papers' formulas on hand-checkable cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aiot.host.robust import metrics


def test_accuracy_and_flip_rate():
    assert metrics.accuracy(np.array([1, 2, 3, 4]), np.array([1, 2, 0, 0])) == 0.5
    assert metrics.flip_rate(np.array([1, 2, 3, 4]), np.array([1, 2, 3, 4])) == 0.0
    assert metrics.flip_rate(np.array([1, 2, 3, 4]), np.array([0, 2, 3, 0])) == 0.5
    assert metrics.accuracy(np.zeros(0), np.zeros(0)) == 0.0
    with pytest.raises(ValueError):
        metrics.accuracy(np.zeros(3), np.zeros(4))


def test_dacc_mean_and_max_over_options():
    out = metrics.dacc(0.90, {"pyav": 0.85, "fast": 0.88, "same": 0.90})
    assert out["per_option"] == pytest.approx({"pyav": 0.05, "fast": 0.02, "same": 0.0})
    assert out["mean"] == pytest.approx(0.07 / 3)
    assert out["max"] == pytest.approx(0.05)
    assert metrics.dacc(0.9, {}) == {"per_option": {}, "mean": 0.0, "max": 0.0}


def test_relative_drop_and_systematic_robustness():
    assert metrics.relative_drop(0.8, 0.6) == pytest.approx(0.25)  # NCI / SNI / AAI
    assert math.isnan(metrics.relative_drop(0.0, 0.0))
    # SNIs 0.0 and 0.25 -> population std 0.125
    assert metrics.systematic_robustness(0.8, [0.8, 0.6]) == pytest.approx(0.125)
    assert metrics.systematic_robustness(0.8, [0.7, 0.7, 0.7]) == pytest.approx(0.0)


def test_om_robust_ratio_of_gaps():
    # per corruption: E(G/G_bi) = 0.5 and 2.0 -> sqrt((0.25 + 4) / 2)
    fp = {"noise": [0.1, 0.1], "blur": [0.2, 0.4]}
    bi = {"noise": [0.2, 0.2], "blur": [0.1, 0.2]}
    assert metrics.om_robust(fp, bi) == pytest.approx(math.sqrt((0.25 + 4.0) / 2))
    # a zero binarized gap makes that corruption's ratio undefined: left out
    assert metrics.om_robust({"a": [0.1], "b": [0.2]}, {"a": [0.0], "b": [0.1]}) == pytest.approx(2.0)
    assert math.isnan(metrics.om_robust({"a": [0.1]}, {"a": [0.0]}))


def test_flip_probability_counts_consecutive_changes():
    seq = np.array([[1, 1, 2, 2], [3, 3, 3, 3]])  # 1 change of 6 consecutive pairs
    assert metrics.flip_probability(seq) == pytest.approx(1 / 6)
    with pytest.raises(ValueError):
        metrics.flip_probability(np.array([1, 2, 3]))


def test_adversarial_indices():
    assert metrics.aai(0.9, 0.45) == pytest.approx(0.5)
    assert metrics.normalized_adversarial_accuracy(0.8, 0.2) == pytest.approx(0.25)
    correct = {"fgsm": np.array([1, 1, 0, 1], bool), "pgd": np.array([1, 0, 0, 1], bool)}
    assert metrics.worst_case_accuracy(correct) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        metrics.worst_case_accuracy({"a": np.ones(2, bool), "b": np.ones(3, bool)})


def test_mean_over_skips_nan():
    assert metrics.mean_over({"a": 0.2, "b": math.nan, "c": 0.4}) == pytest.approx(0.3)
    assert math.isnan(metrics.mean_over({}))
