"""Sequences of gradually increasing perturbation, for the flip probability (RobustMQ / ImageNet-P).

ImageNet-P's own sequences are not installable, so we generate ours (small and documented here).
Every sequence starts at the clean image (parameter 0) and raises one parameter linearly to its
maximum over ``frames`` frames. The randomness of an image's sequence (its noise field, its
direction of travel) is drawn once and then only scaled, so consecutive frames differ by a small
step: a prediction that flips between two of them means the model is unstable, not that it saw
fresh noise (ImageNet-P's noise sequences draw new noise per frame; ours do not).

Frame k of ``frames`` has t = k / (frames - 1); x is the image in [0, 1]:

* ``gaussian_noise``: x + 0.20 t z, z ~ N(0, 1) drawn once per image (ImageNet-C sev. 3: 0.18);
* ``speckle_noise``: x + 0.40 t x z, z as above (ImageNet-C sev. 3: 0.35, sev. 4: 0.45);
* ``gaussian_blur``: Gaussian filter with sigma 1.5 t pixels (strong at 28 px);
* ``brightness``: x + 0.30 t on every channel (ImageNet-C sev. 3 on the value channel);
* ``contrast``: (x - mean) (1 - 0.7 t) + mean, down to 0.3 of the contrast;
* ``translate``: a shift of 3 t pixels in a direction drawn once per image;
* ``rotate``: 15 t degrees about the centre, the sign drawn once per image.

Shift and rotation interpolate bilinearly and repeat the edge pixels.
Frames are rounded to uint8 (the suites feed uint8 pixels to the model's preprocessing), so a
step too small to change any pixel gives identical frames.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from aiot.core.errors import UnknownName, UsageError

#: Perturbation -> (maximum parameter, unit), the last frame's strength.
PERTURBATIONS: dict[str, tuple[float, str]] = {
    "gaussian_noise": (0.20, "std of added noise (x in [0, 1])"),
    "speckle_noise": (0.40, "std of multiplicative noise"),
    "gaussian_blur": (1.5, "sigma in pixels"),
    "brightness": (0.30, "added to x in [0, 1]"),
    "contrast": (0.70, "contrast reduction (factor 1 - p)"),
    "translate": (3.0, "pixels"),
    "rotate": (15.0, "degrees"),
}
DEFAULT_FRAMES = 16


def check_frames(frames: int) -> int:
    """``frames`` if a sequence can have that many frames (at least 2 for one step)."""
    if frames < 2:
        raise UsageError(f"--frames must be at least 2, got {frames}",
                         "a flip needs two consecutive frames")
    return frames


def parameters(perturbation: str, frames: int) -> np.ndarray:
    """The parameter of every frame: 0 (clean) up to the perturbation's maximum, linearly."""
    return np.linspace(0.0, PERTURBATIONS[perturbation][0], check_frames(frames))


def _rng(seed: int, perturbation: str, index: int) -> np.random.Generator:
    entropy = [int(seed) & 0xFFFFFFFF, list(PERTURBATIONS).index(perturbation), int(index)]
    return np.random.default_rng(np.random.SeedSequence(entropy))


def _noise(image, p, rng, multiplicative=False):
    z = rng.standard_normal(image.shape)
    return [image + q * (image * z if multiplicative else z) for q in p]


def _blur(image, p, rng):
    from scipy.ndimage import gaussian_filter

    spatial = (1, 1, 0) if image.ndim == 3 else (1, 1)
    return [gaussian_filter(image, sigma=[q * s for s in spatial], mode="nearest") for q in p]


def _translate(image, p, rng):
    from scipy.ndimage import shift

    angle = rng.uniform(0, 2 * np.pi)
    direction = (np.sin(angle), np.cos(angle)) + (0.0,) * (image.ndim - 2)
    return [shift(image, [q * d for d in direction], order=1, mode="nearest") for q in p]


def _rotate(image, p, rng):
    from scipy.ndimage import rotate

    sign = rng.choice((-1.0, 1.0))
    return [rotate(image, sign * q, axes=(1, 0), reshape=False, order=1, mode="nearest") for q in p]


def _contrast(image, p, rng):
    mean = image.mean(axis=(0, 1), keepdims=True)
    return [(image - mean) * (1.0 - q) + mean for q in p]


_FRAMES: dict[str, Callable] = {
    "gaussian_noise": _noise,
    "speckle_noise": lambda image, p, rng: _noise(image, p, rng, multiplicative=True),
    "gaussian_blur": _blur,
    "brightness": lambda image, p, rng: [image + q for q in p],
    "contrast": _contrast,
    "translate": _translate,
    "rotate": _rotate,
}


def sequence(image: np.ndarray, perturbation: str, frames: int, seed: int,
             index: int) -> np.ndarray:
    """One image's sequence: uint8 ``(frames, *image.shape)``, frame 0 the clean image.

    Args:
        image: uint8 ``(H, W)`` or ``(H, W, 3)``.
        perturbation: a key of :data:`PERTURBATIONS`.
        frames: frames in the sequence (>= 2).
        seed: the run's seed; with ``index`` (position in the test split) it fixes the noise.
        index: the image's position in its split.
    """
    if perturbation not in PERTURBATIONS:
        raise UnknownName("perturbation", perturbation, PERTURBATIONS)
    x = image.astype(np.float64) / 255.0
    rng = _rng(seed, perturbation, index)
    steps = _FRAMES[perturbation](x, parameters(perturbation, frames), rng)
    return np.rint(np.clip(np.stack(steps), 0.0, 1.0) * 255.0).astype(np.uint8)


def sequences(images: np.ndarray, perturbation: str, frames: int, seed: int,
              indices: Sequence[int]) -> np.ndarray:
    """Every image's sequence: uint8 ``(N, frames, *image shape)``."""
    return np.stack([sequence(image, perturbation, frames, seed, index)
                     for image, index in zip(images, indices, strict=True)])
