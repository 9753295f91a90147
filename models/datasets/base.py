"""What a dataset source implements against: raw datasets, the registry, split names.

A source (Fashion-MNIST, scikit-learn digits, a user image folder) only has to turn a split
name into a :class:`RawDataset` of uint8 images; :mod:`aiot.models.datasets.load` selects
subsets and preprocesses them for a model, the same for every source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from aiot.core.errors import DatasetError, UsageError
from aiot.core.registry import Registry

#: Split names every source understands.
SPLITS = ("train", "test")

#: ``folder:PATH`` names a user image folder instead of a registered dataset.
FOLDER_PREFIX = "folder:"


@dataclass(frozen=True, eq=False)  # eq on arrays is ambiguous; compare fields explicitly
class RawDataset:
    """One split of a dataset, as the source gives it.

    Args:
        name: canonical dataset name (``fashion-mnist``, ``digits``, ``folder:/abs/path``).
        images: uint8 pixels, ``(N, H, W)`` for grayscale or ``(N, H, W, 3)`` for RGB.
        labels: int64 class ids ``(N,)``, indices into ``classes``.
        classes: class names; label ``i`` is ``classes[i]``.
    """

    name: str
    images: np.ndarray
    labels: np.ndarray
    classes: tuple[str, ...]

    def __post_init__(self) -> None:
        images, labels = self.images, self.labels
        rgb = images.ndim == 4 and images.shape[3] == 3
        if images.dtype != np.uint8 or not (images.ndim == 3 or rgb):
            raise ValueError(f"RawDataset.images must be uint8 (N,H,W) or (N,H,W,3), got "
                             f"{images.dtype} {images.shape}")
        if labels.dtype != np.int64 or labels.shape != (images.shape[0],):
            raise ValueError(f"RawDataset.labels must be int64 ({images.shape[0]},), got "
                             f"{labels.dtype} {labels.shape}")
        if len(labels) and (labels.min() < 0 or labels.max() >= len(self.classes)):
            raise ValueError(f"RawDataset.labels must lie in 0..{len(self.classes) - 1}")
        object.__setattr__(self, "classes", tuple(self.classes))

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    @property
    def num_classes(self) -> int:
        """Number of classes."""
        return len(self.classes)

    @property
    def is_gray(self) -> bool:
        """True for single-channel images."""
        return self.images.ndim == 3


@dataclass(frozen=True)
class DatasetInfo:
    """A registered dataset source.

    Args:
        name: registry name, e.g. ``"fashion-mnist"``.
        description: one line for listings.
        loader: ``loader(split) -> RawDataset`` for ``split`` in :data:`SPLITS`.
    """

    name: str
    description: str
    loader: Callable[[str], RawDataset] = field(repr=False, compare=False)

    def load(self, split: str) -> RawDataset:
        """The ``split`` of this dataset."""
        return self.loader(check_split(split))


#: Registered datasets; ``folder:PATH`` is handled by :mod:`aiot.models.datasets.load`.
DATASETS: Registry[DatasetInfo] = Registry("dataset")


def check_split(split: str) -> str:
    """``split`` normalised to ``"train"`` or ``"test"``; anything else is a UsageError."""
    key = split.strip().lower()
    if key not in SPLITS:
        raise UsageError(f"unknown split '{split}'", f"use one of: {', '.join(SPLITS)}")
    return key


def readonly(array: np.ndarray) -> np.ndarray:
    """``array`` marked read-only, for arrays shared through an in-process cache."""
    array.flags.writeable = False
    return array
