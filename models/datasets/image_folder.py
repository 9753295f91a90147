"""A user's image folder, ``folder:PATH``: one sub-folder per class, decoded with Pillow.

Two layouts:

* ``PATH/<class>/<image>``: each image goes to the test split when a hash of its relative
  path falls in the lowest 20 % (deterministic across runs and machines, and stable when
  other images are added);
* ``PATH/train/<class>/<image>`` and ``PATH/test/<class>/<image>``: the user's own split.

Class ids are the sorted class-folder names (the union over both splits in the second
layout). Images may sit in nested folders below their class folder; hidden files and files
without an image extension are ignored.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aiot.core.errors import DatasetError, MissingDependency
from aiot.models.datasets.base import FOLDER_PREFIX, RawDataset
from aiot.models.datasets.preprocess import resize_images

log = logging.getLogger(__name__)

#: File extensions read as images (case-insensitive).
IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff",
                              ".ppm", ".pgm", ".pbm"})
#: Share of images the hash split puts into the test split.
TEST_FRACTION = 0.2

_GRAY_MODES = frozenset({"1", "L", "LA", "I", "I;16", "I;16B", "I;16L", "F"})


def _layout_hint(root: Path) -> str:
    return f"put images in one sub-folder per class: {root}/<class>/<image>.png"


@dataclass(frozen=True, eq=False)
class FolderScan:
    """The files of one split of an image folder, before decoding.

    Args:
        root: the folder (absolute).
        split: ``"train"`` or ``"test"``.
        files: image files, in a fixed order.
        labels: int64 class id of each file.
        classes: sorted class names.
    """

    root: Path
    split: str
    files: tuple[Path, ...]
    labels: np.ndarray
    classes: tuple[str, ...]


def resolve_root(path: str) -> Path:
    """The absolute folder for ``folder:PATH``; a DatasetError when it is not a folder."""
    root = Path(path).expanduser().resolve()
    if not root.exists():
        raise DatasetError(f"image folder '{root}' does not exist", _layout_hint(root))
    if not root.is_dir():
        raise DatasetError(f"'{root}' is not a folder", _layout_hint(root))
    return root


def _is_image(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_EXTENSIONS and not path.name.startswith(".")


def _images_under(folder: Path) -> list[Path]:
    """Image files below ``folder`` (recursively, hidden folders skipped), sorted by path."""
    found = [
        p for p in folder.rglob("*")
        if _is_image(p) and p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(folder).parts[:-1])
    ]
    return sorted(found, key=lambda p: p.relative_to(folder).as_posix())


def _class_dirs(folder: Path) -> dict[str, list[Path]]:
    """``{class name: image files}`` for the non-hidden sub-folders of ``folder`` that hold images."""
    classes: dict[str, list[Path]] = {}
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        images = _images_under(sub)
        if images:
            classes[sub.name] = images
        else:
            log.warning("ignoring '%s': no images in it", sub)
    return classes


def _split_folders(root: Path) -> dict[str, Path] | None:
    """``{"train": root/train, "test": root/test}`` when the user split the data, else None."""
    folders = {split: root / split for split in ("train", "test")}
    return folders if all(f.is_dir() for f in folders.values()) else None


def _in_test(relative: str) -> bool:
    """The hash split: a fixed ~20 % of relative paths go to the test split."""
    digest = hashlib.sha256(relative.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") < TEST_FRACTION * 2**64


def scan_folder(path: str, split: str) -> FolderScan:
    """List the images and labels of one split without decoding anything.

    Raises:
        DatasetError: missing folder, no class sub-folders with images, or no images in
            ``split``.
    """
    root = resolve_root(path)
    split_folders = _split_folders(root)
    if split_folders is not None:
        per_split = {s: _class_dirs(f) for s, f in split_folders.items()}
        classes = tuple(sorted(set(per_split["train"]) | set(per_split["test"])))
        chosen = per_split[split]
        entries = [(f, classes.index(name)) for name, files in chosen.items() for f in files]
    else:
        by_class = _class_dirs(root)
        classes = tuple(by_class)
        entries = [
            (f, label) for label, files in enumerate(by_class.values()) for f in files
            if _in_test(f.relative_to(root).as_posix()) == (split == "test")
        ]
    if not classes:
        raise DatasetError(f"image folder '{root}' has no class sub-folders with images",
                           _layout_hint(root))
    if not entries:
        if split_folders:
            how = f"its {split}/ folder is empty"
        else:
            how = f"the hash split puts ~{TEST_FRACTION:.0%} into test"
        raise DatasetError(
            f"image folder '{root}' has no {split} images ({how})",
            "add images, or make train/ and test/ sub-folders to choose the split yourself")
    files, labels = zip(*entries, strict=True)
    return FolderScan(root, split, tuple(files), np.asarray(labels, dtype=np.int64), classes)


def _decode(path: Path) -> np.ndarray:
    """One image as uint8 ``(H, W)`` (gray) or ``(H, W, 3)`` (RGB); errors name the file."""
    try:
        from PIL import Image, ImageOps
    except ImportError:
        raise MissingDependency("Pillow", "data") from None
    try:
        with Image.open(path) as image:
            image = ImageOps.exif_transpose(image)  # phone photos store rotation in EXIF
            mode = "L" if image.mode in _GRAY_MODES else "RGB"
            return np.asarray(image.convert(mode), dtype=np.uint8)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        # Pillow raises OSError for truncated/unknown files, SyntaxError/ValueError for some
        # malformed headers.
        raise DatasetError(f"cannot read image '{path}': {exc}", "remove or replace the file") from None


def _common_size(arrays: list[np.ndarray]) -> tuple[int, int]:
    """The most frequent (H, W); ties go to the larger image."""
    counts = Counter(a.shape[:2] for a in arrays)
    return max(counts, key=lambda s: (counts[s], s[0] * s[1], s))


def _stack(arrays: list[np.ndarray], size: tuple[int, int] | None, root: Path) -> np.ndarray:
    """One uint8 batch: gray promoted to RGB when any image is RGB, sizes made equal."""
    if any(a.ndim == 3 for a in arrays):
        arrays = [np.repeat(a[..., None], 3, axis=2) if a.ndim == 2 else a for a in arrays]
    if size is None:
        size = _common_size(arrays)
        if any(a.shape[:2] != size for a in arrays):
            log.info("images in '%s' differ in size; resizing to the most common, %dx%d", root, *size)
    batch = np.empty((len(arrays), *size, *arrays[0].shape[2:]), dtype=np.uint8)
    for i, array in enumerate(arrays):
        batch[i] = resize_images(array[None], size)[0]
    return batch


def load_folder(path: str, split: str, size: tuple[int, int] | None = None,
                indices: np.ndarray | None = None, scan: FolderScan | None = None) -> RawDataset:
    """Decode one split of an image folder.

    Args:
        path: the folder (``folder:PATH`` without the prefix).
        split: ``"train"`` or ``"test"``.
        size: ``(H, W)`` to centre-crop and resize every image to; None keeps the images'
            size when they agree and otherwise uses the most common size.
        indices: decode only these entries of the scan (for subsets).
        scan: a :func:`scan_folder` result to reuse.

    Returns:
        RGB ``(N, H, W, 3)`` when any image has colour, else gray ``(N, H, W)``.

    Raises:
        DatasetError: see :func:`scan_folder`; an unreadable image (named).
        MissingDependency: Pillow is not installed.
    """
    scan = scan or scan_folder(path, split)
    picked = range(len(scan.files)) if indices is None else [int(i) for i in indices]
    files = [scan.files[i] for i in picked]
    arrays = [_decode(f) for f in files]
    images = _stack(arrays, size, scan.root)
    labels = scan.labels[list(picked)] if indices is not None else scan.labels
    log.debug("image folder %s/%s: %d images, %d classes", scan.root, split, len(files),
              len(scan.classes))
    return RawDataset(FOLDER_PREFIX + str(scan.root), images, np.array(labels, dtype=np.int64),
                      scan.classes)


def folder_listing_digest(path: str) -> str:
    """sha256 of every image's relative path, size and modification time (for fingerprints)."""
    root = resolve_root(path)
    digest = hashlib.sha256()
    for file in _images_under(root):
        stat = file.stat()
        line = f"{file.relative_to(root).as_posix()}\t{stat.st_size}\t{stat.st_mtime_ns}\n"
        digest.update(line.encode())
    return digest.hexdigest()
