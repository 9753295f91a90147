"""Corruption scores: a hand-built 2-corruption example, a predictor that ignores its input."""

import math
from pathlib import Path

import numpy as np
import pytest

from aiot.core.errors import UsageError
from aiot.host.robust.corrupt import summary
from aiot.host.robust.corrupt.suite import (
    CorruptConfig,
    Evaluated,
    build_result,
    compare_target,
    evaluate,
)
from aiot.host.robust.data import EvalSet
from aiot.host.robust.target import Target

# clean 0.8; a: (0.7, 0.5) -> NR 0.6, G 0.2, NCI 0.25; b: (0.8, 0.6) -> NR 0.7, G 0.1, NCI 0.125
FP_ACC = {"a": {1: 0.7, 2: 0.5}, "b": {1: 0.8, 2: 0.6}}
# clean 0.6; a: (0.3, 0.1) -> NR 0.2, G 0.4; b: (0.6, 0.5) -> NR 0.55, G 0.05
BIN_ACC = {"a": {1: 0.3, 2: 0.1}, "b": {1: 0.6, 2: 0.5}}


def test_nr_gap_and_nci_per_corruption():
    per = summary.per_corruption(0.8, FP_ACC)
    assert per["a"] == pytest.approx({"NR": 0.6, "G": 0.2, "NCI": 0.25})
    assert per["b"] == pytest.approx({"NR": 0.7, "G": 0.1, "NCI": 0.125})


def test_mnr_mean_gap_and_mean_nci():
    assert summary.summarize(0.8, FP_ACC) == pytest.approx(
        {"clean_accuracy": 0.8, "mNR": 0.65, "mean_G": 0.15, "mean_NCI": 0.1875})


def test_om_robust_of_a_hand_built_pair():
    # G/G_bi: a 0.2/0.4 = 0.5, b 0.1/0.05 = 2 -> sqrt((0.25 + 4) / 2)
    assert summary.om_robust_of(0.8, FP_ACC, 0.6, BIN_ACC) == pytest.approx(math.sqrt(2.125))
    # a binarized gap of 0 has no ratio: that corruption is left out
    flat = {"a": {1: 0.6, 2: 0.6}, "b": BIN_ACC["b"]}
    assert summary.om_robust_of(0.8, FP_ACC, 0.6, flat) == pytest.approx(2.0)


def test_json_safe_replaces_nan():
    value = {"x": [math.nan, 1.0, math.inf], "y": (2, "s")}
    assert summary.json_safe(value) == {"x": [None, 1.0, None], "y": [2, "s"]}


def _constant_module():
    """A torch module that answers class 3 whatever it is shown."""
    import torch

    class Constant(torch.nn.Module):
        def forward(self, x):
            out = torch.zeros(len(x), 10)
            out[:, 3] = 1.0
            return out

    return Constant()


@pytest.fixture
def constant_model():
    pytest.importorskip("torch")
    from aiot.host.robust.predictor import TorchPredictor
    from aiot.models import get_model_spec

    predictor = TorchPredictor(_constant_module(), name="constant")
    return Evaluated(get_model_spec("tiny_cnn"), predictor)


@pytest.fixture
def data():
    images = np.random.default_rng(0).integers(0, 256, (10, 28, 28), dtype=np.uint8)
    labels = np.array([3, 3, 3, 3, 0, 1, 2, 4, 5, 6])  # class 3 is right for 4 of 10
    return EvalSet("synthetic", images, labels, np.arange(10))


def test_a_predictor_that_ignores_its_input_is_perfectly_robust(constant_model, data):
    pytest.importorskip("imagecorruptions")
    config = CorruptConfig(("gaussian_noise", "contrast"), (1, 5), frames=3)
    result = build_result(evaluate([constant_model], data, config), config, data, deployed=False)
    assert result["clean_accuracy"] == 0.4
    assert result["summary"] == pytest.approx(
        {"clean_accuracy": 0.4, "mNR": 0.4, "mean_G": 0.0, "mean_NCI": 0.0, "mFP": 0.0})
    accuracy = result["tables"][0]
    assert accuracy["columns"] == ["corruption", "s1", "s5", "NR", "G", "NCI"]
    assert accuracy["rows"] == [["gaussian_noise", 0.4, 0.4, 0.4, 0.0, 0.0],
                                ["contrast", 0.4, 0.4, 0.4, 0.0, 0.0],
                                ["mean", 0.4, 0.4, 0.4, 0.0, 0.0]]
    flips = result["tables"][1]
    assert [row[0] for row in flips["rows"]] == ["gaussian_noise", "speckle_noise", "gaussian_blur",
                                                  "brightness", "contrast", "translate", "rotate"]
    assert {row[-1] for row in flips["rows"]} == {0.0}
    assert result["curves"][0]["series"]["contrast"] == [[0, 0.4], [1, 0.4], [5, 0.4]]
    assert any("ImageNet-C params at 28 px" in note for note in result["notes"])


def test_om_robust_is_none_when_every_binarized_gap_is_zero(constant_model, data):
    pytest.importorskip("imagecorruptions")
    config = CorruptConfig(("contrast",), (2,), frames=None)
    scores = evaluate([constant_model, constant_model], data, config)
    result = build_result(scores, config, data, deployed=False)
    assert result["summary"]["om_robust"] is None  # 0 / 0 has no ratio: no corruption left
    assert result["tables"][-1]["rows"] == [["contrast", 0.0, 0.0, None]]
    assert "mFP" not in result["summary"]


def test_compare_target_is_the_binarized_twin(tmp_path):
    weights = tmp_path / "w.pt"
    weights.write_bytes(b"")
    target = Target("tiny_cnn", fmt="ort", device="local")
    twin = compare_target(target, CorruptConfig(compare_binarized="bnn", compare_weights=weights))
    assert (twin.model, twin.binarize, twin.weights, twin.fmt, twin.device) == (
        "tiny_cnn", "bnn", weights, "ort", "local")
    missing = CorruptConfig(compare_binarized="bnn", compare_weights=tmp_path / "missing.pt")
    with pytest.raises(UsageError, match="does not exist"):
        compare_target(target, missing)
    assert compare_target(target, CorruptConfig()) is None
    with pytest.raises(UsageError, match="needs --compare-binarized"):
        compare_target(target, CorruptConfig(compare_weights=Path("w.pt")))
    with pytest.raises(UsageError, match="full-precision"):
        compare_target(Target("tiny_cnn", binarize="bnn"), CorruptConfig(compare_binarized="xnor"))
