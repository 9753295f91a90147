"""The dataset API: raw datasets, the registry, subsets, loading and fingerprints.

A source (Fashion-MNIST, scikit-learn digits, a user image folder) only has to turn a split
name into a :class:`RawDataset` of uint8 images; selection of a subset and preprocessing
for a model's :class:`~aiot.models.InputSpec` are shared here, so every source gives the
same, reproducible tensors for the same ``(name, split, limit, seed)``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from aiot.core.errors import DatasetError, UsageError
from aiot.core.registry import Registry

if TYPE_CHECKING:  # aiot.models imports torch; keep this package light
    from aiot.models import InputSpec

log = logging.getLogger(__name__)

#: Split names every source understands.
SPLITS = ("train", "test")

#: ``folder:PATH`` names a user image folder instead of a registered dataset.
FOLDER_PREFIX = "folder:"

# Bump when subset selection or preprocessing changes, so cached shards and weights keyed by
# dataset_fingerprint() are rebuilt instead of silently reused.
_FINGERPRINT_VERSION = 1


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


#: Registered datasets; ``folder:PATH`` is handled by :func:`load_raw` / :func:`load_dataset`.
DATASETS: Registry[DatasetInfo] = Registry("dataset")


def check_split(split: str) -> str:
    """``split`` normalised to ``"train"`` or ``"test"``; anything else is a UsageError."""
    key = split.strip().lower()
    if key not in SPLITS:
        raise UsageError(f"unknown split '{split}'", f"use one of: {', '.join(SPLITS)}")
    return key


def is_folder(name: str) -> bool:
    """True when ``name`` is ``folder:PATH``."""
    return name.strip().lower().startswith(FOLDER_PREFIX)


def _folder_path(name: str) -> str:
    path = name.strip()[len(FOLDER_PREFIX):]
    if not path:
        raise UsageError("'folder:' needs a path", "write folder:PATH, e.g. folder:./my_images")
    return path


def canonical_name(name: str) -> str:
    """The registered name for ``name`` (aliases resolved), or ``folder:<absolute path>``.

    Raises:
        UnknownName: not registered and not ``folder:PATH``.
    """
    if is_folder(name):
        from aiot.models.datasets.image_folder import resolve_root

        return FOLDER_PREFIX + str(resolve_root(_folder_path(name)))
    return DATASETS.canonical(name)


def load_raw(name: str, split: str = "test") -> RawDataset:
    """One split of a dataset as uint8 images and int64 labels.

    Args:
        name: a registered name or alias (``fashion-mnist``, ``fmnist``, ``digits``) or
            ``folder:PATH``.
        split: ``"train"`` or ``"test"``.

    Returns:
        The :class:`RawDataset`. Arrays may be shared with an in-process cache and are
        read-only; copy before modifying.

    Raises:
        UnknownName: unknown dataset name.
        DatasetError: the data is missing or malformed.
        MissingDependency: the source needs an extra that is not installed.
    """
    split = check_split(split)
    if is_folder(name):
        from aiot.models.datasets.image_folder import load_folder

        return load_folder(_folder_path(name), split)
    return DATASETS.get(name).load(split)


def select_subset(labels: np.ndarray, limit: int | None, seed: int = 0) -> np.ndarray:
    """Indices of a deterministic, class-balanced subset of at most ``limit`` items.

    Items are shuffled with ``seed`` and then taken round-robin over the classes, so every
    class gets ``limit // classes`` items (or all it has) and a larger ``limit`` extends a
    smaller one. Indices come back sorted (the source's order).

    Args:
        labels: int labels ``(N,)``.
        limit: at most this many items; None (or ``>= N``) takes everything.
        seed: shuffling seed.

    Returns:
        int64 indices.

    Raises:
        UsageError: ``limit`` < 1.
    """
    n = int(labels.shape[0])
    if limit is not None and limit < 1:
        raise UsageError(f"limit must be at least 1, got {limit}")
    if limit is None or limit >= n:
        return np.arange(n, dtype=np.int64)
    perm = np.random.default_rng(seed).permutation(n)
    shuffled = labels[perm]
    # Rank of each shuffled item within its class: 0 for the first of its class, 1 for the next…
    order = np.argsort(shuffled, kind="stable")
    sorted_labels = shuffled[order]
    first = np.searchsorted(sorted_labels, sorted_labels, side="left")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - first
    # Take all rank-0 items first (one per class), then rank 1, …; ties in shuffled order.
    picked = np.lexsort((np.arange(n), rank))[:limit]
    return np.sort(perm[picked]).astype(np.int64)


def load_dataset(name: str, spec: InputSpec, split: str = "test", limit: int | None = None,
                 seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A split preprocessed for a model: float32 inputs and int64 labels.

    Args:
        name: dataset name (see :func:`load_raw`).
        spec: the model's input spec (size, layout, channel order, normalisation).
        split: ``"train"`` or ``"test"``.
        limit: at most this many images, a class-balanced subset chosen with ``seed``
            (see :func:`select_subset`); None for all.
        seed: subset seed (ignored without ``limit``).

    Returns:
        ``(x, y)``: ``x`` float32 ``(N, C, H, W)`` (``(N, H, W, C)`` for NHWC specs),
        ``y`` int64 ``(N,)``.

    Raises:
        UnknownName, DatasetError, MissingDependency, UsageError: see :func:`load_raw`.
    """
    from aiot.models.datasets.preprocess import preprocess

    split = check_split(split)
    if is_folder(name):
        # Decode only the selected files, each resized straight to the model's size.
        from aiot.models.datasets.image_folder import load_folder, scan_folder

        scan = scan_folder(_folder_path(name), split)
        keep = select_subset(scan.labels, limit, seed)
        raw = load_folder(_folder_path(name), split, size=(spec.shape[1], spec.shape[2]),
                          indices=keep, scan=scan)
        images, labels = raw.images, raw.labels
    else:
        raw = load_raw(name, split)
        keep = select_subset(raw.labels, limit, seed)
        images, labels = (raw.images, raw.labels) if len(keep) == len(raw) else (
            raw.images[keep], raw.labels[keep])
    log.debug("dataset %s/%s: %d images -> %s", name, split, len(labels), spec.shape)
    return preprocess(images, spec), np.array(labels, dtype=np.int64)


def dataset_fingerprint(name: str, split: str, limit: int | None, seed: int) -> str:
    """A short sha256 naming exactly which images :func:`load_dataset` would return.

    Aliases give the same fingerprint; ``seed`` only counts when ``limit`` is set. For
    ``folder:PATH`` the folder's file names, sizes and modification times are included, so
    adding or editing an image changes the fingerprint.

    Args:
        name: dataset name (see :func:`load_raw`).
        split: ``"train"`` or ``"test"``.
        limit: as for :func:`load_dataset`.
        seed: as for :func:`load_dataset`.

    Returns:
        16 hex digits, for cache keys and provenance.
    """
    payload: dict[str, object] = {
        "v": _FINGERPRINT_VERSION,
        "dataset": canonical_name(name),
        "split": check_split(split),
        "limit": limit,
        "seed": seed if limit is not None else None,
    }
    if is_folder(name):
        from aiot.models.datasets.image_folder import folder_listing_digest

        payload["files"] = folder_listing_digest(_folder_path(name))
    text = json.dumps(payload, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def readonly(array: np.ndarray) -> np.ndarray:
    """``array`` marked read-only, for arrays shared through an in-process cache."""
    array.flags.writeable = False
    return array


def not_found(what: str, path: object, hint: str) -> DatasetError:
    """A DatasetError for a missing file or folder (helper for sources)."""
    return DatasetError(f"{what} not found: '{path}' does not exist", hint)
