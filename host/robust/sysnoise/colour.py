"""Colour space: the RGB -> NV12 -> RGB round trip of a camera or video pipeline.

NV12 is 4:2:0 YUV: a full-resolution luma plane and one half-resolution plane of interleaved
U and V. The round trip therefore subsamples the chroma and applies a matrix and range
convention twice. Two implementations, which differ from each other about as much as each
differs from the original (``../shared/notes/robustness.md`` §C.3):

* ``nv12-opencv``: OpenCV has no RGB -> NV12 conversion, so RGB -> I420 (planar U, V), the U
  and V planes interleaved into NV12 with numpy, then OpenCV's NV12 -> RGB;
* ``nv12-swscale``: FFmpeg's swscale through PyAV, RGB -> NV12 -> RGB (BT.601, limited range).

A grayscale image goes gray -> RGB (replicated) -> NV12 -> RGB -> gray (Pillow's ITU-R 601-2
luma, which maps R = G = B back to the same gray exactly), so only the round trip adds noise.
NV12 needs even sizes: odd images are padded by repeating the edge and cropped back.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: The reference: pixels passed on unchanged (the toolkit's pipeline stays in RGB).
REFERENCE = "rgb"


def _even_padded(rgb: np.ndarray) -> np.ndarray:
    pad_h, pad_w = rgb.shape[0] % 2, rgb.shape[1] % 2
    return np.pad(rgb, ((0, pad_h), (0, pad_w), (0, 0)), mode="edge") if pad_h or pad_w else rgb


def i420_to_nv12(i420: np.ndarray, height: int, width: int) -> np.ndarray:
    """Re-pack OpenCV's I420 layout (Y, then all U, then all V) as NV12 (Y, then U V U V ...)."""
    flat = i420.reshape(-1)
    luma = flat[: height * width]
    chroma = height // 2 * width // 2
    u = flat[height * width: height * width + chroma]
    v = flat[height * width + chroma: height * width + 2 * chroma]
    uv = np.stack([u, v], axis=-1).reshape(height // 2, width)
    return np.concatenate([luma.reshape(height, width), uv], axis=0)


def nv12_opencv(rgb: np.ndarray) -> np.ndarray:
    """RGB -> I420 -> NV12 -> RGB with OpenCV (even ``(H, W, 3)`` uint8)."""
    import cv2

    height, width = rgb.shape[:2]
    i420 = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2YUV_I420)
    return cv2.cvtColor(i420_to_nv12(i420, height, width), cv2.COLOR_YUV2RGB_NV12)


def nv12_swscale(rgb: np.ndarray) -> np.ndarray:
    """RGB -> NV12 -> RGB with FFmpeg's swscale (PyAV; even ``(H, W, 3)`` uint8)."""
    import av

    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
    return frame.reformat(format="nv12").reformat(format="rgb24").to_ndarray()


#: Option name -> (round trip of an even RGB image, package it needs).
COLOURS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = {
    "nv12-opencv": (nv12_opencv, "opencv-python-headless"),
    "nv12-swscale": (nv12_swscale, "av"),
}


def round_trip(image: np.ndarray, method: str) -> np.ndarray:
    """``image`` through colour conversion ``method`` (``rgb``: unchanged).

    Args:
        image: uint8 ``(H, W)`` gray or ``(H, W, 3)`` RGB.
        method: :data:`REFERENCE` or a name of :data:`COLOURS`.

    Returns:
        uint8 pixels of the same shape.
    """
    if method == REFERENCE:
        return image
    convert = COLOURS[method][0]
    gray = image.ndim == 2
    rgb = np.repeat(image[..., None], 3, axis=2) if gray else image
    out = convert(_even_padded(rgb))[: image.shape[0], : image.shape[1]]
    if not gray:
        return np.ascontiguousarray(out)
    from PIL import Image

    return np.asarray(Image.fromarray(np.ascontiguousarray(out)).convert("L"))
