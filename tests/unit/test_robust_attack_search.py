"""NATTACK and Evolutionary (our implementations) on a hand-built linear classifier.

The toy model scores an 8x8 gray image with ``s = Σ w·(x - 0.5)``, ``w`` = +1 on the left half
and -1 on the right: class 0 when ``s > 0``. The clean image ``x = 0.5 + 0.005·w`` has ``s = 0.32``,
so an L∞ adversarial exists exactly when ε > 0.005 (``|Σ w·δ| ≤ 64 ε``) and the smallest L2
adversarial is at ``0.32 / ‖w‖ = 0.04``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from aiot.host.robust.attacks import blackbox
from aiot.host.robust.attacks.base import Problem
from aiot.host.robust.attacks.evolutionary import EvolutionarySettings, evolutionary
from aiot.host.robust.attacks.nattack import NattackSettings, margin_loss, nattack
from aiot.host.robust.attacks.subspace import interpolation_matrix, latent_shape, upsample
from aiot.models import InputSpec

W = np.where(np.arange(8) < 4, 1.0, -1.0)[None, None, :].repeat(8, axis=1)  # (1, 8, 8)
X = (0.5 + 0.005 * W).astype(np.float32)
L2_OPTIMUM = 0.32 / 8.0
SPEC = InputSpec(shape=(1, 8, 8), channel_order="GRAY", mean=(0.0,), std=(1.0,))


class Toy:
    """The linear classifier as a Predictor (it counts every image it is asked about)."""

    name = "toy"

    def __init__(self) -> None:
        self.queries = 0

    def predict(self, x: np.ndarray) -> np.ndarray:
        self.queries += len(x)
        s = ((np.asarray(x, np.float64) - 0.5) * W).reshape(len(x), -1).sum(axis=1)
        return np.stack([s, -s], axis=1).astype(np.float32)

    __call__ = predict

    def decide(self, x: np.ndarray) -> np.ndarray:
        return self.predict(x).argmax(axis=1)

    def close(self) -> None:
        pass


def test_interpolation_rows_sum_to_one_and_identity_at_full_size():
    matrix = interpolation_matrix(8, 3)
    assert matrix.shape == (8, 3) and np.allclose(matrix.sum(axis=1), 1.0)
    assert np.array_equal(interpolation_matrix(4, 4), np.eye(4))
    assert np.allclose(upsample(np.full((1, 2, 2), 0.7), (5, 5)), 0.7)  # constants stay constant
    assert latent_shape((3, 112, 112), ratio=45 / 112) == (3, 45, 45)
    assert latent_shape((1, 28, 28), side=32) == (1, 28, 28)  # never larger than the image


def test_margin_loss_is_zero_once_misclassified():
    logp = np.log(np.array([[0.7, 0.2, 0.1], [0.2, 0.5, 0.3]]))
    assert margin_loss(logp, 0) == pytest.approx([math.log(0.7 / 0.2), 0.0])


@pytest.mark.parametrize("eps", [0.01, 0.03])
def test_nattack_finds_an_adversarial_inside_the_ball(eps):
    toy = Toy()
    result = nattack(toy, X, 0, eps, 3000, rng=np.random.default_rng(0))
    assert result.adversarial is not None and toy.decide(result.adversarial[None])[0] == 1
    assert np.abs(result.adversarial - X).max() <= eps + 1e-6 and result.distance <= eps + 1e-6
    assert 0 <= result.adversarial.min() and result.adversarial.max() <= 1
    # every query counted, and the search stopped at the first adversarial population
    assert result.queries == toy.queries - 1 and result.queries % NattackSettings().population == 0


def test_nattack_spends_exactly_its_budget_when_no_adversarial_exists():
    toy = Toy()
    result = nattack(toy, X, 0, 0.004, 1000, rng=np.random.default_rng(0))  # 64 x 0.004 < 0.32
    assert result.adversarial is None and result.distance == math.inf
    assert result.queries == toy.queries == 1000  # 3 populations of 300, then the last 100
    assert result.iterations == 4


def test_evolutionary_closes_in_on_the_smallest_adversarial():
    toy = Toy()
    result = evolutionary(toy.decide, X, 0, 1000, rng=np.random.default_rng(0))
    assert result.queries == toy.queries == 1000 and result.iterations == 999  # 1 query found the start
    assert toy.decide(result.adversarial[None])[0] == 1
    assert L2_OPTIMUM <= result.distance < 2.5 * L2_OPTIMUM
    assert result.distance == pytest.approx(float(np.linalg.norm(result.adversarial - X)), rel=1e-5)


def test_evolutionary_without_a_start_spends_only_its_tries():
    def always_right(pixels):
        return np.zeros(len(pixels), np.int64)

    settings = EvolutionarySettings(init_tries=7)
    result = evolutionary(always_right, X, 0, 50, settings, rng=np.random.default_rng(0))
    assert (result.adversarial, result.queries, result.distance) == (None, 7, math.inf)


def _problem(toy: Toy, queries: int) -> Problem:
    pixels = np.stack([X, X])
    return Problem(pixels, np.zeros(2, np.int64), SPEC, classes=2, victim=toy,
                   victim_correct=np.array([True, False]), seed=0, queries=queries)


def test_through_the_oracle_queries_are_counted_exactly_and_capped():
    toy = Toy()
    crafted = blackbox.evolutionary(_problem(toy, 300), 0.5)
    # only the image the victim gets right is attacked; its budget is spent in full
    assert crafted.attacked.tolist() == [True, False] and crafted.queries.tolist() == [300, 0]
    assert toy.queries == 300 and crafted.found.tolist() == [True, False]
    assert np.array_equal(crafted.adversarial[1], X)
    toy = Toy()
    crafted = blackbox.nattack(_problem(toy, 2000), 0.02)
    assert crafted.found[0] and toy.queries == crafted.queries.sum() <= 2000
    assert np.abs(crafted.adversarial[0] - X).max() <= 0.02 + 1e-6
