"""SysNoise building blocks: decoders, resizers, NV12, model variants and the scoring arithmetic."""

import math

import numpy as np
import pytest

from aiot.host.robust.sysnoise import camera, colour, decoders, resize, scoring, variants
from aiot.host.robust.sysnoise.suite import parse_types


def _gray_jpeg(seed: int = 0, side: int = 64) -> bytes:
    rng = np.random.default_rng(seed)
    smooth = rng.integers(0, 256, (side // 8, side // 8), dtype=np.uint8).repeat(8, 0).repeat(8, 1)
    return camera.encode_jpeg(smooth)


# --- decoders --------------------------------------------------------------------------------


def test_pillow_against_itself_is_zero_difference():
    probe = [decoders.probe_jpeg()]
    first = decoders.decode_all("pillow", probe, gray=False)
    diff = scoring.pixel_diff(first, decoders.decode_all("pillow", probe, gray=False))
    assert (diff.max_abs, diff.changed, diff.mean_abs, diff.identical) == (0, 0.0, 0.0, True)


def test_opencv_decodes_bit_identically_to_pillow():
    pytest.importorskip("cv2")
    for jpegs, gray in (([decoders.probe_jpeg()], False), ([_gray_jpeg(1), _gray_jpeg(2)], True)):
        reference = decoders.decode_all("pillow", jpegs, gray)
        assert scoring.pixel_diff(reference, decoders.decode_all("opencv", jpegs, gray)).identical


def test_pyav_differs_on_a_chroma_subsampled_rgb_jpeg():
    pytest.importorskip("av")
    probe = [decoders.probe_jpeg()]
    reference = decoders.decode_all("pillow", probe, gray=False)
    pyav = decoders.decode_all("pyav", probe, gray=False)
    assert pyav[0].shape == reference[0].shape == (64, 96, 3)
    diff = scoring.pixel_diff(reference, pyav)
    assert diff.max_abs > 10 and diff.changed > 0.5  # FFmpeg upsamples the chroma differently


def test_gray_jpeg_decodes_to_two_dimensions_with_every_available_decoder():
    jpegs = [_gray_jpeg()]
    for name in decoders.DECODERS:
        if decoders.unavailable(name) is None:
            assert decoders.decode_all(name, jpegs, gray=True)[0].shape == (64, 64), name


def test_missing_package_is_a_reason_not_a_crash(monkeypatch):
    fake = decoders.Decoder("fake", "fake-decoder", "a decoder that is not installed", lambda d, g: None)
    monkeypatch.setitem(decoders.DECODERS, "fake", fake)
    monkeypatch.setitem(decoders._MODULES, "fake-decoder", "aiot_no_such_module")
    reason = decoders.unavailable("fake")
    assert reason.startswith("fake-decoder is not installed") and "pip install fake-decoder" in reason
    assert decoders.unavailable("pillow") is None


# --- resize ----------------------------------------------------------------------------------


def test_scaled_size_and_direction():
    assert resize.scaled_size((64, 64), (28, 28)) == (28, 28)
    assert resize.scaled_size((300, 451), (224, 224), crop=0.875) == (256, 385)  # 224 / 0.875
    assert resize.scaled_size((21, 21), (28, 28)) == (28, 28)
    assert [resize.direction(s, (28, 28)) for s in ((64, 64), (21, 21), (28, 28))] == ["down", "up", "none"]


def test_resize_to_the_same_size_is_the_identity():
    image = np.random.default_rng(0).integers(0, 256, (28, 28), dtype=np.uint8)
    for method in resize.RESIZERS:
        assert np.array_equal(resize.resize_to(image, (28, 28), method), image), method


def test_reference_resize_is_the_toolkits_preprocessing():
    from aiot.models.datasets.preprocess import resize_images

    image = np.random.default_rng(1).integers(0, 256, (64, 64), dtype=np.uint8)
    ours = resize.resize_to(image, (28, 28), resize.REFERENCE)
    assert np.array_equal(ours, resize_images(image[None], (28, 28))[0])


def test_opencv_linear_downscale_is_not_antialiased_like_pillow():
    pytest.importorskip("cv2")
    stripes = np.tile(np.array([0, 255], np.uint8), (48, 24))  # 1 px stripes, shrunk 3x
    pil = resize.resize_to(stripes, (16, 16), "pil-bilinear")
    cv = resize.resize_to(stripes, (16, 16), "cv2-linear")
    assert np.ptp(pil) < 32  # Pillow widens its filter by the scale: near-uniform grey
    assert cv[0].tolist() == [255, 0] * 8  # OpenCV samples single stripes: full-contrast aliasing


def test_a_wide_image_keeps_its_centre():
    image = np.arange(4 * 6, dtype=np.uint8).reshape(4, 6)
    assert resize.centre_crop(image, (4, 4)).tolist() == [row[1:5] for row in image.tolist()]
    wide = np.zeros((40, 60), np.uint8)
    wide[:, 10:50] = 255  # white except 10 px at each side
    assert resize.scaled_size(wide.shape, (32, 32)) == (32, 48)
    assert resize.resize_to(wide, (32, 32), "pil-nearest").min() == 255  # the dark sides are cropped


# --- colour ----------------------------------------------------------------------------------


def test_rgb_reference_is_unchanged():
    image = np.random.default_rng(0).integers(0, 256, (6, 6, 3), dtype=np.uint8)
    assert colour.round_trip(image, colour.REFERENCE) is image


def test_i420_to_nv12_interleaves_u_and_v():
    h, w = 2, 4
    y = np.arange(8, dtype=np.uint8)
    u, v = np.array([100, 101], np.uint8), np.array([200, 201], np.uint8)
    nv12 = colour.i420_to_nv12(np.concatenate([y, u, v]), h, w)
    assert nv12.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [100, 200, 101, 201]]


@pytest.mark.parametrize("method", ["nv12-opencv", "nv12-swscale"])
def test_nv12_round_trip_of_a_constant_colour_is_within_two_levels(method):
    pytest.importorskip("cv2" if method == "nv12-opencv" else "av")
    for rgb in ((120, 80, 200), (90, 160, 60)):
        image = np.full((16, 16, 3), rgb, np.uint8)
        assert np.abs(colour.round_trip(image, method).astype(int) - image).max() <= 2


def test_nv12_of_gray_and_odd_sizes_keeps_the_shape():
    pytest.importorskip("cv2")
    gray = np.full((27, 13), 77, np.uint8)
    out = colour.round_trip(gray, "nv12-opencv")
    assert out.shape == (27, 13) and np.abs(out.astype(int) - 77).max() <= 1


# --- camera ----------------------------------------------------------------------------------


def test_cameras_for_small_images_and_for_photos():
    down, up = camera.cameras([28, 28], (28, 28))
    assert (down.side, up.side) == (64, 21)
    down, up = camera.cameras([300, 512], (224, 224), crop=0.875)
    assert (down.side, up.side) == (None, 192)  # photos are larger than 256 already


def test_capture_and_encode():
    image = np.random.default_rng(0).integers(0, 256, (28, 28), dtype=np.uint8)
    captured = camera.Camera("down", 64).capture(image)
    assert captured.shape == (64, 64)
    decoded = decoders.decode_all("pillow", camera.capture_jpegs([image[..., None]], camera.Camera("down", 64)),
                                  gray=True)
    assert decoded[0].shape == (64, 64)


# --- variants --------------------------------------------------------------------------------


def test_ceil_mode_changes_a_3x3_stride_2_pool_on_16x16():
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.MaxPool2d(3, stride=2)).eval()
    example = torch.arange(256, dtype=torch.float32).reshape(1, 1, 16, 16)
    variant, changes = variants.ceil_mode_variant(model, example)
    assert changes == ["0: [7, 7] -> [8, 8]"]
    assert tuple(model(example).shape) == (1, 1, 7, 7) and tuple(variant(example).shape) == (1, 1, 8, 8)
    assert model[0].ceil_mode is False  # the original is untouched
    # The shared 7x7 windows agree; the extra column reads the partial window at the edge.
    assert torch.equal(variant(example)[..., :7, :7], model(example))
    assert variant(example)[0, 0, 0, 7].item() == 2 * 16 + 15


def test_ceil_mode_is_not_applicable_when_every_map_divides_evenly():
    torch = pytest.importorskip("torch")
    from aiot.models import get_model_spec

    model = get_model_spec("tiny_cnn").build()
    with pytest.raises(variants.NotApplicable, match="divides evenly"):
        variants.ceil_mode_variant(model, torch.zeros(1, 1, 28, 28))
    with pytest.raises(variants.NotApplicable, match="no max-pool"):
        variants.ceil_mode_variant(torch.nn.Sequential(torch.nn.ReLU()), torch.zeros(1, 1, 4, 4))


def test_upsample_variant_swaps_nearest_for_bilinear():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    model = torch.nn.Sequential(torch.nn.Upsample(scale_factor=2, mode="nearest")).eval()
    x = torch.arange(16, dtype=torch.float32).reshape(1, 1, 4, 4)
    variant, changes = variants.upsample_variant(model, x)
    assert changes == ["1 upsampling call(s) swapped per forward pass"]
    assert torch.equal(variant(x), F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False))
    assert torch.equal(model(x), F.interpolate(x, scale_factor=2, mode="nearest"))
    with pytest.raises(variants.NotApplicable, match="no nearest or bilinear"):
        variants.upsample_variant(torch.nn.Sequential(torch.nn.ReLU()), x)


# --- scoring ---------------------------------------------------------------------------------


def test_dacc_and_flip_on_a_hand_example():
    labels = np.array([0, 1, 2, 3])
    reference = np.array([0, 1, 2, 0])  # 3/4 right
    worse = np.array([0, 1, 1, 1])  # 2/4 right; differs from the reference on 2 of 4
    same = reference.copy()
    a = scoring.score("worse", reference, worse, labels)
    b = scoring.score("same", reference, same, labels)
    assert (a.accuracy, a.reference_accuracy, a.dacc, a.flip) == (0.5, 0.75, 0.25, 0.5)
    assert (b.dacc, b.flip, b.sni) == (0.0, 0.0, 0.0)
    assert a.sni == pytest.approx(1 / 3)
    summary = scoring.summarize([a, b, scoring.skipped("gone", "unavailable: not installed")])
    assert summary == pytest.approx({"options": 2, "flip_mean": 0.25, "flip_max": 0.5,
                                     "agreement_min": 0.5, "dacc_mean": 0.125, "dacc_max": 0.25})
    # SNI over {reference 0, 1/3, 0}: population std = sqrt(2/81).
    assert scoring.systematic_robustness([a, b]) == pytest.approx(math.sqrt(2 / 81))


def test_unlabelled_scores_have_flip_rate_only():
    result = scoring.score("x", np.array([1, 2, 3]), np.array([1, 2, 4]), None)
    assert (result.accuracy, result.dacc, result.sni) == (None, None, None)
    assert result.flip == pytest.approx(1 / 3)
    summary = scoring.summarize([result])
    assert "dacc_mean" not in summary and summary["agreement_min"] == pytest.approx(2 / 3)
    assert scoring.systematic_robustness([result]) is None


def test_max_logit_difference():
    ref = np.array([[1.0, 2.0], [0.5, 0.0]], np.float32)
    opt = np.array([[1.0, 2.5], [0.5, -0.25]], np.float32)
    row = scoring.score("fp16", ref.argmax(1), opt.argmax(1), None, reference_scores=ref, option_scores=opt)
    assert row.max_logit == pytest.approx(0.5) and row.flip == 0.0


def test_parse_types():
    assert parse_types(None) == ["decoder", "resize", "colour", "precision", "variants", "platform"]
    assert parse_types("platform, color,decoder") == ["decoder", "colour", "platform"]
    from aiot.core.errors import UnknownName

    with pytest.raises(UnknownName, match="unknown sysnoise type 'resise'") as info:
        parse_types("resise")
    assert "resize" in info.value.hint
