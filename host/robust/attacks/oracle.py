"""Black-box access to one image's predictor: counted, budgeted queries in pixel space.

Every black-box attack, ours or a library's, reaches the model only through an
:class:`Oracle`. It normalises pixels, asks the predictor (the deployed artifact on its device,
or the PyTorch reference), counts the queries from ``predictor.queries`` and refuses a batch
that would go past the budget. It also keeps the best adversarial it has *seen*: an attack
that is stopped at its budget (or by an exception inside a library) still reports the
closest misclassified point it queried, which is what an attacker holding the query log has.
"""

from __future__ import annotations

import math

import numpy as np

from aiot.host.robust.attacks.space import distances, to_model_input, within


class BudgetExhausted(Exception):
    """The next batch would take the oracle past its query budget (it was not asked)."""


class AdversarialFound(Exception):
    """A queried point is adversarial within the budget: an ε-bounded attack can stop."""


def log_probs(scores: np.ndarray) -> np.ndarray:
    """Log-probabilities from a predictor's scores, whether logits or probabilities.

    An artifact may end in a softmax or not; rows that are already a distribution are logged,
    anything else goes through a log-softmax (so margins and cross-entropy mean the same).
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size and scores.min() >= 0 and np.allclose(scores.sum(axis=1), 1.0, atol=1e-3):
        return np.log(np.clip(scores, 1e-30, None))
    shifted = scores - scores.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


class Oracle:
    """Queries about one clean image ``x`` of class ``label``.

    Args:
        predictor: a :class:`~aiot.host.robust.predictor.Predictor` (normalised input).
        spec: the model's input spec (normalisation, layout).
        x: the clean image, float32 ``(C, H, W)`` pixels in [0, 1].
        label: its true class.
        budget: most queries (images) this oracle answers.
        norm: ``linf`` or ``l2``: how the distance of an adversarial is measured.
        eps: an adversarial counts only within this distance (``inf`` for minimum-norm attacks).
        stop_on_success: raise :class:`AdversarialFound` once one is seen (ε-bounded attacks).

    Attributes:
        queries: images answered so far.
        best: the closest adversarial seen (pixels), or None.
        best_distance: its distance (``inf`` while none is known).
    """

    def __init__(self, predictor, spec, x: np.ndarray, label: int, budget: int,
                 norm: str = "l2", eps: float = math.inf, stop_on_success: bool = False) -> None:
        self.predictor, self.spec = predictor, spec
        self.x = np.asarray(x, np.float32)
        self.label, self.budget = int(label), int(budget)
        self.norm, self.eps, self.stop_on_success = norm, float(eps), stop_on_success
        self.queries = 0
        self.best: np.ndarray | None = None
        self.best_distance = math.inf

    @property
    def remaining(self) -> int:
        return self.budget - self.queries

    def scores(self, pixels: np.ndarray) -> np.ndarray:
        """The predictor's scores for a batch of pixel images (counted against the budget).

        Raises:
            BudgetExhausted: the batch does not fit in the remaining budget.
            AdversarialFound: ``stop_on_success`` and a queried point is adversarial within ε.
        """
        pixels = np.asarray(pixels, np.float32).reshape(-1, *self.x.shape)
        if len(pixels) > self.remaining:
            raise BudgetExhausted(f"{len(pixels)} queries asked, {self.remaining} left")
        before = self.predictor.queries
        scores = self.predictor.predict(to_model_input(pixels, self.spec))
        self.queries += self.predictor.queries - before
        self._remember(pixels, scores.argmax(axis=1))
        return scores

    def log_probs(self, pixels: np.ndarray) -> np.ndarray:
        """Log-probabilities (score-based attacks read only these)."""
        return log_probs(self.scores(pixels))

    def decisions(self, pixels: np.ndarray) -> np.ndarray:
        """One-hot top-1 (decision-based attacks must not see the scores)."""
        scores = self.scores(pixels)
        onehot = np.zeros(scores.shape, np.float32)
        onehot[np.arange(len(scores)), scores.argmax(axis=1)] = 1.0
        return onehot

    def _remember(self, pixels: np.ndarray, top: np.ndarray) -> None:
        fooled = (top != self.label) & within(pixels, self.x[None], self.norm, self.eps)
        if not fooled.any():
            return
        candidates = np.flatnonzero(fooled)
        sizes = distances(pixels[candidates], self.x[None], self.norm)
        closest = int(np.argmin(sizes))
        if sizes[closest] < self.best_distance:
            self.best, self.best_distance = pixels[candidates[closest]].copy(), float(sizes[closest])
        if self.stop_on_success:
            raise AdversarialFound
