"""Black-box attacks through a predictor: score-based (SPSA, Square, NATTACK) and
decision-based (Boundary, HopSkipJump, Evolutionary).

Each image the victim classifies correctly gets its own :class:`Oracle` with the attack's
per-image query budget (ARBiBench: 10,000; Square 5,000; ``--queries`` overrides). Libraries
reach the oracle through a facade: a torch module returning log-probabilities for
torchattacks (SPSA, Square), a numpy function returning one-hot decisions for ART (Boundary,
HopSkipJump). Score-based attacks stop at the first adversarial inside the ε-ball;
decision-based ones spend their budget shrinking the L2 distance.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import numpy as np

from aiot.host.robust.attacks.base import Crafted, Problem
from aiot.host.robust.attacks.evolutionary import evolutionary as evolutionary_search
from aiot.host.robust.attacks.nattack import nattack as nattack_search
from aiot.host.robust.attacks.oracle import AdversarialFound, BudgetExhausted, Oracle
from aiot.host.robust.attacks.space import project

log = logging.getLogger(__name__)

#: ``attack_one(oracle, x, label, rng) -> adversarial pixels or None``.
OneImage = Callable[[Oracle, np.ndarray, int, np.random.Generator], "np.ndarray | None"]


def each_image(problem: Problem, eps: float, norm: str, budget: int, bounded: bool,
               attack_one: OneImage) -> Crafted:
    """Attack every image the victim gets right, one oracle (and budget) per image.

    Args:
        bounded: an ε-bounded attack (stops at the first adversarial within ``eps``) rather
            than a minimum-norm one (keeps the closest adversarial over its whole budget).
    """
    n = len(problem.pixels)
    adversarial = problem.pixels.copy()
    found, queries = np.zeros(n, bool), np.zeros(n, np.int64)
    attacked = np.ones(n, bool) if problem.victim_correct is None else problem.victim_correct.copy()
    todo = np.flatnonzero(attacked)
    for done, i in enumerate(todo, 1):
        x, label = problem.pixels[i], int(problem.labels[i])
        oracle = Oracle(problem.victim, problem.spec, x, label, budget, norm,
                        eps if bounded else math.inf, stop_on_success=bounded)
        rng = np.random.default_rng([problem.seed, int(i)])
        try:
            output = attack_one(oracle, x, label, rng)
        except (BudgetExhausted, AdversarialFound):
            output = None
        queries[i] = oracle.queries
        log.debug("image %d: %d queries, closest adversarial at %s", i, oracle.queries, oracle.best_distance)
        if oracle.best is not None:
            adversarial[i], found[i] = oracle.best, True
        elif output is not None and bounded:
            adversarial[i] = project(output[None], x[None], norm, eps)[0]  # never seen adversarial
        if problem.progress is not None:
            problem.progress(done, len(todo))
    return Crafted(adversarial, found, queries, attacked, problem.victim.name)


def _seed_torch(rng: np.random.Generator) -> int:
    import torch

    seed = int(rng.integers(2 ** 31))
    torch.manual_seed(seed)
    return seed


def _torch_one(make_attack) -> OneImage:
    """``make_attack(facade, seed)`` → a torchattacks attack, run on one image through the oracle."""
    import torch

    from aiot.host.robust.attacks.modules import ScoreFacade

    def attack_one(oracle: Oracle, x: np.ndarray, label: int, rng) -> np.ndarray:
        attack = make_attack(ScoreFacade(oracle), _seed_torch(rng))
        out = attack(torch.from_numpy(x[None].copy()), torch.tensor([label]))
        return out.detach().numpy()[0]

    return attack_one


def spsa(problem: Problem, eps: float) -> Crafted:
    """SPSA (Uesato et al. 2018), torchattacks: 64 ± samples (128 queries) per Adam step, δ = lr = 0.01."""
    import torchattacks

    budget = problem.budget(10_000)
    samples = max(1, min(64, budget // 2))  # a step asks 2 x samples: fit a small --queries

    def make(facade, seed):
        return torchattacks.SPSA(facade, eps=eps, delta=0.01, lr=0.01, nb_iter=max(1, budget // (2 * samples)),
                                 nb_sample=samples, max_batch_size=samples)

    return each_image(problem, eps, "linf", budget, True, _torch_one(make))


def square(problem: Problem, eps: float) -> Crafted:
    """Square attack L∞ (Andriushchenko et al. 2020), torchattacks: p_init 0.8, margin loss."""
    import torchattacks

    budget = problem.budget(5_000)

    def make(facade, seed):
        return torchattacks.Square(facade, norm="Linf", eps=eps, n_queries=budget, n_restarts=1,
                                   p_init=0.8, loss="margin", resc_schedule=True, seed=seed)

    return each_image(problem, eps, "linf", budget, True, _torch_one(make))


def nattack(problem: Problem, eps: float) -> Crafted:
    """NATTACK (Li et al. 2019), ours: the paper's b = 300, σ = 0.1, η = 0.02."""
    def attack_one(oracle: Oracle, x: np.ndarray, label: int, rng) -> np.ndarray | None:
        return nattack_search(oracle.scores, x, label, eps, oracle.budget, rng=rng).adversarial

    return each_image(problem, eps, "linf", problem.budget(10_000), True, attack_one)


def _art_one(make_attack, classes: int) -> OneImage:
    """``make_attack(classifier)`` → an ART decision-based attack, run on one image."""
    from art.estimators.classification import BlackBoxClassifier

    def attack_one(oracle: Oracle, x: np.ndarray, label: int, rng) -> np.ndarray:
        np.random.seed(int(rng.integers(2 ** 31)))  # ART draws from numpy's global generator
        classifier = BlackBoxClassifier(oracle.decisions, x.shape, classes, clip_values=(0.0, 1.0))
        return make_attack(classifier).generate(x[None], y=np.array([label]))[0]

    return attack_one


def boundary(problem: Problem, eps: float) -> Crafted:
    """Boundary attack (Brendel et al. 2018), ART, untargeted, stopped by the query budget."""
    from art.attacks.evasion import BoundaryAttack

    def make(classifier):
        return BoundaryAttack(classifier, targeted=False, delta=0.01, epsilon=0.01, max_iter=100_000,
                              num_trial=25, sample_size=20, init_size=100, verbose=False)

    return each_image(problem, eps, "l2", problem.budget(10_000), False,
                      _art_one(make, problem.classes))


def hsj(problem: Problem, eps: float) -> Crafted:
    """HopSkipJump L2 (Chen et al. 2020), ART, untargeted, stopped by the query budget."""
    from art.attacks.evasion import HopSkipJump

    def make(classifier):
        return HopSkipJump(classifier, targeted=False, norm=2, max_iter=1_000, max_eval=1_000,
                           init_eval=100, init_size=100, verbose=False)

    return each_image(problem, eps, "l2", problem.budget(10_000), False,
                      _art_one(make, problem.classes))


def evolutionary(problem: Problem, eps: float) -> Crafted:
    """Evolutionary (Dong et al. 2019), ours: (1+1)-CMA-ES on a 45/112 grid, one query per trial."""
    def attack_one(oracle: Oracle, x: np.ndarray, label: int, rng) -> np.ndarray | None:
        def decide(pixels):
            return oracle.scores(pixels).argmax(axis=1)

        return evolutionary_search(decide, x, label, oracle.budget, rng=rng).adversarial

    return each_image(problem, eps, "l2", problem.budget(10_000), False, attack_one)
