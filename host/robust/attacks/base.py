"""What every attack takes (:class:`Problem`), gives back (:class:`Crafted`) and is (:class:`Attack`)."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from aiot.core.errors import MissingDependency

#: Attack families, in the order reports list them.
FAMILIES = ("white-box", "transfer", "score", "decision")


@dataclass
class Problem:
    """The images under attack and the models an attack may use.

    Args:
        pixels: float32 ``(N, C, H, W)`` clean images in [0, 1].
        labels: int64 ``(N,)`` true classes.
        spec: the model's input spec (normalisation and layout for predictors).
        classes: number of classes the model scores.
        reference: the PyTorch reference as a pixel-space module (white-box target).
        victim: the predictor black-box attacks query (deployed artifact, else the reference).
        victim_correct: boolean ``(N,)``: the victim classifies the clean image correctly;
            black-box attacks spend no queries on the others.
        source: pixel-space module transfer attacks are crafted on (None: the reference).
        seed: seeds every random choice of the attacks.
        steps: iterations of iterative white-box attacks (None: each attack's default).
        queries: per-image query budget of black-box attacks (None: each attack's default).
        progress: called with ``(done, total)`` after each image a black-box attack finishes.
    """

    pixels: np.ndarray
    labels: np.ndarray
    spec: object
    classes: int = 10
    reference: object = None
    victim: object = None
    victim_correct: np.ndarray | None = None
    source: object = None
    seed: int = 0
    steps: int | None = None
    queries: int | None = None
    progress: Callable[[int, int], None] | None = None

    def budget(self, default: int) -> int:
        return self.queries if self.queries is not None else default

    def iterations(self, default: int) -> int:
        return self.steps if self.steps is not None else default


@dataclass
class Crafted:
    """Adversarial pixels for every image of a problem.

    Attributes:
        adversarial: float32 ``(N, C, H, W)``: what the attack returned (for black-box attacks
            the closest adversarial the oracle saw, if any); the clean image where it has nothing.
        found: boolean ``(N,)``: the crafting model was seen fooled by this image (black-box:
            the oracle answered a misclassified point within the budget; SPSA's probes sit
            just outside the ball, so its final image may fool the model unseen).
        queries: per-image queries (black-box attacks; zeros otherwise).
        attacked: boolean ``(N,)``: the crafting model classifies the clean image correctly, so
            the attack had something to break (black-box attacks spend no query on the others).
        crafted_on: which model the attack saw (``reference``, ``source``, the victim's name).
        notes: remarks for the record (shortened iterations, ...).
    """

    adversarial: np.ndarray
    found: np.ndarray
    queries: np.ndarray
    attacked: np.ndarray
    crafted_on: str
    notes: list[str] = field(default_factory=list)


Runner = Callable[[Problem, float], Crafted]


@dataclass(frozen=True)
class Attack:
    """One attack of the suite.

    Args:
        name: CLI name (``pgd-l2``).
        title: name in reports.
        family: ``white-box``, ``transfer``, ``score`` (score-based black-box) or ``decision``.
        norm: ``linf`` or ``l2``: the budget's norm.
        minimum_norm: the attack looks for the *smallest* adversarial (C&W, DeepFool, decision-
            based) instead of the strongest one inside the budget; an image counts as broken only
            if what it found lies within ε.
        library: who implements it (``torchattacks``, ``art``, ``pyautoattack``, ``aiot``).
        run: ``run(problem, eps) -> Crafted``.
        queries: default per-image query budget (black-box; ARBiBench's values).
        modules: importable modules the attack needs (checked before any work).
    """

    name: str
    title: str
    family: str
    norm: str
    minimum_norm: bool
    library: str
    run: Runner
    queries: int | None = None
    modules: tuple[str, ...] = ()

    @property
    def black_box(self) -> bool:
        return self.family in ("score", "decision")

    def budget_of(self, problem: Problem) -> int | None:
        """The per-image query budget this run uses (None for gradient attacks)."""
        return problem.budget(self.queries) if self.queries is not None else None


#: pip names and install hints of the attack libraries (torchattacks must not pull torchvision).
_PACKAGES = {
    "torch": ("PyTorch", None),
    "torchattacks": ("torchattacks", "run: pip install 'aiot[robust]' && pip install --no-deps "
                                     "torchattacks==3.5.1 (--no-deps: its declared dependencies "
                                     "pull torchvision, which breaks the CPU torch)"),
    "art": ("adversarial-robustness-toolbox (ART)", None),
    "pyautoattack": ("pyautoattack", None),
}


def require(modules: tuple[str, ...]) -> None:
    """Raise :class:`MissingDependency` for the first module that is not installed."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            what, hint = _PACKAGES.get(module, (module, None))
            raise MissingDependency(what, "robust", hint=hint)


def finite_or_none(value: float | None) -> float | None:
    """JSON-safe float: NaN and infinities become None."""
    return None if value is None or not math.isfinite(value) else float(value)
