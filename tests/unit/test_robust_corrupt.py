"""ImageNet-C corruptions: names, severities, gray round trip, seeding, cache."""

import numpy as np
import pytest

from aiot.core.errors import UnknownName, UsageError
from aiot.host.robust.corrupt import imagenet_c
from aiot.host.robust.corrupt.imagenet_c import (
    CORRUPTIONS,
    corrupt_image,
    corrupt_images,
    corrupted_set,
    gray_to_rgb,
    parse_corruptions,
    parse_severities,
    rgb_to_gray,
)
from aiot.host.robust.data import EvalSet

pytest.importorskip("imagecorruptions")

# glass_blur JIT-compiles for ~3 s on its first call: the fast tests leave it out.
FAST = [name for name in CORRUPTIONS if name != "glass_blur"]


def _images(n=4, size=28, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, size, size), dtype=np.uint8)


def test_the_fifteen_imagenet_c_names_in_the_package_order():
    from imagecorruptions import get_corruption_names

    assert len(CORRUPTIONS) == 15 and list(CORRUPTIONS) == get_corruption_names("common")
    assert parse_corruptions("all") == parse_corruptions(None) == list(CORRUPTIONS)
    # paper order, each name once
    assert parse_corruptions(" fog, Gaussian-Noise ,fog") == ["gaussian_noise", "fog"]


def test_unknown_corruption_suggests_close_names():
    with pytest.raises(UnknownName) as err:
        parse_corruptions("fog,gausian_noise")
    assert err.value.message == "unknown corruption 'gausian_noise'"
    assert "gaussian_noise" in err.value.close
    with pytest.raises(UsageError, match="no name"):
        parse_corruptions(" , ")


def test_severities_are_integers_one_to_five():
    assert parse_severities(None) == [1, 2, 3, 4, 5]
    assert parse_severities("5, 1,3,1") == [1, 3, 5]
    for bad in ("0", "6", "1,x", "2.5", "-1", ","):
        with pytest.raises(UsageError):
            parse_severities(bad)


@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
def test_severity_s_is_the_packages_parameter_s(severity):
    # brightness on a gray image adds c_s = 0.1 s to the value (HSV V channel, saturation 0):
    # 100 gray levels + 25.5 s, truncated to uint8 as the package does (float error: +-1).
    image = np.full((28, 28), 100, np.uint8)
    out = corrupt_image(image, "brightness", severity, seed=0)
    assert np.all(np.abs(out.astype(int) - int(100 + 25.5 * severity)) <= 1)
    # contrast keeps the mean and scales the distance to it by c_s = (.4, .3, .2, .1, .05)[s-1].
    image = np.zeros((28, 28), np.uint8)
    image[:, 14:] = 200
    out = corrupt_image(image, "contrast", severity, seed=0).astype(float)
    c = (0.4, 0.3, 0.2, 0.1, 0.05)[severity - 1]
    assert np.all(np.abs(out[:, :14] - (100 - 100 * c)) <= 1)
    assert np.all(np.abs(out[:, 14:] - (100 + 100 * c)) <= 1)


@pytest.mark.parametrize("name", FAST)
def test_every_corruption_keeps_uint8_and_shape(name):
    gray = _images(1)[0]
    rgb = np.random.default_rng(1).integers(0, 256, (32, 40, 3), dtype=np.uint8)
    for image in (gray, rgb):
        out = corrupt_image(image, name, 3, seed=7)
        assert out.dtype == np.uint8 and out.shape == image.shape
    assert not np.array_equal(corrupt_image(gray, name, 5, seed=7), gray)  # it did something


def test_gray_round_trip_of_an_unchanged_image_is_exact():
    levels = np.arange(256, dtype=np.uint8).reshape(16, 16)
    assert np.array_equal(rgb_to_gray(gray_to_rgb(levels)), levels)


def test_rgb_to_gray_is_pillows_luminance():
    from PIL import Image

    rgb = np.random.default_rng(2).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    assert np.array_equal(rgb_to_gray(rgb), np.asarray(Image.fromarray(rgb).convert("L")))


@pytest.mark.parametrize("name", ["gaussian_noise", "impulse_noise", "motion_blur", "frost",
                                  "elastic_transform"])
def test_same_seed_same_pixels_and_other_seed_other_pixels(name):
    images = _images(3)
    first = corrupt_images(images, name, 3, seed=5, indices=[10, 11, 12])
    assert np.array_equal(first, corrupt_images(images, name, 3, seed=5, indices=[10, 11, 12]))
    assert not np.array_equal(first, corrupt_images(images, name, 3, seed=6, indices=[10, 11, 12]))


def test_an_images_pixels_do_not_depend_on_the_other_images_chosen():
    images = _images(3)
    together = corrupt_images(images, "shot_noise", 2, seed=0, indices=[4, 8, 15])
    alone = corrupt_images(images[2:], "shot_noise", 2, seed=0, indices=[15])
    assert np.array_equal(together[2], alone[0])


def test_the_global_numpy_rng_is_left_as_it_was():
    np.random.seed(123)
    expected = np.random.rand(3)
    np.random.seed(123)
    corrupt_images(_images(2), "gaussian_noise", 1, seed=0, indices=[0, 1])
    assert np.array_equal(np.random.rand(3), expected)


@pytest.mark.slow
def test_glass_blur_is_seeded_through_its_seed_argument():
    images = _images(2)
    first = corrupt_images(images, "glass_blur", 2, seed=3, indices=[0, 1])
    assert first.dtype == np.uint8 and first.shape == images.shape
    assert np.array_equal(first, corrupt_images(images, "glass_blur", 2, seed=3, indices=[0, 1]))


def test_corrupted_sets_are_cached_atomically_per_set(monkeypatch):
    data = EvalSet("synthetic", _images(3), np.zeros(3, np.int64), np.array([0, 1, 2]))
    path = imagenet_c.cache_path(data, "contrast", 2, 0)
    first = corrupted_set(data, "contrast", 2, 0)
    assert path.is_file() and not list(path.parent.glob(".*part*"))
    assert np.array_equal(np.load(path), first)

    def no_recompute(*args, **kwargs):
        raise AssertionError("a cached set was recomputed")

    monkeypatch.setattr(imagenet_c, "corrupt_images", no_recompute)
    assert np.array_equal(corrupted_set(data, "contrast", 2, 0), first)
    # another seed, severity or image set is another file
    other = EvalSet("synthetic", _images(3, seed=9), data.labels, data.indices)
    keys = {imagenet_c.cache_path(d, "contrast", s, seed)
            for d, s, seed in ((data, 2, 0), (data, 3, 0), (data, 2, 1), (other, 2, 0))}
    assert len(keys) == 4


def test_library_version_names_the_pinned_fork():
    assert imagenet_c.library_version().startswith("imagecorruptions")
