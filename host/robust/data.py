"""Evaluation images for the suites: uint8 pixels *before* preprocessing.

Suites perturb the pixels (decode, resize, corrupt) and then preprocess with the model's own
:func:`aiot.models.datasets.preprocess`, so the perturbation is the only difference between the
reference pipeline and the perturbed one.

Two kinds of sets: a labelled test split of a registered dataset (``fashion-mnist``,
``digits``, ``folder:PATH``), and ``photos``, real colour photos of different sizes without
labels (:func:`photo_set`), for a real ImageNet model's top-1 agreement and flip rate.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from aiot.core.errors import DatasetError, MissingDependency, UnknownName, UsageError
from aiot.models.datasets import DATASETS, load_raw, preprocess, select_subset

log = logging.getLogger(__name__)

#: Dataset name of :func:`photo_set`.
PHOTOS = "photos"


@dataclass(frozen=True)
class EvalSet:
    """A fixed, seeded subset of a dataset's test split, or of the sample photos.

    Args:
        name: dataset name (``fashion-mnist``, ``digits``, ``folder:PATH``, ``photos``).
        images: uint8 ``(N, H, W)`` or ``(N, H, W, 3)``; or a list of uint8 ``(H, W, 3)``
            (or ``(H, W)``) images of different sizes (``photos``).
        labels: int64 ``(N,)``; ``None`` for unlabelled photos (agreement metrics only).
        indices: positions in the test split (provenance: which images were used).
        names: one name per image where the source has them (``coffee``), else None.
    """

    name: str
    images: np.ndarray | list[np.ndarray]
    labels: np.ndarray | None
    indices: np.ndarray
    names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.images, np.ndarray):
            object.__setattr__(self, "images", [np.asarray(image) for image in self.images])

    def __len__(self) -> int:
        return len(self.images)

    @property
    def labelled(self) -> bool:
        return self.labels is not None

    @property
    def ragged(self) -> bool:
        """True when the images are a list of different sizes (not one array)."""
        return not isinstance(self.images, np.ndarray)

    def describe(self) -> dict:
        """What a record keeps about the images it was computed on.

        ``image_shape`` is the shape shared by every image, or None for a ragged set, whose
        shapes are listed in ``image_shapes``.
        """
        shapes = [list(image.shape) for image in self.images] if self.ragged else None
        facts = {"dataset": self.name, "n": len(self),
                 "image_shape": None if self.ragged else list(self.images.shape[1:]),
                 "labelled": self.labelled, "indices_head": [int(i) for i in self.indices[:16]]}
        if shapes is not None:
            facts["image_shapes"] = shapes
        if self.names is not None:
            facts["names"] = list(self.names)
        return facts


def eval_set(dataset: str, limit: int | None, seed: int = 0) -> EvalSet:
    """A class-balanced, seeded subset of ``dataset``'s test split (see ``select_subset``).

    ``photos`` gives :func:`photo_set` (unlabelled, a seeded subset of ``limit`` photos).
    """
    if dataset.strip().lower() == PHOTOS:
        return photo_set(limit, seed)
    try:
        raw = load_raw(dataset, "test")
    except UnknownName:
        raise UnknownName("dataset", dataset, [*DATASETS.names(), PHOTOS]) from None
    idx = select_subset(raw.labels, limit, seed)
    return EvalSet(raw.name, np.ascontiguousarray(raw.images[idx]),
                   np.ascontiguousarray(raw.labels[idx]), np.asarray(idx))


def model_input(images: np.ndarray | Sequence[np.ndarray], spec) -> np.ndarray:
    """uint8 images → the float32 batch ``spec``'s model takes (the toolkit's preprocessing).

    A list of images of different sizes is preprocessed one image at a time (centre crop to
    the model's aspect ratio, bilinear resize, normalisation) and stacked, so each row equals
    ``preprocess(image[None], spec.input)[0]``.
    """
    if isinstance(images, np.ndarray):
        return preprocess(images, spec.input)
    if len(images) == 0:
        raise UsageError("model_input needs at least one image")
    return np.concatenate([preprocess(np.asarray(image)[None], spec.input) for image in images])


def photo_set(limit: int | None = None, seed: int = 0) -> EvalSet:
    """Real colour photos that ship with scikit-image and scikit-learn, without labels.

    Seven everyday photos (an astronaut, a cat, an espresso, a rocket, a motorcycle, a palace,
    a flower) and three scientific ones no ImageNet class fits (Hubble deep field, a stained
    tissue, a retina), each at its own size (300 x 451 to 1411 x 1411). All load offline; a
    photo that a future scikit-image release no longer ships is skipped with a warning, and
    :attr:`EvalSet.names` records which were used. The arrays are shared and read-only:
    copy one before changing it.

    Args:
        limit: at most this many photos, a seeded choice (None: all of them).
        seed: seed of that choice.

    Raises:
        MissingDependency: scikit-image or scikit-learn is not installed.
        DatasetError: no photo could be loaded.
    """
    names, images = _load_photos()
    idx = select_subset(np.zeros(len(names), dtype=np.int64), limit, seed)
    return EvalSet(PHOTOS, [images[i] for i in idx], None, np.asarray(idx),
                   tuple(names[i] for i in idx))


def _skimage(name: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        from skimage import data

        return getattr(data, name)()
    return load


def _motorcycle() -> np.ndarray:
    from skimage import data

    return data.stereo_motorcycle()[0]  # the left view of the stereo pair


def _sklearn(file: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        from sklearn.datasets import load_sample_image

        return load_sample_image(file)
    return load


# (name, loader) in a fixed order: indices in EvalSet refer to it.
_PHOTOS: tuple[tuple[str, Callable[[], np.ndarray]], ...] = (
    ("astronaut", _skimage("astronaut")),
    ("chelsea", _skimage("chelsea")),
    ("coffee", _skimage("coffee")),
    ("rocket", _skimage("rocket")),
    ("motorcycle", _motorcycle),
    ("china", _sklearn("china.jpg")),
    ("flower", _sklearn("flower.jpg")),
    ("hubble_deep_field", _skimage("hubble_deep_field")),
    ("immunohistochemistry", _skimage("immunohistochemistry")),
    ("retina", _skimage("retina")),
)


@functools.cache
def _load_photos() -> tuple[tuple[str, ...], tuple[np.ndarray, ...]]:
    """Every photo that loads, read-only (shared by all callers; copy before modifying)."""
    for module, package in (("skimage.data", "scikit-image"), ("sklearn.datasets", "scikit-learn")):
        try:
            importlib.import_module(module)
        except ImportError:
            raise MissingDependency(f"{package} (its sample photos)", "robust") from None
    names, images = [], []
    for name, load in _PHOTOS:
        try:
            image = np.ascontiguousarray(load(), dtype=np.uint8)
        except Exception as exc:  # noqa: BLE001 - a missing file: a download or import error
            log.warning("sample photo %s is not available offline, skipped: %s", name, exc)
            continue
        image.setflags(write=False)
        names.append(name)
        images.append(image)
    if not images:
        raise DatasetError("no sample photo could be loaded",
                           "reinstall scikit-image and scikit-learn: pip install 'aiot[robust]'")
    return tuple(names), tuple(images)
