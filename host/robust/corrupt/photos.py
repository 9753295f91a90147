"""Photos of any size (the unlabelled ``photos`` set) brought to the model's input size.

ImageNet-C corrupts images at the size the model sees (224 px), and the corrupted sets are
cached as one uint8 array, so a ragged set is first resized and centre-cropped to the model's
``H x W`` as uint8 RGB, with the same rule the sysnoise suite uses for photos (Pillow bilinear,
shorter side to ``H / 0.875``, centre ``H x W``: 256 -> 224 for ImageNet models). The model's
own preprocessing then only normalises: corrupting is the only change between clean and
corrupted inputs.
"""

from __future__ import annotations

import numpy as np

from aiot.host.robust.corrupt.imagenet_c import gray_to_rgb
from aiot.host.robust.data import EvalSet
from aiot.host.robust.sysnoise.camera import needed_side
from aiot.host.robust.sysnoise.resize import REFERENCE, resize_to
from aiot.host.robust.sysnoise.suite import PHOTO_CROP


def model_size(spec) -> tuple[int, int]:
    """The model's input ``(H, W)`` (``spec.input.shape`` is ``(C, H, W)``)."""
    return tuple(int(side) for side in spec.input.shape[1:])


def at_model_size(data, spec):
    """``data`` with every image resized and centre-cropped to ``spec``'s input, uint8 RGB.

    Labels, indices and names are kept, so seeds and provenance still refer to the source set.
    """
    size = model_size(spec)
    images = [resize_to(image if image.ndim == 3 else gray_to_rgb(image), size, REFERENCE,
                        PHOTO_CROP) for image in data.images]
    return EvalSet(data.name, np.stack(images), data.labels, data.indices, data.names)


def describe(data, spec) -> dict:
    """What the record keeps about ``data`` and how it was brought to the model's size."""
    size = model_size(spec)
    return {**data.describe(), "corrupted_shape": [*size, 3], "resize": REFERENCE,
            "crop": PHOTO_CROP, "resized_side": needed_side(size, PHOTO_CROP)}
