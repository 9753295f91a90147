"""The "camera": source pixels captured at some size and encoded as JPEG, once per run.

Fashion-MNIST and other small test sets are neither JPEG nor larger than the model's input,
so decoding and resizing would not matter on them. The suite therefore simulates a camera:
each source image is resampled (Pillow bicubic) so that its shorter side is the camera's
side and encoded as a JPEG (Pillow, quality 90; colour images 4:2:0 as cameras do, grayscale
images as grayscale JPEGs). Two cameras:

* ``down``: larger than the model's input, so the pipeline downscales (64 px for a 28 px
  model); sources already larger than needed are kept at their own size (photos);
* ``up``: 3/4 of what the model needs (21 px for 28 px), so the pipeline upscales.

Every noise type starts from these JPEG bytes, so each changes exactly one later step.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: JPEG quality of the simulated camera.
QUALITY = 90
#: How much larger than the model's input the downscaling camera is (28 px -> 64 px).
DOWN_FACTOR = 64 / 28
#: How much smaller than the model's input the upscaling camera is (28 px -> 21 px).
UP_FACTOR = 0.75


@dataclass(frozen=True)
class Camera:
    """A capture size.

    Args:
        name: ``down`` or ``up`` (what the pipeline's resize then does).
        side: shorter side of the captured image; None keeps the source's own size.
    """

    name: str
    side: int | None

    def capture(self, image: np.ndarray) -> np.ndarray:
        """``image`` resampled (Pillow bicubic) so its shorter side is :attr:`side`."""
        if self.side is None or min(image.shape[:2]) == self.side:
            return image
        from PIL import Image

        h, w = image.shape[:2]
        scale = self.side / min(h, w)
        size = (max(1, round(w * scale)), max(1, round(h * scale)))
        return np.asarray(Image.fromarray(image).resize(size, Image.Resampling.BICUBIC))

    def describe(self) -> str:
        return "source size" if self.side is None else f"{self.side} px"


def encode_jpeg(image: np.ndarray, quality: int = QUALITY) -> bytes:
    """Pillow's JPEG of a uint8 gray ``(H, W)`` or RGB ``(H, W, 3)`` image (RGB as 4:2:0)."""
    from PIL import Image

    buffer = io.BytesIO()
    options = {} if image.ndim == 2 else {"subsampling": 2}  # 2 = 4:2:0
    Image.fromarray(np.ascontiguousarray(image)).save(buffer, "JPEG", quality=quality, **options)
    return buffer.getvalue()


def capture_jpegs(images: Sequence[np.ndarray], camera: Camera, quality: int = QUALITY) -> list[bytes]:
    """Every source image captured by ``camera`` and encoded as JPEG."""
    return [encode_jpeg(camera.capture(as_gray_or_rgb(image)), quality) for image in images]


def as_gray_or_rgb(image: np.ndarray) -> np.ndarray:
    """``(H, W)`` for gray (also ``(H, W, 1)``), ``(H, W, 3)`` for RGB, uint8."""
    image = np.asarray(image, dtype=np.uint8)
    return image[..., 0] if image.ndim == 3 and image.shape[2] == 1 else image


def needed_side(target: tuple[int, int], crop: float = 1.0) -> int:
    """Shorter side an image is resized to for a ``target`` input with centre crop ``crop``."""
    return math.ceil(min(target) / crop - 1e-9)


def cameras(source_sides: Sequence[int], target: tuple[int, int], crop: float = 1.0) -> tuple[Camera, Camera]:
    """The ``down`` and ``up`` cameras for sources with these shorter sides (see module docs)."""
    need = needed_side(target, crop)
    down = Camera("down", None if min(source_sides) > need else round(need * DOWN_FACTOR))
    return down, Camera("up", max(1, round(need * UP_FACTOR)))
