"""Searching a lower-dimensional grid and upsampling it to the image (NATTACK, Evolutionary).

Both papers search perturbations on a coarser grid than the image (NATTACK: 32x32 for
ImageNet; Evolutionary: 45x45 for 112x112 faces) and bring them to full size by bilinear
interpolation, which makes the search converge in far fewer queries.
"""

from __future__ import annotations

import functools
import math

import numpy as np


@functools.lru_cache(maxsize=32)
def interpolation_matrix(n_out: int, n_in: int) -> np.ndarray:
    """``(n_out, n_in)`` bilinear weights: half-pixel centres, edges clamped (align_corners=False)."""
    if n_out == n_in:
        return np.eye(n_out)
    centre = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
    low = np.floor(centre).astype(int)
    high = np.minimum(low + 1, n_in - 1)
    weight = centre - low
    matrix = np.zeros((n_out, n_in))
    np.add.at(matrix, (np.arange(n_out), low), 1 - weight)
    np.add.at(matrix, (np.arange(n_out), high), weight)
    matrix.setflags(write=False)
    return matrix


def upsample(z: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Bilinear resize of the last two axes of ``z`` to ``size = (H, W)``."""
    rows = interpolation_matrix(size[0], z.shape[-2])
    cols = interpolation_matrix(size[1], z.shape[-1])
    return rows @ z @ cols.T


def latent_shape(shape: tuple[int, int, int], side: int | None = None,
                 ratio: float | None = None) -> tuple[int, int, int]:
    """The search grid for a ``(C, H, W)`` image: ``side`` pixels, or ``ratio`` of the image.

    Never larger than the image; ``None`` for both keeps the image's own size.
    """
    channels, height, width = shape
    if side is None and ratio is None:
        return shape
    if side is None:
        side = max(1, math.ceil(ratio * max(height, width)))
    return channels, min(height, side), min(width, side)
