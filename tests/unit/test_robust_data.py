"""Evaluation sets of the robustness suites: labelled splits and the unlabelled sample photos."""

import sys

import numpy as np
import pytest

from aiot.core.errors import MissingDependency, UnknownName, UsageError
from aiot.host.robust import data
from aiot.host.robust.data import EvalSet, eval_set, model_input, photo_set
from aiot.models import get_model_spec
from aiot.models.datasets import preprocess

LITE0 = get_model_spec("efficientnet_lite0")  # 224 px RGB, (x - 127) / 128: no package needed


@pytest.fixture(scope="module")
def photos():
    pytest.importorskip("skimage")
    pytest.importorskip("sklearn")
    return photo_set()


def test_photo_set_loads_real_photos_offline_without_labels(photos):
    assert len(photos) >= 6 and photos.labels is None and not photos.labelled and photos.ragged
    assert {"astronaut", "chelsea", "coffee", "rocket", "china", "flower"} <= set(photos.names)
    assert all(im.dtype == np.uint8 and im.ndim == 3 and im.shape[2] == 3 for im in photos.images)
    assert len({im.shape for im in photos.images}) > 1  # really of different sizes
    coffee = photos.images[photos.names.index("coffee")]
    assert coffee.shape == (400, 600, 3) and not coffee.flags.writeable  # shared, read-only


def test_photo_subsets_are_seeded_and_named(photos):
    a, b = photo_set(3, seed=1), eval_set("Photos", 3, seed=1)
    assert a.names == b.names and len(a) == 3 and list(a.indices) == sorted(a.indices)
    for i, name in zip(a.indices, a.names, strict=True):
        assert photos.names[i] == name
        assert a.images[list(a.names).index(name)] is photos.images[i]


def test_describe_lists_each_shape_of_a_ragged_set(photos):
    facts = photos.describe()
    assert facts["dataset"] == "photos" and facts["n"] == len(photos) and facts["labelled"] is False
    assert facts["image_shape"] is None and facts["names"] == list(photos.names)
    assert facts["image_shapes"][photos.names.index("chelsea")] == [300, 451, 3]


def test_describe_of_an_array_set_is_unchanged():
    images = np.zeros((4, 28, 28), np.uint8)
    facts = EvalSet("digits", images, np.arange(4), np.arange(4)).describe()
    assert facts == {"dataset": "digits", "n": 4, "image_shape": [28, 28], "labelled": True,
                     "indices_head": [0, 1, 2, 3]}


def test_model_input_of_a_ragged_list_is_each_image_preprocessed(photos):
    images = photos.images[:4]
    x = model_input(images, LITE0)
    assert x.shape == (4, 3, 224, 224) and x.dtype == np.float32
    for row, image in zip(x, images, strict=True):
        np.testing.assert_array_equal(row, preprocess(image[None], LITE0.input)[0])


def test_model_input_of_constant_images_of_any_size():
    gray = [np.full((30, 50, 3), 127, np.uint8), np.full((300, 200, 3), 255, np.uint8)]
    x = model_input(gray, LITE0)  # (x - 127) / 128: 127 -> 0, 255 -> 1
    assert x.shape == (2, 3, 224, 224)
    np.testing.assert_allclose(x[0], 0.0, atol=1e-6)
    np.testing.assert_allclose(x[1], 1.0, atol=1e-6)


def test_model_input_of_an_array_is_the_batch_preprocessing():
    images = np.random.default_rng(0).integers(0, 256, (3, 28, 28), dtype=np.uint8)
    spec = get_model_spec("tiny_cnn")
    np.testing.assert_array_equal(model_input(images, spec), preprocess(images, spec.input))
    with pytest.raises(UsageError, match="at least one image"):
        model_input([], spec)


def test_labelled_sets_keep_their_labels():
    pytest.importorskip("sklearn")
    digits = eval_set("digits", 20, seed=0)
    assert digits.labelled and not digits.ragged and digits.images.shape == (20, 8, 8)
    assert sorted(np.bincount(digits.labels).tolist()) == [2] * 10  # class-balanced


def test_unknown_dataset_suggests_photos():
    with pytest.raises(UnknownName, match="unknown dataset 'photo'") as info:
        eval_set("photo", 3)
    assert info.value.close == ["photos"]


def test_photos_without_scikit_image_is_a_missing_dependency(monkeypatch):
    data._load_photos.cache_clear()
    monkeypatch.setitem(sys.modules, "skimage.data", None)
    with pytest.raises(MissingDependency, match="scikit-image") as info:
        photo_set()
    assert info.value.hint == "run: pip install 'aiot[robust]'"
    data._load_photos.cache_clear()
