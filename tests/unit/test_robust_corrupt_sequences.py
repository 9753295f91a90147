"""Perturbation sequences for the flip probability: clean first frame, smooth seeded steps."""

import numpy as np
import pytest

from aiot.core.errors import UnknownName, UsageError
from aiot.host.robust.corrupt.sequences import PERTURBATIONS, parameters, sequence, sequences

pytest.importorskip("scipy")

GRAY = np.random.default_rng(0).integers(0, 256, (28, 28), dtype=np.uint8)
RGB = np.random.default_rng(1).integers(0, 256, (20, 24, 3), dtype=np.uint8)


@pytest.mark.parametrize("name", list(PERTURBATIONS))
def test_frame_zero_is_the_clean_image_and_shapes_hold(name):
    for image in (GRAY, RGB):
        frames = sequence(image, name, 5, seed=0, index=3)
        assert frames.dtype == np.uint8 and frames.shape == (5, *image.shape)
        assert np.array_equal(frames[0], image)
        assert not np.array_equal(frames[-1], image)


def test_parameters_rise_linearly_to_the_maximum():
    assert np.allclose(parameters("brightness", 4), [0.0, 0.1, 0.2, 0.3])
    assert np.allclose(parameters("rotate", 2), [0.0, 15.0])


def test_noise_evolves_smoothly_each_pixel_moves_one_way():
    moved = sequence(GRAY, "gaussian_noise", 8, seed=0, index=0).astype(int) - GRAY
    # the same noise field scaled up: a pixel only moves further, never turns back
    assert np.all(np.abs(moved[1:]) >= np.abs(moved[:-1])) and np.all(moved * moved[-1] >= 0)


def test_brightness_frames_add_equal_steps():
    image = np.full((4, 4), 50, np.uint8)
    frames = sequence(image, "brightness", 4, seed=0, index=0)
    for k, frame in enumerate(frames):  # + 0.1 per frame = 25.5 levels, rounded
        assert np.all(np.abs(frame - (50 + 25.5 * k)) <= 0.5)


def test_sequences_are_seeded_per_image():
    images = np.stack([GRAY, GRAY])
    first = sequences(images, "speckle_noise", 3, seed=4, indices=[0, 1])
    assert np.array_equal(first, sequences(images, "speckle_noise", 3, seed=4, indices=[0, 1]))
    assert not np.array_equal(first[0], first[1])  # another index, another noise field
    alone = sequences(images[1:], "speckle_noise", 3, seed=4, indices=[1])
    assert np.array_equal(first[1], alone[0])


def test_bad_frames_and_names():
    with pytest.raises(UsageError, match="at least 2"):
        sequence(GRAY, "rotate", 1, seed=0, index=0)
    with pytest.raises(UnknownName):
        sequence(GRAY, "rotation", 3, seed=0, index=0)
