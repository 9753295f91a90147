"""Resizers: Pillow's six filters and OpenCV's five interpolations, to the model's input size.

Geometry is the same for every method, so only the interpolation differs: scale the image so
that the model's input, enlarged by ``1 / crop``, just fits (the shorter side for a square
input), then cut the centred ``H x W`` region. ``crop=1`` is the toolkit's own preprocessing
for square images; ``crop=0.875`` is the usual ImageNet evaluation (shorter side to 256, centre
224). The reference is Pillow's bilinear filter, as :func:`aiot.models.datasets.preprocess` uses.

On a downscale Pillow widens every filter by the scale factor (antialiasing) and OpenCV does not
(except ``INTER_AREA``): that is the large system-noise effect. On an upscale they agree
within a few levels.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: The reference resizer (the toolkit's preprocessing).
REFERENCE = "pil-bilinear"

_PIL_FILTERS = ("nearest", "box", "bilinear", "hamming", "bicubic", "lanczos")
_CV2_INTERPOLATIONS = ("nearest", "linear", "area", "cubic", "lanczos4")

#: Option names: ``pil-<filter>`` and ``cv2-<interpolation>``.
RESIZERS: tuple[str, ...] = (*(f"pil-{f}" for f in _PIL_FILTERS),
                             *(f"cv2-{i}" for i in _CV2_INTERPOLATIONS))


def scaled_size(size: tuple[int, int], target: tuple[int, int], crop: float = 1.0) -> tuple[int, int]:
    """The ``(h, w)`` an ``(H, W)`` image is resized to before the centre crop to ``target``.

    The smallest uniform scale at which ``target / crop`` fits, never smaller than ``target``.
    """
    in_h, in_w = size
    out_h, out_w = target
    scale = max(out_h / in_h, out_w / in_w) / crop
    return max(out_h, round(in_h * scale)), max(out_w, round(in_w * scale))


def centre_crop(image: np.ndarray, target: tuple[int, int]) -> np.ndarray:
    """The centred ``target = (h, w)`` region (a copy)."""
    top = (image.shape[0] - target[0]) // 2
    left = (image.shape[1] - target[1]) // 2
    return np.ascontiguousarray(image[top:top + target[0], left:left + target[1]])


def _pillow(filter_name: str) -> Callable[[np.ndarray, tuple[int, int]], np.ndarray]:
    def resize(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
        from PIL import Image

        resample = getattr(Image.Resampling, filter_name.upper())
        return np.asarray(Image.fromarray(image).resize((size[1], size[0]), resample))

    return resize


def _opencv(interpolation: str) -> Callable[[np.ndarray, tuple[int, int]], np.ndarray]:
    def resize(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
        import cv2

        flag = getattr(cv2, f"INTER_{interpolation.upper()}")
        return cv2.resize(image, (size[1], size[0]), interpolation=flag)

    return resize


def resizer(name: str) -> Callable[[np.ndarray, tuple[int, int]], np.ndarray]:
    """The ``(image, (h, w)) -> image`` function of resizer ``name`` (``pil-bicubic`` ...)."""
    library, _, method = name.partition("-")
    if name not in RESIZERS:
        raise KeyError(name)
    return _pillow(method) if library == "pil" else _opencv(method)


def resize_to(image: np.ndarray, target: tuple[int, int], method: str = REFERENCE,
              crop: float = 1.0) -> np.ndarray:
    """Resize ``image`` with ``method`` and centre-crop it to ``target = (h, w)``.

    Args:
        image: uint8 ``(H, W)`` or ``(H, W, 3)``.
        target: the model's input ``(h, w)``.
        method: a name of :data:`RESIZERS`.
        crop: share of the resized image's shorter side the crop keeps (1: none).

    Returns:
        uint8 ``(h, w)`` or ``(h, w, 3)``. An image already of the scaled size is not resampled.
    """
    size = scaled_size(image.shape[:2], target, crop)
    resized = image if size == image.shape[:2] else resizer(method)(np.ascontiguousarray(image), size)
    return centre_crop(resized, target)


def direction(size: tuple[int, int], target: tuple[int, int], crop: float = 1.0) -> str:
    """``down``, ``up`` or ``none``: what resizing ``size`` for ``target`` does."""
    scaled = scaled_size(size, target, crop)
    if scaled == tuple(size):
        return "none"
    return "down" if scaled[0] * scaled[1] < size[0] * size[1] else "up"
