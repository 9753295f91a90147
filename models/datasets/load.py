"""Loading a dataset by name: ``fashion-mnist``, ``digits`` (and aliases) or ``folder:PATH``, a
deterministic class-balanced subset of it, preprocessed for a model's
:class:`~aiot.models.InputSpec`, and the fingerprint naming exactly those images.

Every source gives the same, reproducible tensors for the same ``(name, split, limit, seed)``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import TYPE_CHECKING

import numpy as np

from aiot.core.errors import UsageError
from aiot.models.datasets.base import DATASETS, FOLDER_PREFIX, RawDataset, check_split
from aiot.models.datasets.image_folder import (
    folder_listing_digest,
    load_folder,
    resolve_root,
    scan_folder,
)
from aiot.models.datasets.preprocess import preprocess

if TYPE_CHECKING:  # aiot.models imports torch; keep this package light
    from aiot.models import InputSpec

log = logging.getLogger(__name__)

# Bump when subset selection or preprocessing changes, so cached shards and weights keyed by
# dataset_fingerprint() are rebuilt instead of silently reused.
_FINGERPRINT_VERSION = 1


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
    split = check_split(split)
    if is_folder(name):
        # Decode only the selected files, each resized straight to the model's size.
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
        payload["files"] = folder_listing_digest(_folder_path(name))
    text = json.dumps(payload, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
