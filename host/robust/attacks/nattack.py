"""NATTACK (Li et al., ICML 2019, "NATTACK: Learning the Distributions of Adversarial Examples").

A score-based L∞ attack written from the paper (no installable library has it). Instead of one
adversarial point it learns a Gaussian *distribution* ``N(μ, σ²)`` in the tanh-space of the
image, from which samples land in the ε-ball after projection:

* a sample ``z = μ + σ·ε`` (ε ~ N(0, I)) becomes the image
  ``x' = x + clip(g(arctanh(2x - 1) + z) - x, -ε∞, ε∞)`` with ``g(u) = (tanh(u) + 1) / 2``,
  so every query is inside [0, 1] and inside the ball by construction;
* the loss is the C&W margin on log-probabilities, ``f = max(0, log p_y - max_{c≠y} log p_c)``;
* ``μ`` follows the natural-evolution-strategies gradient with z-scored losses:
  ``μ ← μ - η / (b σ) Σ_i ẑ(f_i) ε_i`` over a population of ``b`` samples;
* as in the paper, ``z`` lives on a coarser grid (32x32 for ImageNet) and is bilinearly
  upsampled to the image.

The search stops at the first queried sample that is misclassified (every sample is a valid
adversarial within ε, and the attacker sees its scores) or when the budget is spent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from aiot.host.robust.attacks.oracle import log_probs
from aiot.host.robust.attacks.subspace import latent_shape, upsample

Query = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class NattackSettings:
    """The paper's hyper-parameters (its L∞ CIFAR/ImageNet setting).

    Args:
        population: samples ``b`` per iteration (300).
        sigma: standard deviation ``σ`` of the search distribution (0.1).
        learning_rate: ``η`` of the NES update (0.02).
        latent_side: side of the search grid (32); smaller images are searched at full size.
    """

    population: int = 300
    sigma: float = 0.1
    learning_rate: float = 0.02
    latent_side: int = 32


@dataclass(frozen=True)
class SearchResult:
    """What a black-box search of ours ends with.

    Attributes:
        adversarial: the adversarial image found (pixels), or None.
        queries: images asked about (never more than the budget).
        iterations: search steps taken.
        distance: the adversarial's distance to the clean image (``inf`` when none).
    """

    adversarial: np.ndarray | None
    queries: int
    iterations: int
    distance: float


def margin_loss(logp: np.ndarray, label: int) -> np.ndarray:
    """``max(0, log p_y - max_{c≠y} log p_c)`` per row: 0 once the image is misclassified."""
    others = np.delete(logp, label, axis=1)
    return np.maximum(0.0, logp[:, label] - others.max(axis=1))


def _tanh_space(x: np.ndarray) -> np.ndarray:
    # arctanh is infinite at 0 and 1: keep black and white pixels a hair inside.
    return np.arctanh(np.clip(2.0 * x.astype(np.float64) - 1.0, -1 + 1e-6, 1 - 1e-6))


def _images(x: np.ndarray, base: np.ndarray, z: np.ndarray, eps: float) -> np.ndarray:
    """Latent samples ``z`` ``(b, *latent)`` → projected images ``(b, C, H, W)``."""
    shifted = 0.5 * (np.tanh(base + upsample(z, x.shape[1:])) + 1.0)
    delta = np.clip(shifted - x, -eps, eps)
    return np.clip(x + delta, 0.0, 1.0).astype(np.float32)


def nattack(query: Query, x: np.ndarray, label: int, eps: float, budget: int,
            settings: NattackSettings = NattackSettings(),
            rng: np.random.Generator | None = None) -> SearchResult:
    """Search an L∞ adversarial for ``x`` with at most ``budget`` queries.

    Args:
        query: scores (logits or probabilities) for a batch of ``(C, H, W)`` pixel images.
        x: the clean image, float32 ``(C, H, W)`` in [0, 1].
        label: its true class.
        eps: L∞ budget in pixel units.
        budget: most images to ask about.
        settings: the paper's hyper-parameters.
        rng: random generator (seeded by the caller for reproducible runs).
    """
    rng = rng or np.random.default_rng(0)
    x = np.asarray(x, np.float32)
    latent = latent_shape(x.shape, side=settings.latent_side)
    base = _tanh_space(x)
    mu = rng.normal(0.0, 1e-3, latent)  # the paper starts from a small random mean
    queries = iterations = 0
    while budget - queries > 0:
        b = min(settings.population, budget - queries)
        noise = rng.standard_normal((b, *latent))
        candidates = _images(x, base, mu + settings.sigma * noise, eps)
        logp = log_probs(query(candidates))
        queries, iterations = queries + b, iterations + 1
        fooled = np.flatnonzero(logp.argmax(axis=1) != label)
        if len(fooled):
            found = candidates[fooled[0]]
            return SearchResult(found, queries, iterations, float(np.abs(found - x).max()))
        loss = margin_loss(logp, label)
        scored = (loss - loss.mean()) / (loss.std() + 1e-7)
        mu = mu - settings.learning_rate / (b * settings.sigma) * np.tensordot(scored, noise, axes=1)
    return SearchResult(None, queries, iterations, float("inf"))
