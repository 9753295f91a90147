"""Unlabelled photos in the corruption suite: model-size RGB first, agreement with clean top-1."""

import numpy as np
import pytest

from aiot.core.errors import UsageError
from aiot.host.robust.corrupt import photos
from aiot.host.robust.corrupt.suite import (
    CorruptConfig,
    Evaluated,
    build_result,
    compare_target,
    evaluate,
)
from aiot.host.robust.data import EvalSet
from aiot.host.robust.target import Target

pytest.importorskip("torch")


def _constant(label: int, name: str):
    """A predictor that answers ``label`` whatever it is shown."""
    import torch

    from aiot.host.robust.predictor import TorchPredictor

    class Constant(torch.nn.Module):
        def forward(self, x):
            out = torch.zeros(len(x), 10)
            out[:, label] = 1.0
            return out

    return TorchPredictor(Constant(), name=name)


@pytest.fixture
def spec():
    from aiot.models import get_model_spec

    return get_model_spec("tiny_cnn")  # 28 x 28: photos are brought to 28 x 28 RGB


@pytest.fixture
def ragged():
    """Three unlabelled 'photos' of different sizes: two flat colours and a gray ramp."""
    red = np.full((40, 60, 3), (200, 10, 10), dtype=np.uint8)
    blue = np.full((90, 50, 3), (0, 0, 255), dtype=np.uint8)
    gray = np.tile(np.arange(64, dtype=np.uint8), (32, 1))
    return EvalSet("photos", [red, blue, gray], None, np.array([4, 0, 7]), ("r", "b", "g"))


def test_photos_become_model_size_rgb_with_the_sysnoise_crop(spec, ragged):
    from aiot.host.robust.sysnoise.resize import resize_to

    sized = photos.at_model_size(ragged, spec)
    assert sized.images.shape == (3, 28, 28, 3) and sized.images.dtype == np.uint8
    assert (sized.images[0] == (200, 10, 10)).all() and (sized.images[1] == (0, 0, 255)).all()
    gray = sized.images[2]
    assert (gray[..., 0] == gray[..., 1]).all() and (gray[..., 1] == gray[..., 2]).all()
    # the same rule as sysnoise's photos: shorter side to 32 px (28 / 0.875), centre 28 x 28
    assert (gray[..., 0] == resize_to(ragged.images[2], (28, 28), crop=0.875)).all()
    assert sized.labels is None and list(sized.indices) == [4, 0, 7] and sized.names == ragged.names
    facts = photos.describe(ragged, spec)
    assert facts["corrupted_shape"] == [28, 28, 3] and facts["resized_side"] == 32
    assert facts["image_shapes"] == [[40, 60, 3], [90, 50, 3], [32, 64]]


def test_a_predictor_that_ignores_its_input_agrees_with_its_clean_top1(spec, ragged):
    pytest.importorskip("imagecorruptions")
    data = photos.at_model_size(ragged, spec)
    config = CorruptConfig(("gaussian_noise", "contrast"), (1, 5), dataset="photos", frames=3)
    model = Evaluated(spec, _constant(3, "constant"))
    result = build_result(evaluate([model], data, config), config, data, deployed=False,
                          described=photos.describe(ragged, spec))
    assert result["clean_accuracy"] is None
    assert result["summary"] == {"clean_agreement": 1.0, "mNR_agreement": 1.0,
                                 "mean_G_agreement": 0.0, "mean_NCI_agreement": 0.0, "mFP": 0.0}
    table = result["tables"][0]
    assert table["columns"] == ["corruption", "s1", "s5", "NR", "G", "NCI"]
    assert table["rows"][-1] == ["mean", 1.0, 1.0, 1.0, 0.0, 0.0]
    assert "agreement with the clean prediction" in table["title"]
    assert {row[-1] for row in result["tables"][1]["rows"]} == {0.0}  # FP of every sequence
    assert result["curves"][0]["series"]["contrast"] == [[0, 1.0], [1, 1.0], [5, 1.0]]
    notes = " ".join(result["notes"])
    assert "top-1 agreement with the clean prediction" in notes and "3 photos" in notes
    assert "ImageNet-C params at 28 px" in notes and "photo set" in notes
    assert result["data"]["corrupted_shape"] == [28, 28, 3] and result["data"]["labelled"] is False


def test_a_deployed_artifact_is_scored_against_its_own_clean_top1(spec, ragged):
    pytest.importorskip("imagecorruptions")
    data = photos.at_model_size(ragged, spec)
    config = CorruptConfig(("brightness",), (2,), dataset="photos", frames=None)
    # the 'artifact' always answers 5, PyTorch 3: each agrees with itself, never with the other
    model = Evaluated(spec, _constant(3, "pytorch"), _constant(5, "artifact"))
    summary = build_result(evaluate([model], data, config), config, data, deployed=True)["summary"]
    assert summary["clean_agreement"] == summary["reference_clean_agreement"] == 1.0
    assert summary["mNR_agreement"] == summary["reference_mNR_agreement"] == 1.0
    assert summary["agreement"] == summary["agreement_on_clean"] == 0.0


def test_compare_binarized_needs_labels():
    config = CorruptConfig(dataset="photos", compare_binarized="bnn")
    with pytest.raises(UsageError, match="needs labelled images"):
        compare_target(Target("tiny_cnn"), config)
