"""The attacks' pixel space: [0, 1] pixels in NCHW, normalised only inside the model.

Perturbation budgets are in pixel units (ARBiBench: ε∞ = 0.03, ε2 = 0.5 on [0, 1] images), so
every attack works on ``pixels = preprocess(images) before (x - mean) / std`` and the model's
normalisation happens inside a wrapper (:class:`aiot.host.robust.attacks.modules.PixelModel`)
or here, in numpy, before a predictor is asked. ``to_model_input(to_pixels(images))`` is
bit-identical to the toolkit's own :func:`aiot.models.datasets.preprocess`: the same float32
operations in the same order.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from aiot.models.datasets import preprocess

#: Norms an attack's budget can be measured in.
NORMS = ("linf", "l2")
# Float slack when checking that a perturbation is inside its ball or inside [0, 1].
TOLERANCE = 1e-5


def to_pixels(images: np.ndarray, spec) -> np.ndarray:
    """uint8 images → float32 ``(N, C, H, W)`` pixels in [0, 1] (resized, channels converted)."""
    return preprocess(images, replace(spec, layout="NCHW", mean=(0.0,), std=(1.0,)))


def _per_channel(values, channels: int) -> np.ndarray:
    array = np.asarray(values, dtype=np.float32)
    return np.broadcast_to(array, (channels,)).reshape(1, channels, 1, 1)


def to_model_input(pixels: np.ndarray, spec) -> np.ndarray:
    """[0, 1] NCHW pixels → the float32 batch the model takes (normalised, in its layout)."""
    pixels = np.asarray(pixels, dtype=np.float32)
    channels = pixels.shape[1]
    x = (pixels - _per_channel(spec.mean, channels)) / _per_channel(spec.std, channels)
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1) if spec.layout == "NHWC" else x)


def distances(adversarial: np.ndarray, clean: np.ndarray, norm: str) -> np.ndarray:
    """Per-image size of ``adversarial - clean`` in ``norm`` (``linf`` or ``l2``), float64.

    ``clean`` may be one image broadcast against a batch of candidates.
    """
    delta = np.asarray(adversarial, np.float64) - np.asarray(clean, np.float64)  # clean may broadcast
    delta = delta.reshape(len(delta), -1)
    if norm == "linf":
        return np.abs(delta).max(axis=1) if delta.size else np.zeros(len(delta))
    return np.sqrt((delta ** 2).sum(axis=1))


def project(adversarial: np.ndarray, clean: np.ndarray, norm: str, eps: float) -> np.ndarray:
    """``adversarial`` moved into the ``eps``-ball around ``clean`` and into [0, 1].

    Libraries already stay inside; this removes their float round-off (``x + eps`` computed
    in float32 can land a hair outside), so a result is within the budget by construction.
    """
    clean = np.asarray(clean, np.float32)
    delta = np.asarray(adversarial, np.float32) - clean
    # A library that divided by zero returns NaN pixels: no perturbation is what it found.
    delta = np.where(np.isfinite(delta), delta, np.float32(0))
    if norm == "linf":
        delta = np.clip(delta, -eps, eps)
    else:
        size = distances(clean + delta, clean, "l2").reshape(-1, *([1] * (clean.ndim - 1)))
        delta = delta * np.minimum(1.0, eps / np.maximum(size, 1e-12)).astype(np.float32)
    return np.clip(clean + delta, 0.0, 1.0).astype(np.float32)


def within(adversarial: np.ndarray, clean: np.ndarray, norm: str, eps: float) -> np.ndarray:
    """Boolean ``(N,)``: the image lies in [0, 1] and in the ``eps``-ball around ``clean``."""
    adversarial = np.asarray(adversarial)
    flat = adversarial.reshape(len(adversarial), -1)
    in_range = (flat.min(axis=1) >= -TOLERANCE) & (flat.max(axis=1) <= 1 + TOLERANCE)
    return in_range & (distances(adversarial, clean, norm) <= eps + TOLERANCE)
