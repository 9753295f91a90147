"""Datasets: IDX parsing, the registry, subsets, preprocessing, digits and image folders."""

from __future__ import annotations

import gzip
import importlib
import struct
import sys

import numpy as np
import pytest

from aiot.core.errors import AiotError, DatasetError, MissingDependency, UnknownName, UsageError
from aiot.models.datasets import (
    DATASETS,
    RawDataset,
    dataset_fingerprint,
    load_dataset,
    load_raw,
    preprocess,
    select_subset,
)

# The package exports the function `preprocess`, which shadows the submodule attribute.
pre = importlib.import_module("aiot.models.datasets.preprocess")
fmnist = importlib.import_module("aiot.models.datasets.fashion_mnist")

FMNIST_DIR = fmnist.DEFAULT_DIR
HAVE_FMNIST = (FMNIST_DIR / "t10k-images-idx3-ubyte.gz").is_file()


class Spec:
    """A stand-in for aiot.models.InputSpec (the fields preprocess reads)."""

    def __init__(self, shape, layout="NCHW", channel_order="GRAY", mean=(0.0,), std=(1.0,)):
        self.shape, self.layout, self.channel_order = shape, layout, channel_order
        self.mean, self.std = mean, std


GRAY28 = Spec((1, 28, 28), mean=(0.2860,), std=(0.3530,))


# --- IDX ----------------------------------------------------------------------------------

def idx_bytes(array: np.ndarray) -> bytes:
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(np.uint8).tobytes()


def write_fmnist(folder, n_train=40, n_test=20, seed=0):
    """Synthetic Fashion-MNIST files (gzip IDX) with labels 0..9."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        (folder / f"{prefix}-images-idx3-ubyte.gz").write_bytes(gzip.compress(idx_bytes(images)))
        (folder / f"{prefix}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_bytes(labels)))
    return folder


def test_idx_round_trip(tmp_path):
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    path = tmp_path / "a-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(idx_bytes(array)))
    np.testing.assert_array_equal(fmnist.read_idx(path, ndim=3), array)
    plain = tmp_path / "b-idx3-ubyte"
    plain.write_bytes(idx_bytes(array))
    np.testing.assert_array_equal(fmnist.read_idx(plain), array)


@pytest.mark.parametrize("damage", ["truncated_data", "trailing", "bad_magic", "wrong_ndim", "cut_gzip", "not_gzip"])
def test_corrupt_idx_names_the_file(tmp_path, damage):
    blob = idx_bytes(np.zeros((3, 28, 28), dtype=np.uint8))
    payload = {
        "truncated_data": blob[:-10],
        "trailing": blob + b"xx",
        "bad_magic": b"\x12\x34" + blob[2:],
        "wrong_ndim": idx_bytes(np.zeros(5, dtype=np.uint8)),
    }.get(damage, blob)
    data = gzip.compress(payload)
    if damage == "cut_gzip":
        data = data[: len(data) // 2]
    if damage == "not_gzip":
        data = b"this is not gzip at all"
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes(data)
    with pytest.raises(DatasetError) as info:
        fmnist.read_idx(path, ndim=3)
    assert str(path) in info.value.message


def test_fashion_mnist_from_env_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(fmnist.ENV_DIR, str(write_fmnist(tmp_path / "fm")))
    raw = load_raw("fmnist", "train")
    assert raw.name == "fashion-mnist" and raw.images.shape == (40, 28, 28) and raw.images.dtype == np.uint8
    assert raw.labels.dtype == np.int64 and raw.labels.tolist()[:3] == [0, 1, 2]
    assert raw.classes[0] == "T-shirt/top" and raw.num_classes == 10 and raw.is_gray
    assert not raw.images.flags.writeable  # shared through the in-process cache
    assert len(load_raw("fashion_mnist", "test")) == 20


def test_fashion_mnist_label_count_mismatch(tmp_path, monkeypatch):
    folder = write_fmnist(tmp_path / "fm")
    labels = folder / "t10k-labels-idx1-ubyte.gz"
    labels.write_bytes(gzip.compress(idx_bytes(np.zeros(7, dtype=np.uint8))))
    monkeypatch.setenv(fmnist.ENV_DIR, str(folder))
    with pytest.raises(DatasetError, match="t10k-labels-idx1-ubyte"):
        load_raw("fashion-mnist", "test")


def test_fashion_mnist_missing_gives_install_hint(tmp_path, monkeypatch):
    monkeypatch.setenv(fmnist.ENV_DIR, str(tmp_path / "nowhere"))
    with pytest.raises(DatasetError) as info:
        load_raw("fashion-mnist")
    assert "apt-get install dataset-fashion-mnist" in info.value.hint
    assert fmnist.ENV_DIR in info.value.hint


@pytest.mark.skipif(not HAVE_FMNIST, reason="dataset-fashion-mnist is not installed")
def test_real_fashion_mnist_test_subset(monkeypatch):
    monkeypatch.delenv(fmnist.ENV_DIR, raising=False)
    raw = load_raw("fashion-mnist", "test")
    assert raw.images.shape == (10_000, 28, 28) and np.bincount(raw.labels).tolist() == [1000] * 10
    x, y = load_dataset("fashion-mnist", GRAY28, split="test", limit=300, seed=0)
    assert x.shape == (300, 1, 28, 28) and x.dtype == np.float32 and y.dtype == np.int64
    assert np.bincount(y).tolist() == [30] * 10
    x2, y2 = load_dataset("fmnist", GRAY28, split="test", limit=300, seed=0)
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)


# --- registry, splits, subsets, fingerprints -----------------------------------------------

def test_registry_names_and_unknown_name():
    assert DATASETS.names()[:2] == ["fashion-mnist", "digits"]
    assert DATASETS.canonical("FMNIST") == "fashion-mnist"
    with pytest.raises(UnknownName) as info:
        load_raw("fashion-mnst")
    assert isinstance(info.value, AiotError) and "fashion-mnist" in info.value.close
    with pytest.raises(UnknownName):
        load_dataset("cifar-1000", GRAY28)


def test_bad_split_and_limit():
    with pytest.raises(UsageError, match="split"):
        load_raw("digits", "validation")
    with pytest.raises(UsageError, match="limit"):
        select_subset(np.zeros(5, dtype=np.int64), 0)


def test_subset_is_balanced_deterministic_and_nested():
    labels = np.repeat(np.arange(4), [50, 30, 10, 2]).astype(np.int64)
    a = select_subset(labels, 20, seed=1)
    assert len(a) == 20 and np.all(np.diff(a) > 0)
    # Each class gets an equal share while it has items; the small class gives all it has.
    assert np.bincount(labels[a], minlength=4).tolist() == [6, 6, 6, 2]
    np.testing.assert_array_equal(a, select_subset(labels, 20, seed=1))
    assert not np.array_equal(a, select_subset(labels, 20, seed=2))
    assert set(select_subset(labels, 10, seed=1)) <= set(a)
    np.testing.assert_array_equal(select_subset(labels, 1000), np.arange(92))
    np.testing.assert_array_equal(select_subset(labels, None), np.arange(92))


def test_fingerprint():
    base = dataset_fingerprint("digits", "test", 100, 0)
    assert len(base) == 16 and base == dataset_fingerprint("sklearn-digits", "test", 100, 0)
    others = {dataset_fingerprint("digits", "train", 100, 0), dataset_fingerprint("digits", "test", 50, 0),
              dataset_fingerprint("digits", "test", 100, 1), dataset_fingerprint("fashion-mnist", "test", 100, 0)}
    assert base not in others and len(others) == 4
    # Without a limit the seed selects nothing, so it does not count.
    assert dataset_fingerprint("digits", "test", None, 0) == dataset_fingerprint("digits", "test", None, 7)


def test_raw_dataset_validates():
    with pytest.raises(ValueError):
        RawDataset("x", np.zeros((2, 4, 4), dtype=np.float32), np.zeros(2, dtype=np.int64), ("a",))
    with pytest.raises(ValueError):
        RawDataset("x", np.zeros((2, 4, 4), dtype=np.uint8), np.array([0, 3]), ("a", "b"))


# --- preprocessing -------------------------------------------------------------------------

def test_normalisation_of_a_hand_computed_pixel():
    images = np.zeros((1, 2, 2), dtype=np.uint8)
    images[0, 0, 1] = 200
    x = preprocess(images, Spec((1, 2, 2), mean=(0.5,), std=(0.25,)))
    assert x.shape == (1, 1, 2, 2) and x.dtype == np.float32
    assert x[0, 0, 0, 1] == pytest.approx((200 / 255 - 0.5) / 0.25, abs=1e-6)  # 1.1372549
    assert x[0, 0, 0, 0] == pytest.approx(-2.0, abs=1e-6)


def test_normalisation_matches_input_spec_normalize():
    torch = pytest.importorskip("torch")
    from aiot.models import InputSpec

    spec = InputSpec((3, 5, 6), "NCHW", "RGB", (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    images = np.random.default_rng(0).integers(0, 256, (4, 5, 6, 3), dtype=np.uint8)
    expected = spec.normalize(torch.from_numpy(images).permute(0, 3, 1, 2)).numpy()
    np.testing.assert_array_equal(preprocess(images, spec), expected)


def test_channel_conversions_and_layout():
    rgb = np.zeros((1, 2, 2, 3), dtype=np.uint8)
    rgb[..., 0], rgb[..., 1], rgb[..., 2] = 10, 20, 30
    bgr = preprocess(rgb, Spec((3, 2, 2), channel_order="BGR", mean=(0.0,), std=(1 / 255,)))
    assert bgr[0, :, 0, 0].tolist() == pytest.approx([30, 20, 10])
    gray = preprocess(rgb, Spec((1, 2, 2), mean=(0.0,), std=(1 / 255,)))
    assert gray[0, 0, 0, 0] == pytest.approx(0.299 * 10 + 0.587 * 20 + 0.114 * 30, rel=1e-5)
    g = np.full((2, 3, 3), 51, dtype=np.uint8)
    nhwc = preprocess(g, Spec((3, 3, 3), layout="NHWC", channel_order="RGB", mean=(0.1, 0.2, 0.3), std=(1.0,)))
    assert nhwc.shape == (2, 3, 3, 3)
    assert nhwc[1, 2, 2].tolist() == pytest.approx([0.1, 0.0, -0.1], abs=1e-6)  # 51/255 = 0.2
    assert preprocess(g[..., None], Spec((1, 3, 3))).shape == (2, 1, 3, 3)


def test_no_resize_path_does_not_touch_pillow(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)  # any `import PIL...` now fails
    pre._have_pillow.cache_clear()
    try:
        x = preprocess(np.zeros((3, 28, 28), dtype=np.uint8), GRAY28)
        assert x.shape == (3, 1, 28, 28)
        # Resizing still works without Pillow, through the numpy filter.
        assert preprocess(np.zeros((3, 8, 8), dtype=np.uint8), GRAY28).shape == (3, 1, 28, 28)
        assert pre._have_pillow() is False
    finally:
        pre._have_pillow.cache_clear()


def test_resize_crops_the_centre():
    pytest.importorskip("PIL")
    images = np.zeros((1, 10, 30), dtype=np.uint8)
    images[:, :, 10:20] = 255  # white centre square, black side bands cropped away
    for use_pillow in (True, False):
        out = pre.resize_images(images, (5, 5), use_pillow=use_pillow)
        assert out.shape == (1, 5, 5) and (out == 255).all()
    assert pre.crop_box((10, 30), (5, 5)) == (10, 0, 20, 10)
    assert pre.crop_box((40, 20), (10, 20)) == (0, 15, 20, 25)


@pytest.mark.parametrize("shape,size", [((3, 8, 8), (28, 28)), ((2, 60, 45, 3), (32, 32)),
                                        ((2, 100, 60), (28, 28)), ((2, 31, 47, 3), (16, 24))])
def test_numpy_resize_matches_pillow(shape, size):
    pytest.importorskip("PIL")
    images = np.random.default_rng(3).integers(0, 256, shape, dtype=np.uint8)
    with_pillow = pre.resize_images(images, size, use_pillow=True)
    with_numpy = pre.resize_images(images, size, use_pillow=False)
    assert with_pillow.shape == with_numpy.shape == (shape[0], *size, *shape[3:])
    # Same filter and fixed-point rounding; Pillow >= 13 may order the passes differently.
    assert np.abs(with_pillow.astype(int) - with_numpy).max() <= 1


def test_preprocess_rejects_bad_arrays():
    with pytest.raises(UsageError):
        preprocess(np.zeros((2, 4, 4), dtype=np.float32), GRAY28)
    with pytest.raises(UsageError):
        preprocess(np.zeros((4, 4), dtype=np.uint8), GRAY28)


# --- digits ---------------------------------------------------------------------------------

def test_digits_split():
    pytest.importorskip("sklearn")
    train, test = load_raw("digits", "train"), load_raw("digits", "test")
    assert len(train) + len(test) == 1797 and 340 <= len(test) <= 380
    assert train.images.shape[1:] == (8, 8) and train.images.dtype == np.uint8
    assert train.images.max() == 255 and test.classes == tuple("0123456789")
    assert np.bincount(test.labels).min() >= 30  # stratified
    np.testing.assert_array_equal(load_raw("digits", "test").labels, test.labels)
    x, y = load_dataset("digits", GRAY28, "test", limit=50)
    assert x.shape == (50, 1, 28, 28) and np.bincount(y).tolist() == [5] * 10


def test_digits_without_sklearn(monkeypatch):
    digits = importlib.import_module("aiot.models.datasets.digits")
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    digits._load_all.cache_clear()
    try:
        with pytest.raises(MissingDependency) as info:
            load_raw("digits")
        assert "scikit-learn" in info.value.message and "aiot[data]" in info.value.hint
    finally:
        digits._load_all.cache_clear()


# --- image folders -------------------------------------------------------------------------

def write_png(path, array):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def make_folder(root, per_class=15, rgb_class="cat"):
    """Classes cat (RGB, red), dog (gray, 200); a stray text file and hidden folder ignored."""
    for i in range(per_class):
        write_png(root / "cat" / f"c{i:02d}.png", np.tile(np.uint8([255, 0, 0]), (12, 12, 1)))
        write_png(root / "dog" / f"d{i:02d}.png", np.full((12, 12), 200, dtype=np.uint8))
    (root / "cat" / "notes.txt").write_text("not an image")
    (root / ".hidden").mkdir()
    return root


def test_image_folder_hash_split(tmp_path):
    pytest.importorskip("PIL")
    root = make_folder(tmp_path / "pets")
    train, test = load_raw(f"folder:{root}", "train"), load_raw(f"folder:{root}", "test")
    assert train.classes == ("cat", "dog") and len(train) + len(test) == 30
    assert 1 <= len(test) <= 15 and train.images.shape[1:] == (12, 12, 3)  # gray promoted to RGB
    cats = train.images[train.labels == 0]
    dogs = train.images[train.labels == 1]
    assert (cats[..., 0] == 255).all() and (cats[..., 1] == 0).all() and (dogs == 200).all()
    assert train.name == f"folder:{root.resolve()}"
    # Deterministic, and preprocessed straight to the model size.
    np.testing.assert_array_equal(load_raw(f"folder:{root}", "test").labels, test.labels)
    x, y = load_dataset(f"folder:{root}", Spec((3, 28, 28), channel_order="BGR"), "train", limit=6)
    assert x.shape == (6, 3, 28, 28) and np.bincount(y).tolist() == [3, 3]
    assert x[y == 0][:, 2].min() == pytest.approx(1.0) and x[y == 0][:, 0].max() == 0.0  # red is last in BGR


def test_image_folder_train_test_subfolders_and_sizes(tmp_path):
    pytest.importorskip("PIL")
    root = tmp_path / "data"
    write_png(root / "train" / "a" / "1.png", np.full((10, 10), 10, dtype=np.uint8))
    write_png(root / "train" / "a" / "2.png", np.full((10, 10), 20, dtype=np.uint8))
    write_png(root / "train" / "b" / "1.png", np.full((20, 40), 30, dtype=np.uint8))
    write_png(root / "test" / "b" / "1.png", np.full((10, 10), 40, dtype=np.uint8))
    train = load_raw(f"folder:{root}", "train")
    assert train.classes == ("a", "b") and train.labels.tolist() == [0, 0, 1]
    assert train.images.shape == (3, 10, 10) and train.images[2].tolist() == np.full((10, 10), 30).tolist()
    test = load_raw(f"folder:{root}", "test")
    assert test.classes == ("a", "b") and test.labels.tolist() == [1]


def test_image_folder_errors(tmp_path):
    pytest.importorskip("PIL")
    with pytest.raises(DatasetError, match="does not exist"):
        load_raw(f"folder:{tmp_path / 'missing'}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="no class sub-folders") as info:
        load_raw(f"folder:{tmp_path / 'empty'}")
    assert "one sub-folder per class" in info.value.hint
    (tmp_path / "empty" / "cls").mkdir()
    with pytest.raises(DatasetError, match="no class sub-folders"):
        load_raw(f"folder:{tmp_path / 'empty'}", "train")
    with pytest.raises(UsageError):
        load_raw("folder:")


def test_image_folder_unreadable_image_is_named(tmp_path):
    pytest.importorskip("PIL")
    root = make_folder(tmp_path / "pets", per_class=6)
    bad = root / "dog" / "zz-broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 10)
    with pytest.raises(DatasetError) as info:
        for split in ("train", "test"):
            load_raw(f"folder:{root}", split)
    assert str(bad) in info.value.message


def test_image_folder_fingerprint_tracks_files(tmp_path):
    pytest.importorskip("PIL")
    root = make_folder(tmp_path / "pets", per_class=5)
    before = dataset_fingerprint(f"folder:{root}", "train", None, 0)
    assert before == dataset_fingerprint(f"folder:{root}/", "train", None, 0)
    write_png(root / "dog" / "new.png", np.zeros((12, 12), dtype=np.uint8))
    assert dataset_fingerprint(f"folder:{root}", "train", None, 0) != before
