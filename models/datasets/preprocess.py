"""uint8 images -> the float32 tensor a model expects (size, channels, layout, normalisation).

Resizing centre-crops the largest region with the target aspect ratio (the shortest side
for square targets) and resizes it bilinearly. With Pillow installed we use
``Image.resize(..., BILINEAR)`` on the crop; without it, a numpy re-implementation of the same
filter: Pillow's triangle filter widened by the scale factor when shrinking (antialiasing),
its 22-bit fixed-point coefficients and its uint8 rounding after each pass. That is
bit-identical to Pillow up to 12; Pillow 13 runs the vertical pass first when the height
shrinks much more than the width, which moves some pixels by one level. When no resize is
needed, only numpy runs (Pillow is not imported).
"""

from __future__ import annotations

import functools
import logging
import math
from typing import TYPE_CHECKING

import numpy as np

from aiot.core.errors import UsageError

if TYPE_CHECKING:
    from aiot.models import InputSpec

log = logging.getLogger(__name__)

#: ITU-R 601-2 luma weights, as Pillow's ``convert("L")``.
LUMA = (0.299, 0.587, 0.114)

# Images per chunk: bounds the float64 temporaries of resizing and normalising.
_CHUNK = 512
# Pillow's fixed-point precision for 8-bit resampling (libImaging/Resample.c).
_PRECISION_BITS = 32 - 8 - 2


def preprocess(images: np.ndarray, spec: InputSpec) -> np.ndarray:
    """Turn a batch of uint8 images into model input.

    Steps: resize to the spec's H x W (centre-crop, then bilinear) when the size differs;
    gray -> RGB/BGR by replicating, RGB -> GRAY by luminance (0.299 R + 0.587 G + 0.114 B,
    not rounded), RGB -> BGR by swapping; then ``(x / 255 - mean) / std`` per channel in
    float32, exactly as :meth:`aiot.models.InputSpec.normalize` computes it.

    Args:
        images: uint8 ``(N, H, W)`` (gray), ``(N, H, W, 1)`` (gray) or ``(N, H, W, 3)`` (RGB).
        spec: the model's input spec (``shape`` is ``(C, H, W)``; ``layout``,
            ``channel_order``, ``mean``, ``std``).

    Returns:
        float32 ``(N, C, H, W)``, or ``(N, H, W, C)`` when ``spec.layout == "NHWC"``.

    Raises:
        UsageError: ``images`` is not a uint8 batch of gray or RGB images.
    """
    images = _as_batch(images)
    channels, height, width = spec.shape
    n = images.shape[0]
    mean = _per_channel(spec.mean, channels)
    std = _per_channel(spec.std, channels)
    out_shape = (n, channels, height, width) if spec.layout == "NCHW" else (n, height, width, channels)
    out = np.empty(out_shape, dtype=np.float32)
    # Work in NHWC and write through a view, so NCHW output needs no extra full-size copy.
    target = out.transpose(0, 2, 3, 1) if spec.layout == "NCHW" else out
    needs_resize = images.shape[1:3] != (height, width)
    for start in range(0, n, _CHUNK):
        chunk = images[start:start + _CHUNK]
        if needs_resize:
            chunk = resize_images(chunk, (height, width))
        pixels = _convert_channels(chunk, spec.channel_order)
        # Same float32 operations, in the same order, as InputSpec.normalize.
        target[start:start + _CHUNK] = (pixels / np.float32(255.0) - mean) / std
    return out


def _as_batch(images: np.ndarray) -> np.ndarray:
    """Validate and return ``(N, H, W)`` or ``(N, H, W, 3)`` uint8."""
    images = np.asarray(images)
    if images.dtype != np.uint8:
        raise UsageError(f"preprocess needs uint8 pixels, got {images.dtype}")
    if images.ndim == 4 and images.shape[3] == 1:
        images = images[..., 0]
    if not (images.ndim == 3 or (images.ndim == 4 and images.shape[3] == 3)):
        raise UsageError(
            f"preprocess needs a batch (N, H, W) or (N, H, W, 3), got shape {images.shape}")
    if min(images.shape[1:3], default=1) < 1:
        raise UsageError(f"images must have a positive size, got {images.shape}")
    return images


def _per_channel(values: tuple[float, ...], channels: int) -> np.ndarray:
    """Mean or std as float32 ``(C,)``, broadcasting a single value."""
    array = np.asarray(values, dtype=np.float32)
    return np.broadcast_to(array, (channels,)) if array.size == 1 else array


def _convert_channels(images: np.ndarray, order: str) -> np.ndarray:
    """uint8 gray ``(N,H,W)`` / RGB ``(N,H,W,3)`` -> float32 ``(N,H,W,C)`` in ``order``."""
    pixels = images.astype(np.float32)
    if pixels.ndim == 3:
        pixels = pixels[..., None]
        return pixels if order == "GRAY" else np.repeat(pixels, 3, axis=3)
    if order == "GRAY":
        luma = np.asarray(LUMA, dtype=np.float32)
        return (pixels @ luma)[..., None]
    return pixels[..., ::-1] if order == "BGR" else pixels


def crop_box(size: tuple[int, int], target: tuple[int, int]) -> tuple[int, int, int, int]:
    """The centred region of an ``(H, W)`` image with the aspect ratio of ``(h, w)``.

    Returns:
        ``(left, top, right, bottom)`` in whole pixels, as Pillow's ``crop`` takes it.
    """
    in_h, in_w = size
    out_h, out_w = target
    if in_w * out_h > in_h * out_w:  # too wide: keep the full height
        crop_h, crop_w = in_h, max(1, min(in_w, round(in_h * out_w / out_h)))
    else:  # too tall (or exact): keep the full width
        crop_h, crop_w = max(1, min(in_h, round(in_w * out_h / out_w))), in_w
    top, left = (in_h - crop_h) // 2, (in_w - crop_w) // 2
    return left, top, left + crop_w, top + crop_h


def resize_images(images: np.ndarray, size: tuple[int, int],
                  use_pillow: bool | None = None) -> np.ndarray:
    """Centre-crop and bilinearly resize a uint8 batch to ``size = (H, W)``.

    The crop is a plain slice (:func:`crop_box`), so pixels outside it never bleed into the
    edges, as with Pillow's ``image.crop(box).resize(size)``.

    Args:
        images: uint8 ``(N, H, W)`` or ``(N, H, W, 3)``.
        size: target ``(H, W)``.
        use_pillow: force (True) or avoid (False) Pillow; None uses it when installed.

    Returns:
        uint8 ``(N, h, w)`` or ``(N, h, w, 3)``.
    """
    size = (int(size[0]), int(size[1]))
    if images.shape[1:3] == size:
        return images
    left, top, right, bottom = crop_box(images.shape[1:3], size)
    cropped = images[:, top:bottom, left:right]
    if cropped.shape[1:3] == size:
        return np.ascontiguousarray(cropped)
    if use_pillow is None:
        use_pillow = _have_pillow()
    return _resize_pillow(cropped, size) if use_pillow else _resize_numpy(cropped, size)


@functools.cache
def _have_pillow() -> bool:
    try:
        import PIL.Image  # noqa: F401
    except ImportError:
        log.info("Pillow is not installed; resizing with the numpy bilinear filter")
        return False
    return True


def _resize_pillow(images: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    from PIL import Image

    out_h, out_w = size
    out = np.empty((images.shape[0], out_h, out_w, *images.shape[3:]), dtype=np.uint8)
    for i, image in enumerate(images):
        source = Image.fromarray(np.ascontiguousarray(image))
        out[i] = np.asarray(source.resize((out_w, out_h), Image.Resampling.BILINEAR))
    return out


def _triangle(x: float) -> float:
    x = abs(x)
    return 1.0 - x if x < 1.0 else 0.0


@functools.lru_cache(maxsize=64)
def _coefficients(in_size: int, out_size: int) -> np.ndarray:
    """Pillow's bilinear resampling matrix ``(out_size, in_size)``, as 22-bit integers.

    Mirrors ``precompute_coeffs`` and ``normalize_coeffs_8bpc`` of libImaging/Resample.c
    operation for operation (plain Python floats are C doubles), so rounding agrees.
    """
    scale = in_size / out_size
    filterscale = max(scale, 1.0)
    support = 1.0 * filterscale  # the triangle filter's support is 1
    ss = 1.0 / filterscale
    matrix = np.zeros((out_size, in_size), dtype=np.float64)
    for xx in range(out_size):
        center = (xx + 0.5) * scale
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), in_size)
        weights = [_triangle((x - center + 0.5) * ss) for x in range(lo, hi)]
        total = 0.0
        for w in weights:
            total += w
        for x, w in zip(range(lo, hi), weights, strict=True):
            w = w / total if total != 0.0 else w
            matrix[xx, x] = math.floor(0.5 + w * (1 << _PRECISION_BITS))
    return matrix


def _resample_axis(images: np.ndarray, matrix: np.ndarray, axis: int) -> np.ndarray:
    """Apply an integer coefficient matrix along ``axis`` (1 = rows, 2 = columns), round to uint8."""
    moved = np.moveaxis(images, axis, -1).astype(np.float64)
    # float64 is exact here: products and sums stay far below 2**53.
    acc = moved @ matrix.T + float(1 << (_PRECISION_BITS - 1))
    result = np.clip(np.floor(acc / float(1 << _PRECISION_BITS)), 0, 255).astype(np.uint8)
    return np.moveaxis(result, -1, axis)


def _resize_numpy(images: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Pure-numpy equivalent of Pillow's ``resize((W, H), BILINEAR)`` on each image."""
    in_h, in_w = images.shape[1:3]
    out_h, out_w = size
    # Horizontal pass first, as Pillow (<= 12) does; a pass that changes nothing is skipped.
    if out_w != in_w:
        images = _resample_axis(images, _coefficients(in_w, out_w), axis=2)
    if out_h != in_h:
        images = _resample_axis(images, _coefficients(in_h, out_h), axis=1)
    return np.ascontiguousarray(images)
