"""Evolutionary attack (Dong et al., CVPR 2019, "Efficient Decision-based Black-box
Adversarial Attacks on Face Recognition").

A decision-based L2 attack written from the paper (no installable library has it). It only
sees top-1 labels. Starting from an image that is already misclassified, a (1+1)-CMA-ES keeps
one adversarial ``x*`` and proposes one mutation per query, accepted when it is still
adversarial and closer to the clean image ``x``:

* the mutation ``z ~ N(0, σ² C)`` lives in a lower-dimensional grid (the paper: 45x45 for
  112x112 faces) with a **diagonal** covariance ``C``, and only ``k = m / 20`` of its ``m``
  coordinates are drawn, chosen with probabilities proportional to ``diag(C)`` (stochastic
  coordinate selection); it is bilinearly upsampled to the image;
* the candidate is ``x* + up(z) + μ (x - x*)`` (a bias towards the clean image), clipped to
  [0, 1]; ``σ = 0.01 · ‖x* - x‖``;
* after a success the evolution path and the covariance follow the CMA-ES rules
  ``p_c ← (1 - c_c) p_c + sqrt(c_c (2 - c_c)) z / σ`` and
  ``C_ii ← (1 - c_cov) C_ii + c_cov (p_c)_i²`` with ``c_c = 0.01``, ``c_cov = 0.001``;
* ``μ`` follows the 1/5th success rule, ``μ ← μ · exp(P_success - 1/5)``, with ``P_success``
  measured over the last ``window`` trials (the paper does not fix the window; we use 10).

The start is uniform noise that the model already misclassifies (the paper's choice for
untargeted attacks), tried up to ``init_tries`` times. Every trial costs exactly one query.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from aiot.host.robust.attacks.nattack import SearchResult
from aiot.host.robust.attacks.subspace import latent_shape, upsample

#: Top-1 class ids for a batch of ``(C, H, W)`` pixel images: all a decision-based attack sees.
Decide = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class EvolutionarySettings:
    """The paper's hyper-parameters.

    Args:
        latent_ratio: side of the search grid over the image's side (45 / 112 in the paper).
        mu: initial weight of the step towards the clean image.
        sigma: mutation scale, relative to the current distance.
        cc: evolution-path rate ``c_c``.
        ccov: covariance learning rate ``c_cov``.
        coordinate_fraction: ``k / m``, the share of grid coordinates mutated per trial.
        window: trials per update of ``μ`` by the 1/5th success rule.
        init_tries: random noise images tried as a starting point.
    """

    latent_ratio: float = 45 / 112
    mu: float = 0.01
    sigma: float = 0.01
    cc: float = 0.01
    ccov: float = 0.001
    coordinate_fraction: float = 1 / 20
    window: int = 10
    init_tries: int = 100


def _start(decide: Decide, x: np.ndarray, label: int, tries: int,
           rng: np.random.Generator) -> tuple[np.ndarray | None, int]:
    """A uniform-noise image the model misclassifies, and the queries spent finding it."""
    for attempt in range(1, tries + 1):
        noise = rng.uniform(0.0, 1.0, x.shape).astype(np.float32)
        if int(decide(noise[None])[0]) != label:
            return noise, attempt
    return None, tries


class _Search:
    """State of one (1+1)-CMA-ES run: the incumbent, its distance, path, covariance, μ."""

    def __init__(self, x: np.ndarray, start: np.ndarray, settings: EvolutionarySettings) -> None:
        self.x, self.best, self.settings = x, start, settings
        self.distance = float(np.linalg.norm((start - x).ravel()))
        self.latent = latent_shape(x.shape, ratio=settings.latent_ratio)
        size = int(np.prod(self.latent))
        self.cov, self.path = np.ones(size), np.zeros(size)
        self.k = max(1, round(size * settings.coordinate_fraction))
        self.mu, self.trials = settings.mu, []

    def propose(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
        """A candidate image, the latent mutation behind it and the σ it was drawn with."""
        sigma = self.settings.sigma * self.distance
        chosen = rng.choice(self.cov.size, size=self.k, replace=False, p=self.cov / self.cov.sum())
        z = np.zeros(self.cov.size)
        z[chosen] = rng.standard_normal(self.k) * sigma * np.sqrt(self.cov[chosen])
        step = upsample(z.reshape(self.latent), self.x.shape[1:])
        candidate = self.best + step + self.mu * (self.x - self.best)
        return np.clip(candidate, 0.0, 1.0).astype(np.float32), z, sigma

    def update(self, candidate: np.ndarray, z: np.ndarray, sigma: float, adversarial: bool) -> None:
        """Accept a closer adversarial, adapt path and covariance, and μ every ``window`` trials."""
        s = self.settings
        distance = float(np.linalg.norm((candidate - self.x).ravel()))
        success = adversarial and distance < self.distance
        if success:
            self.best, self.distance = candidate, distance
            self.path = (1 - s.cc) * self.path + math.sqrt(s.cc * (2 - s.cc)) * z / max(sigma, 1e-12)
            self.cov = (1 - s.ccov) * self.cov + s.ccov * self.path ** 2
        self.trials.append(success)
        if len(self.trials) == s.window:
            self.mu *= math.exp(float(np.mean(self.trials)) - 0.2)
            self.trials.clear()


def evolutionary(decide: Decide, x: np.ndarray, label: int, budget: int,
                 settings: EvolutionarySettings = EvolutionarySettings(),
                 rng: np.random.Generator | None = None) -> SearchResult:
    """Shrink an adversarial's L2 distance to ``x`` with at most ``budget`` decision queries.

    Args:
        decide: top-1 classes for a batch of pixel images.
        x: the clean image, float32 ``(C, H, W)`` in [0, 1].
        label: its true class.
        budget: most images to ask about (starting-point tries included).
        settings: the paper's hyper-parameters.
        rng: random generator (seeded by the caller for reproducible runs).

    Returns:
        The closest adversarial found (None when no starting point was found), its L2 distance.
    """
    rng = rng or np.random.default_rng(0)
    x = np.asarray(x, np.float32)
    start, queries = _start(decide, x, label, min(settings.init_tries, budget), rng)
    if start is None:
        return SearchResult(None, queries, 0, math.inf)
    search = _Search(x, start, settings)
    iterations = 0
    while queries < budget:
        candidate, z, sigma = search.propose(rng)
        adversarial = int(decide(candidate[None])[0]) != label
        queries, iterations = queries + 1, iterations + 1
        search.update(candidate, z, sigma, adversarial)
    return SearchResult(search.best, queries, iterations, search.distance)
