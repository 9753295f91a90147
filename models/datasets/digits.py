"""scikit-learn's handwritten digits: 1,797 8x8 grayscale images, 10 classes.

Small enough to train on in a second, which makes it the dataset of tests and quick checks.
scikit-learn ships it inside the package (no download); it has no train/test split, so we
make a fixed, class-stratified 80/20 one.
"""

from __future__ import annotations

import functools
import logging

import numpy as np

from aiot.core.errors import MissingDependency
from aiot.models.datasets.base import DATASETS, DatasetInfo, RawDataset, readonly

log = logging.getLogger(__name__)

CLASSES = tuple(str(d) for d in range(10))

#: Fraction of every class that goes to the test split.
TEST_FRACTION = 0.2
# Fixed so the split never changes between runs, machines or user seeds.
_SPLIT_SEED = 20240611


@functools.cache
def _load_all() -> tuple[np.ndarray, np.ndarray]:
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise MissingDependency("scikit-learn", "data") from None
    bunch = load_digits()
    # Pixel values are counts 0..16 of a 4x4 block; scale to the usual 0..255.
    images = np.rint(bunch.images * (255.0 / 16.0)).clip(0, 255).astype(np.uint8)
    return images, bunch.target.astype(np.int64)


@functools.cache
def _split_indices() -> dict[str, np.ndarray]:
    """Sorted indices of each split: the first 20 % of every class after a fixed shuffle."""
    _, labels = _load_all()
    rng = np.random.default_rng(_SPLIT_SEED)
    test = []
    for cls in range(len(CLASSES)):
        members = rng.permutation(np.flatnonzero(labels == cls))
        test.append(members[: int(round(len(members) * TEST_FRACTION))])
    test_idx = np.sort(np.concatenate(test))
    train_idx = np.setdiff1d(np.arange(len(labels)), test_idx)
    return {"train": train_idx, "test": test_idx}


def load(split: str) -> RawDataset:
    """One split of the digits (about 1,437 train / 360 test images, 8x8 grayscale).

    Raises:
        MissingDependency: scikit-learn is not installed (extra ``data``).
    """
    images, labels = _load_all()
    idx = _split_indices()[split]
    return RawDataset("digits", readonly(images[idx]), readonly(labels[idx]), CLASSES)


DATASETS.add(
    "digits",
    DatasetInfo("digits", "scikit-learn digits: 8x8 grayscale handwritten digits, 10 classes, "
                "1,797 images", load),
    aliases=("sklearn-digits", "sklearn_digits"),
)
