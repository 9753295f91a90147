"""Library black-box attacks (torchattacks SPSA/Square, ART Boundary/HopSkipJump) through the oracle.

The victim is tiny_cnn (seeded random init) behind a counting predictor: every query an
attack makes must reach the predictor, be counted once, and stop at the per-image budget.
"""

from __future__ import annotations

import numpy as np
import pytest

from aiot.host.robust.attacks.base import Problem
from aiot.host.robust.attacks.catalog import ATTACKS
from aiot.host.robust.attacks.space import distances, to_model_input, within

torch = pytest.importorskip("torch")
pytest.importorskip("torchattacks")
pytest.importorskip("art")


class Counting:
    """The PyTorch reference as a victim that logs the size of every batch it is asked."""

    name = "counting"

    def __init__(self, model) -> None:
        from aiot.host.robust.predictor import TorchPredictor

        self.inner = TorchPredictor(model)
        self.queries, self.batches = 0, []

    def predict(self, x):
        self.queries += len(x)
        self.batches.append(len(x))
        return self.inner.predict(x)

    def close(self):
        pass


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Batches of one image: a second intra-op thread only adds synchronisation (2 shared cores)."""
    from aiot.host.training.trainer import torch_threads

    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def victim():
    from aiot.models import get_model_spec

    spec = get_model_spec("tiny_cnn")
    torch.manual_seed(0)
    model = spec.build().eval()
    pixels = np.random.default_rng(1).uniform(0.2, 0.8, (3, 1, 28, 28)).astype(np.float32)
    labels = Counting(model).predict(to_model_input(pixels, spec.input)).argmax(axis=1)
    return spec, model, pixels, labels


def _problem(victim, budget: int) -> tuple[Problem, Counting]:
    spec, model, pixels, labels = victim
    predictor = Counting(model)
    correct = np.array([True, True, False])  # the third is skipped: no query may be spent on it
    return Problem(pixels, labels, spec.input, classes=10, victim=predictor, victim_correct=correct,
                   seed=0, queries=budget), predictor


@pytest.mark.parametrize("name,budget", [("square", 40), ("spsa", 40), ("boundary", 150), ("hsj", 150)])
def test_queries_are_counted_once_and_capped_per_image(victim, name, budget):
    problem, predictor = _problem(victim, budget)
    attack = ATTACKS.get(name)
    crafted = attack.run(problem, 0.05 if attack.norm == "linf" else 0.5)
    assert crafted.queries.sum() == predictor.queries and crafted.queries[2] == 0
    assert (crafted.queries <= budget).all() and crafted.crafted_on == "counting"
    assert crafted.attacked.tolist() == [True, True, False]
    assert np.array_equal(crafted.adversarial[2], problem.pixels[2])
    assert within(crafted.adversarial, problem.pixels, "linf" if attack.norm == "linf" else "l2",
                  0.05 if attack.norm == "linf" else np.inf).all()


@pytest.mark.parametrize("name", ["boundary", "hsj", "evolutionary"])
def test_decision_attacks_report_the_adversarial_they_reached(victim, name):
    problem, predictor = _problem(victim, 150)
    crafted = ATTACKS.get(name).run(problem, 0.5)
    spec, model, pixels, labels = victim
    fooled = Counting(model).predict(to_model_input(crafted.adversarial, spec.input)).argmax(axis=1) != labels
    # a random starting point is misclassified by an untrained net: something is always found,
    # and what is reported is a real adversarial of the victim, at a finite L2 distance
    assert crafted.found[:2].all() and fooled[:2].all()
    assert np.isfinite(distances(crafted.adversarial[:2], pixels[:2], "l2")).all()
