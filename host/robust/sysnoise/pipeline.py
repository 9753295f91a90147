"""The pre-processing pipeline: JPEG bytes -> decoder -> resize -> colour -> model-size pixels.

A :class:`Pipeline` names one choice per step; the reference is Pillow decoding, Pillow
bilinear resizing and no colour conversion, which is what the toolkit's own preprocessing
does. :class:`Stages` computes each step once per distinct prefix of choices, so the options
of a noise type, each changing one step, share the work of the unchanged steps before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from aiot.host.robust.data import model_input
from aiot.host.robust.sysnoise import colour, decoders, resize


@dataclass(frozen=True)
class Pipeline:
    """One choice per pre-processing step (defaults: the reference pipeline)."""

    decoder: str = decoders.REFERENCE
    resizer: str = resize.REFERENCE
    colour: str = colour.REFERENCE

    def but(self, **step) -> Pipeline:
        """The same pipeline with one step changed (``but(decoder="pyav")``)."""
        return replace(self, **step)


class Stages:
    """The steps of every pipeline over one camera's JPEGs, each computed once.

    Args:
        jpegs: the captured JPEGs.
        gray: whether they are grayscale JPEGs.
        target: the model's input ``(h, w)``.
        crop: centre-crop share (see :func:`aiot.host.robust.sysnoise.resize.resize_to`).
    """

    def __init__(self, jpegs: Sequence[bytes], gray: bool, target: tuple[int, int], crop: float = 1.0) -> None:
        self.jpegs = list(jpegs)
        self.gray = gray
        self.target = (int(target[0]), int(target[1]))
        self.crop = crop
        self._cache: dict[tuple, list[np.ndarray]] = {}

    def decoded(self, decoder: str) -> list[np.ndarray]:
        """Every JPEG decoded by ``decoder`` (camera size)."""
        key = (decoder,)
        if key not in self._cache:
            self._cache[key] = decoders.decode_all(decoder, self.jpegs, self.gray)
        return self._cache[key]

    def resized(self, decoder: str, resizer: str) -> list[np.ndarray]:
        """The decoded images resized and centre-cropped to the model's input size."""
        key = (decoder, resizer)
        if key not in self._cache:
            self._cache[key] = [resize.resize_to(image, self.target, resizer, self.crop)
                                for image in self.decoded(decoder)]
        return self._cache[key]

    def images(self, pipeline: Pipeline) -> list[np.ndarray]:
        """The model-size uint8 images ``pipeline`` hands to the model's preprocessing."""
        key = (pipeline.decoder, pipeline.resizer, pipeline.colour)
        if key not in self._cache:
            self._cache[key] = [colour.round_trip(image, pipeline.colour)
                                for image in self.resized(pipeline.decoder, pipeline.resizer)]
        return self._cache[key]

    def source_size(self) -> tuple[int, int]:
        """The (first) captured image's ``(H, W)``, as the reference decoder sees it."""
        return self.decoded(decoders.REFERENCE)[0].shape[:2]


def model_batch(images: Sequence[np.ndarray], spec) -> np.ndarray:
    """Model-size uint8 images -> the float32 batch the model takes (channels, normalisation).

    The images already have the input's size, so the toolkit's preprocessing only converts
    channels and normalises: the pipeline's resize is the only resize.
    """
    return model_input(np.stack(images), spec)
