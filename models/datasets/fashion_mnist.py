"""Fashion-MNIST from the IDX files of the Debian package ``dataset-fashion-mnist``.

The IDX format (from MNIST) is a 4-byte magic number, big-endian uint32 dimension sizes and
the raw values. We parse it ourselves (gzip + numpy) rather than pulling in a dataset
library, and validate magic, sizes and label ranges so a truncated download fails with the
file's name instead of a confusing reshape error later.
"""

from __future__ import annotations

import functools
import gzip
import logging
import os
import zlib
from pathlib import Path

import numpy as np

from aiot.core import environment
from aiot.core.errors import DatasetError
from aiot.models.datasets.base import DATASETS, DatasetInfo, RawDataset, readonly

log = logging.getLogger(__name__)

#: Where ``apt-get install dataset-fashion-mnist`` puts the files.
DEFAULT_DIR = Path("/usr/share/datasets/fashion-mnist")
#: Environment variable pointing at another folder with the same four files.
ENV_DIR = "AIOT_FASHION_MNIST_DIR"

CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
           "Bag", "Ankle boot")

_FILE_PREFIX = {"train": "train", "test": "t10k"}
_HINT = f"apt-get install dataset-fashion-mnist, or set {ENV_DIR} to a folder with the IDX files"

# IDX type byte -> numpy dtype (big-endian, as the format stores them).
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def data_dir() -> Path:
    """The Fashion-MNIST folder: env ``AIOT_FASHION_MNIST_DIR`` or the Debian package's."""
    env = environment.get(ENV_DIR)
    return Path(env).expanduser() if env else DEFAULT_DIR


def _read_bytes(path: Path) -> bytes:
    """The decompressed bytes of ``path`` (gzip if it ends in .gz), errors naming the file."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as fh:
                return fh.read()
        return path.read_bytes()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise DatasetError(f"IDX file '{path}' is truncated or corrupt: {exc}", _HINT) from None
    except OSError as exc:
        raise DatasetError(f"cannot read IDX file '{path}': {exc.strerror or exc}", _HINT) from None


def parse_idx(data: bytes, source: str = "<bytes>", ndim: int | None = None) -> np.ndarray:
    """Parse an IDX blob into an array.

    Args:
        data: the decompressed file contents.
        source: file name for error messages.
        ndim: the number of dimensions the caller expects (checked when given).

    Returns:
        The array in native byte order (uint8 for image and label files).

    Raises:
        DatasetError: bad magic, unexpected dimensions, or a size that does not match the
            header (truncated file or trailing bytes). The message names ``source``.
    """
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        magic = data[:4].hex() or "empty"
        raise DatasetError(f"'{source}' is not an IDX file (bad magic number {magic})", _HINT)
    dims = data[3]
    if ndim is not None and dims != ndim:
        raise DatasetError(f"IDX file '{source}' has {dims} dimensions, expected {ndim}", _HINT)
    header = 4 + 4 * dims
    if len(data) < header:
        raise DatasetError(f"IDX file '{source}' is truncated (header cut short)", _HINT)
    shape = tuple(int(v) for v in np.frombuffer(data, dtype=">u4", count=dims, offset=4))
    dtype = np.dtype(_IDX_DTYPES[data[2]])
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    got = len(data) - header
    if got != expected:
        what = "truncated" if got < expected else "longer than its header says"
        raise DatasetError(f"IDX file '{source}' is {what}: {got} data bytes, header {shape} needs "
                           f"{expected}", _HINT)
    array = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="), copy=False)


def read_idx(path: str | os.PathLike[str], ndim: int | None = None) -> np.ndarray:
    """Read an IDX file (``.gz`` or plain); see :func:`parse_idx`."""
    path = Path(path)
    return parse_idx(_read_bytes(path), str(path), ndim)


def _find(folder: Path, stem: str) -> Path:
    """``folder/stem.gz`` or, for hand-decompressed downloads, ``folder/stem``."""
    for candidate in (folder / f"{stem}.gz", folder / stem):
        if candidate.is_file():
            return candidate
    if not folder.is_dir():
        raise DatasetError(f"Fashion-MNIST not found: folder '{folder}' does not exist", _HINT)
    raise DatasetError(f"Fashion-MNIST file '{folder / stem}.gz' is missing", _HINT)


@functools.lru_cache(maxsize=4)
def _load_cached(images_path: Path, labels_path: Path, _stamp: tuple) -> tuple[np.ndarray, np.ndarray]:
    # _stamp (sizes, mtimes) is only part of the cache key: a replaced file is re-read.
    images = read_idx(images_path, ndim=3)
    labels = read_idx(labels_path, ndim=1)
    if images.dtype != np.uint8 or labels.dtype != np.uint8:
        raise DatasetError(
            f"Fashion-MNIST files '{images_path}', '{labels_path}' must hold unsigned bytes", _HINT)
    if images.shape[0] != labels.shape[0]:
        raise DatasetError(f"'{images_path}' has {images.shape[0]} images but '{labels_path}' has "
                           f"{labels.shape[0]} labels", _HINT)
    if labels.size and labels.max() >= len(CLASSES):
        raise DatasetError(
            f"'{labels_path}' has label {labels.max()}, expected 0..{len(CLASSES) - 1}", _HINT)
    return readonly(np.ascontiguousarray(images)), readonly(labels.astype(np.int64))


def load(split: str) -> RawDataset:
    """One split of Fashion-MNIST (60,000 train / 10,000 test 28x28 grayscale images).

    Args:
        split: ``"train"`` or ``"test"``.

    Raises:
        DatasetError: files missing (hint: the Debian package or ``AIOT_FASHION_MNIST_DIR``),
            truncated or corrupt (the message names the file).
    """
    folder = data_dir()
    prefix = _FILE_PREFIX[split]
    images_path = _find(folder, f"{prefix}-images-idx3-ubyte")
    labels_path = _find(folder, f"{prefix}-labels-idx1-ubyte")
    stats = [p.stat() for p in (images_path, labels_path)]
    images, labels = _load_cached(images_path, labels_path,
                                  tuple((s.st_size, s.st_mtime_ns) for s in stats))
    log.debug("Fashion-MNIST %s: %d images from %s", split, len(labels), folder)
    return RawDataset("fashion-mnist", images, labels, CLASSES)


DATASETS.add(
    "fashion-mnist",
    DatasetInfo("fashion-mnist", "Fashion-MNIST: 28x28 grayscale clothing, 10 classes, 60k/10k", load),
    aliases=("fashion_mnist", "fmnist", "fashionmnist"),
)
