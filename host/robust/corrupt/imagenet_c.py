"""The 15 ImageNet-C corruptions x 5 severities, through the maintained ``imagecorruptions``.

We use the imaug fork (PyPI ``imagecorruptions-imaug``, same import name): the original 1.1.2
breaks on ``glass_blur`` and ``fog`` with NumPy 2 (``../shared/notes/robustness.md`` §B).
Its parameters are ImageNet-C's (224-px images); on 28-px Fashion-MNIST they are applied as they
are, which is *not* CIFAR-10-C (that has its own parameter table) — results say so.

Two details of how we call it:

* ``imagecorruptions.corrupt`` refuses images under 32 px; every corruption function itself runs
  at 28 px, so we call the package's ``corruption_dict[name]`` with exactly what ``corrupt`` would
  pass it (an RGB PIL image) and convert the result as ``corrupt`` does (``np.uint8``).
* Randomness: most corruptions draw from NumPy's global RNG, ``impulse_noise`` and ``glass_blur``
  (numba) take a ``seed``. Each image gets its own seed derived from (seed, corruption, severity,
  position in the test split), so a pixel never depends on which other images were selected.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from aiot.core.errors import MissingDependency, UnknownName, UsageError
from aiot.core.fileio import atomic_path
from aiot.core.paths import cache_dir

log = logging.getLogger(__name__)

#: ImageNet-C's 15 benchmark corruptions, in the paper's order (noise, blur, weather, digital).
CORRUPTIONS = ("gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur",
               "motion_blur", "zoom_blur", "snow", "frost", "fog", "brightness", "contrast",
               "elastic_transform", "pixelate", "jpeg_compression")
SEVERITIES = (1, 2, 3, 4, 5)
#: The distribution whose numerics we pin (results are only comparable within one library).
LIBRARY = "imagecorruptions-imaug"
# Corruptions that take a seed argument instead of (only) the global NumPy RNG.
_SEEDED_BY_ARGUMENT = ("impulse_noise", "glass_blur")
# Bump when the way pixels are produced changes, so stale cached sets are not reused.
_CACHE_SCHEME = 1
# Pillow's convert("L"): ITU-R 601-2 luma in 16-bit fixed point (the weights sum to 65536).
_LUMA_FIXED = np.array([19595, 38470, 7471], dtype=np.uint32)


def parse_corruptions(value: str | None) -> list[str]:
    """Corruption names from ``all`` (or None) or a comma list, in ImageNet-C order.

    Raises:
        UnknownName: a name that is not one of the 15 (with close matches).
        UsageError: an empty list.
    """
    if value is None or value.strip().lower() == "all":
        return list(CORRUPTIONS)
    names = [part.strip().lower().replace("-", "_") for part in value.split(",") if part.strip()]
    if not names:
        raise UsageError("--corruptions got no name",
                         f"use all or some of: {', '.join(CORRUPTIONS)}")
    for name in names:
        if name not in CORRUPTIONS:
            raise UnknownName("corruption", name, CORRUPTIONS)
    return [name for name in CORRUPTIONS if name in names]


def parse_severities(value: str | None) -> list[int]:
    """Severities from a comma list of integers in 1..5 (None: all five), sorted.

    Raises:
        UsageError: a value that is not an integer in 1..5, or an empty list.
    """
    if value is None:
        return list(SEVERITIES)
    parts = [part.strip() for part in value.split(",") if part.strip()]
    if not parts:
        raise UsageError("--severities got no value", "use integers 1..5, e.g. 1,3,5")
    levels = set()
    for part in parts:
        if not part.isdigit() or int(part) not in SEVERITIES:
            raise UsageError(f"severity '{part}' is not an integer in 1..5",
                             "use e.g. --severities 1,3,5")
        levels.add(int(part))
    return sorted(levels)


def library_version() -> str:
    """Version of the corruption package (the numerics every result depends on)."""
    from importlib.metadata import PackageNotFoundError, version

    for dist in (LIBRARY, "imagecorruptions"):
        try:
            return f"{dist} {version(dist)}"
        except PackageNotFoundError:
            continue
    return "unknown"


def _corruption_function(name: str):
    try:
        from imagecorruptions import corruption_dict
    except ImportError:
        raise MissingDependency(
            "imagecorruptions (the ImageNet-C corruptions)", "robust",
            hint="run: pip install --no-deps imagecorruptions-imaug==1.1.5 numba scikit-image "
                 "opencv-python-headless (scripts/bootstrap.sh does it)") from None
    return corruption_dict[name]


def gray_to_rgb(image: np.ndarray) -> np.ndarray:
    """uint8 ``(H, W)`` -> ``(H, W, 3)`` with R = G = B."""
    return np.repeat(image[..., None], 3, axis=-1)


def rgb_to_gray(image: np.ndarray) -> np.ndarray:
    """uint8 ``(..., 3)`` -> ``(...)`` by luminance, exactly as Pillow's ``convert("L")``.

    The fixed-point weights sum to 2**16, so a gray image (R = G = B) comes back unchanged.
    """
    luma = image.astype(np.uint32) @ _LUMA_FIXED
    return ((luma + 0x8000) >> 16).astype(np.uint8)


def image_seed(seed: int, corruption: str, severity: int, index: int) -> int:
    """The 32-bit seed of one image's corruption (independent of the other images chosen)."""
    entropy = [int(seed) & 0xFFFFFFFF, CORRUPTIONS.index(corruption), int(severity), int(index)]
    return int(np.random.SeedSequence(entropy).generate_state(1)[0])


@contextmanager
def _global_rng_restored():
    """Seeding the package's global RNG must not change anyone else's random stream."""
    state = np.random.get_state()
    try:
        yield
    finally:
        np.random.set_state(state)


def corrupt_image(image: np.ndarray, corruption: str, severity: int, seed: int) -> np.ndarray:
    """One uint8 image (gray ``(H, W)`` or RGB ``(H, W, 3)``) corrupted, same shape and dtype.

    Gray images go through the package as RGB (gray replicated) and come back by luminance.
    """
    with _global_rng_restored():
        return _corrupt(image, _corruption_function(corruption), corruption, severity, seed)


def _corrupt(image: np.ndarray, function, corruption: str, severity: int, seed: int) -> np.ndarray:
    """``corrupt_image`` without saving the global RNG (saved once per batch: that is slow)."""
    from PIL import Image

    gray = image.ndim == 2
    rgb = gray_to_rgb(image) if gray else np.ascontiguousarray(image)
    kwargs = {"seed": seed} if corruption in _SEEDED_BY_ARGUMENT else {}
    np.random.seed(seed)
    out = np.uint8(function(Image.fromarray(rgb), severity, **kwargs))
    return rgb_to_gray(out) if gray else out


def corrupt_images(images: np.ndarray, corruption: str, severity: int, seed: int,
                   indices: Sequence[int]) -> np.ndarray:
    """A batch corrupted image by image; ``indices`` (positions in the split) seed each image."""
    if corruption not in CORRUPTIONS:
        raise UnknownName("corruption", corruption, CORRUPTIONS)
    if severity not in SEVERITIES:
        raise UsageError(f"severity {severity} is not in 1..5")
    function = _corruption_function(corruption)
    out = np.empty_like(images)
    with _global_rng_restored():
        for i, (image, index) in enumerate(zip(images, indices, strict=True)):
            out[i] = _corrupt(image, function, corruption, severity,
                              image_seed(seed, corruption, severity, index))
    return out


def cache_path(eval_set, corruption: str, severity: int, seed: int) -> Path:
    """Where one corrupted image set is cached: keyed by the images, seed and library version."""
    digest = hashlib.sha256()
    parts = (_CACHE_SCHEME, library_version(), eval_set.name, corruption, severity, seed)
    for part in parts:
        digest.update(str(part).encode() + b"\0")
    digest.update(np.ascontiguousarray(eval_set.indices, dtype=np.int64).tobytes())
    digest.update(np.ascontiguousarray(eval_set.images).tobytes())
    name = f"{corruption}-s{severity}-{digest.hexdigest()[:20]}.npy"
    return cache_dir() / "robust-corrupt" / name


def corrupted_set(eval_set, corruption: str, severity: int, seed: int) -> np.ndarray:
    """``eval_set``'s images under one corruption and severity (from the cache, else computed).

    The cache file is written atomically (temp file + rename), so an interrupted run never
    leaves a half-written set behind.
    """
    path = cache_path(eval_set, corruption, severity, seed)
    if path.is_file():
        try:
            cached = np.load(path, allow_pickle=False)
            if cached.shape == eval_set.images.shape and cached.dtype == np.uint8:
                return cached
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable cached set %s: %s", path, exc)
    images = corrupt_images(eval_set.images, corruption, severity, seed, eval_set.indices)
    with atomic_path(path) as tmp:
        np.save(tmp, images, allow_pickle=False)
    return images
