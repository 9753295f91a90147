"""``aiot robust attack``: run the chosen attacks and evaluate their images on every model.

White-box and transfer attacks are crafted on the host (reference or source model) and their
adversarial pixels are then evaluated on the reference *and* on the deployed artifact
(transfer-to-deployment). Black-box attacks query the victim (the deployed artifact when
there is one, else the reference) and their images are evaluated on both too.

Accuracy follows ARBiBench: over all N images, an image the model gets wrong clean stays
wrong (``ACC* = mean(clean correct and still correct under attack)``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from aiot.core.errors import UsageError
from aiot.host.robust.attacks.base import Attack, Crafted, Problem, require
from aiot.host.robust.attacks.catalog import select_attacks
from aiot.host.robust.attacks.result import build_result
from aiot.host.robust.attacks.space import distances, project, to_model_input, to_pixels
from aiot.host.robust.data import eval_set
from aiot.host.robust.predictor import TorchPredictor, predict_labels
from aiot.host.robust.target import Target, reference_model
from aiot.host.training.trainer import torch_threads

log = logging.getLogger(__name__)

Progress = Callable[[str], None]


@dataclass(frozen=True)
class AttackSettings:
    """What ``aiot robust attack`` runs.

    Args:
        attacks: attack names (see :data:`~aiot.host.robust.attacks.catalog.ATTACKS`).
        eps: L∞ budget in [0, 1] pixel units (ARBiBench: 0.03).
        eps_l2: L2 budget (ARBiBench: 0.5).
        queries: per-image query budget of every black-box attack (None: ARBiBench's 10,000,
            Square 5,000).
        steps: iterations of iterative white-box attacks (None: each attack's default).
        eps_curve: L∞ budgets of the accuracy-vs-ε curve (L∞ attacks re-run per budget).
        eps_curve_l2: L2 budgets of the curve of L2 attacks (minimum-norm ones are not re-run).
        dataset, limit, seed: the evaluation images and the attacks' randomness.
        source_weights, source_binarize: the transfer source (same architecture).
    """

    attacks: tuple[str, ...]
    eps: float = 0.03
    eps_l2: float = 0.5
    queries: int | None = None
    steps: int | None = None
    eps_curve: tuple[float, ...] = ()
    eps_curve_l2: tuple[float, ...] = ()
    dataset: str = "fashion-mnist"
    limit: int = 100
    seed: int = 0
    source_weights: Path | None = None
    source_binarize: str | None = None

    def validate(self) -> None:
        """Raise :class:`UsageError` for a budget or count out of range."""
        for label, value in (("--eps", self.eps), ("--eps-l2", self.eps_l2), *(
                ("--eps-curve", e) for e in self.eps_curve), *(("--eps-curve-l2", e) for e in self.eps_curve_l2)):
            if not (value >= 0 and math.isfinite(value)):
                raise UsageError(f"{label} must be a finite budget >= 0, got {value}")
        if self.eps > 1:
            raise UsageError(f"--eps {self.eps} is more than the whole [0, 1] pixel range",
                             "budgets are in [0, 1] pixel units (ARBiBench: 0.03)")
        for label, value in (("--queries", self.queries), ("--steps", self.steps), ("--limit", self.limit)):
            if value is not None and value < 1:
                raise UsageError(f"{label} must be at least 1, got {value}")

    def to_dict(self) -> dict:
        data = asdict(self)
        data["source_weights"] = str(self.source_weights) if self.source_weights else None
        return data


@dataclass
class Outcome:
    """One attack at one budget, evaluated.

    Attributes:
        correct: per evaluated model (``reference``, the deployment's name), boolean ``(N,)``:
            right on the clean image and still right on the attacked one.
        seconds: crafting time (evaluation not included).
        budget: per-image query budget (black-box attacks), else None.
        distance: per image, the distance of what the attack returned (in its norm).
    """

    attack: Attack
    eps: float
    crafted: Crafted
    correct: dict[str, np.ndarray]
    seconds: float
    budget: int | None
    distance: np.ndarray


class Evaluator:
    """Clean and attacked accuracy of the reference and (optionally) the deployed artifact."""

    def __init__(self, spec, labels: np.ndarray, pixels: np.ndarray, predictors: dict) -> None:
        self.spec, self.labels, self.predictors = spec, labels, predictors
        self.clean = {role: self._right(p, pixels) for role, p in predictors.items()}

    def _right(self, predictor, pixels: np.ndarray) -> np.ndarray:
        return predict_labels(predictor, to_model_input(pixels, self.spec)) == self.labels

    def correct(self, pixels: np.ndarray) -> dict[str, np.ndarray]:
        """Per model: clean-correct images that stay correct on ``pixels`` (ARBiBench's ACC*)."""
        return {role: self.clean[role] & self._right(p, pixels) for role, p in self.predictors.items()}


def budgeted_images(attack: Attack, crafted: Crafted, clean: np.ndarray, eps: float) -> np.ndarray:
    """The images an attack is scored on at budget ``eps``.

    An ε-bounded attack's images are projected into the ball (a no-op but for float round-off);
    a minimum-norm attack's adversarial counts only if it fooled its model within ``eps``,
    else the clean image is scored.
    """
    if not attack.minimum_norm:
        return project(crafted.adversarial, clean, attack.norm, eps)
    inside = crafted.found & (distances(crafted.adversarial, clean, attack.norm) <= eps + 1e-6)
    return np.where(inside.reshape(-1, 1, 1, 1), crafted.adversarial, clean).astype(np.float32)


def eps_of(attack: Attack, settings: AttackSettings) -> float:
    """The budget an attack runs at: ``eps`` for L∞ attacks, ``eps_l2`` for L2 ones."""
    return settings.eps if attack.norm == "linf" else settings.eps_l2


def run_attack(attack: Attack, problem: Problem, evaluator: Evaluator, eps: float) -> Outcome:
    """Craft with ``attack`` at ``eps`` and evaluate on every model."""
    start = time.perf_counter()
    crafted = attack.run(problem, eps)
    seconds = time.perf_counter() - start
    return score(attack, crafted, problem, evaluator, eps, seconds)


def score(attack: Attack, crafted: Crafted, problem: Problem, evaluator: Evaluator, eps: float,
          seconds: float) -> Outcome:
    """Evaluate crafted images at budget ``eps`` (minimum-norm results are re-scored per budget)."""
    images = budgeted_images(attack, crafted, problem.pixels, eps)
    return Outcome(attack, eps, crafted, evaluator.correct(images), seconds, attack.budget_of(problem),
                   distances(crafted.adversarial, problem.pixels, attack.norm))


def build_problem(target, settings: AttackSettings, attacks: list[Attack], deployed=None):
    """``(problem, evaluator, eval_set)``: images, the reference, the source and the victim."""
    from aiot.host.robust.attacks.modules import reference_module
    spec, model = reference_model(target)
    data = eval_set(settings.dataset, settings.limit, settings.seed)
    if not data.labelled:
        raise UsageError(f"dataset {data.name} has no labels: attacks need them", "pass --dataset fashion-mnist")
    pixels = to_pixels(data.images, spec.input)
    reference = TorchPredictor(model, "reference")
    predictors = {"reference": reference, **({deployed.name: deployed} if deployed is not None else {})}
    evaluator = Evaluator(spec.input, data.labels, pixels, predictors)
    source = None
    if settings.source_weights is not None and any(a.family == "transfer" for a in attacks):
        _, source_model = reference_model(Target(target.model, settings.source_weights, settings.source_binarize))
        source = reference_module(source_model, spec.input)
    victim = deployed if deployed is not None else reference
    victim_role = deployed.name if deployed is not None else "reference"
    problem = Problem(pixels, data.labels, spec.input, classes=spec.num_classes,
                      reference=reference_module(model, spec.input), victim=victim,
                      victim_correct=evaluator.clean[victim_role], source=source, seed=settings.seed,
                      steps=settings.steps, queries=settings.queries)
    return problem, evaluator, data


def run_suite(target, settings: AttackSettings, deployed=None, progress: Progress | None = None) -> dict:
    """Run the attacks of ``settings`` on ``target`` and return the suite's result dict.

    Args:
        target: the :class:`~aiot.host.robust.target.Target` (model, weights, binarization).
        settings: attacks, budgets and images.
        deployed: the target's artifact as a predictor (``open_deployed``), or None.
        progress: called with a line before each attack.
    """
    settings.validate()
    attacks = select_attacks(",".join(settings.attacks))
    for attack in attacks:
        require(attack.modules)
    say = progress or (lambda text: log.info(text))
    # The host reference runs with the target's inference threads: black-box attacks ask one
    # image at a time, where extra intra-op threads only add synchronisation (measured 15-60x
    # slower with 2 threads on 2 busy cores).
    with torch_threads(target.threads):
        problem, evaluator, data = build_problem(target, settings, attacks, deployed)
        outcomes, curves = [], {}
        for attack in attacks:
            eps = eps_of(attack, settings)
            title = f"{attack.title} (ε{'∞' if attack.norm == 'linf' else '2'} = {eps:g})"
            say(f"{title} on {len(data.images)} images…")
            problem.progress = _every_tenth(say, title)
            outcome = run_attack(attack, problem, evaluator, eps)
            outcomes.append(outcome)
            curves[attack.name] = _curve(attack, outcome, problem, evaluator, settings, say)
    return build_result(settings, outcomes, curves, evaluator, problem, data, deployed)


def _every_tenth(say: Progress, title: str) -> Callable[[int, int], None]:
    """Per-image progress of a black-box attack, a line per tenth (a plain log stays short)."""
    def report(done: int, total: int) -> None:
        if done == total or done % max(1, total // 10) == 0:
            say(f"{title}: {done}/{total} images…")

    return report


def _curve(attack: Attack, main: Outcome, problem: Problem, evaluator: Evaluator,
           settings: AttackSettings, say: Progress) -> list[Outcome]:
    """The attack at each budget of its norm's curve; minimum-norm results are only re-scored."""
    budgets = settings.eps_curve if attack.norm == "linf" else settings.eps_curve_l2
    points = []
    for eps in budgets:
        if eps == main.eps or attack.minimum_norm:
            points.append(score(attack, main.crafted, problem, evaluator, eps, main.seconds))
            continue
        say(f"{attack.title} at ε = {eps:g}…")
        points.append(run_attack(attack, problem, evaluator, eps))
    return points
