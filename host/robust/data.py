"""Evaluation images for the suites: uint8 pixels *before* preprocessing.

Suites perturb the pixels (decode, resize, corrupt) and then preprocess with the model's own
:func:`aiot.host.datasets.preprocess`, so the perturbation is the only difference between the
reference pipeline and the perturbed one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EvalSet:
    """A fixed, seeded subset of a dataset's test split.

    Args:
        name: dataset name (``fashion-mnist``, ``digits``, ``folder:PATH``).
        images: uint8 ``(N, H, W)`` or ``(N, H, W, 3)``.
        labels: int64 ``(N,)``; ``None`` for unlabelled photos (agreement metrics only).
        indices: positions in the test split (provenance: which images were used).
    """

    name: str
    images: np.ndarray
    labels: np.ndarray | None
    indices: np.ndarray

    @property
    def labelled(self) -> bool:
        return self.labels is not None

    def describe(self) -> dict:
        """What a record keeps about the images it was computed on."""
        return {"dataset": self.name, "n": int(len(self.images)),
                "image_shape": list(self.images.shape[1:]), "labelled": self.labelled,
                "indices_head": [int(i) for i in self.indices[:16]]}


def eval_set(dataset: str, limit: int | None, seed: int = 0) -> EvalSet:
    """A class-balanced, seeded subset of ``dataset``'s test split (see ``select_subset``)."""
    from aiot.host.datasets import load_raw, select_subset

    raw = load_raw(dataset, "test")
    idx = select_subset(raw.labels, limit, seed)
    return EvalSet(raw.name, np.ascontiguousarray(raw.images[idx]),
                   np.ascontiguousarray(raw.labels[idx]), np.asarray(idx))


def model_input(images: np.ndarray, spec) -> np.ndarray:
    """uint8 images → the float32 batch ``spec``'s model takes (the toolkit's preprocessing)."""
    from aiot.host.datasets import preprocess

    return preprocess(images, spec.input)
