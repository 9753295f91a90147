"""The attack suite end to end on tiny_cnn trained on digits, with a stand-in deployment.

The "deployment" is the same weights behind a second predictor, so every hand-checkable
identity holds: transfer-to-deployment accuracy equals white-box accuracy, the curve at ε = 0
is the clean accuracy, and an ε = 0 run changes nothing.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchattacks")

from aiot.host.robust.attacks.suite import AttackSettings, run_suite  # noqa: E402
from aiot.host.robust.predictor import TorchPredictor  # noqa: E402
from aiot.host.robust.target import Target  # noqa: E402

pytestmark = pytest.mark.skipif(importlib.util.find_spec("sklearn") is None, reason="scikit-learn is not installed")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Black-box attacks ask one image at a time: a second intra-op thread only adds sync on 2 shared cores."""
    from aiot.host.training.trainer import torch_threads

    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def trained(tiny_digits_weights):
    return Path(tiny_digits_weights)


def _deployment(weights):
    from aiot.models import get_model_spec

    return TorchPredictor(get_model_spec("tiny_cnn").build(weights=weights), "fake@local")


def _rows(result: dict) -> dict:
    table = result["tables"][0]
    return {row[0]: dict(zip(table["columns"], row, strict=True)) for row in table["rows"]}


def test_white_box_and_black_box_on_reference_and_deployment(trained):
    settings = AttackSettings(("fgsm", "pgd", "square"), eps=0.1, queries=30, steps=3, eps_curve=(0.0, 0.1),
                              dataset="digits", limit=8)
    result = run_suite(Target("tiny_cnn", trained), settings, deployed=_deployment(trained))
    summary, rows = result["summary"], _rows(result)
    assert result["suite"] == "attack" and result["clean_accuracy"] == summary["clean_deployed"]
    assert summary["clean_reference"] == summary["clean_deployed"] >= 0.5
    for name in ("fgsm", "pgd"):  # crafted on the reference, evaluated unchanged on identical weights
        assert rows[name]["accuracy (reference)"] == rows[name]["accuracy (fake@local)"] == summary[f"{name}_reference"]
        assert rows[name]["crafted on"] == "reference" and rows[name]["queries"] is None
    assert summary["pgd_reference"] <= summary["fgsm_reference"] + 0.125  # PGD at least about as strong
    assert rows["square"]["crafted on"] == "fake@local" and rows["square"]["budget per image"] == 30
    assert rows["square"]["queries per image"] <= 30
    assert summary["wcar_reference"] <= min(summary[f"{n}_reference"] for n in ("fgsm", "pgd", "square"))
    curve = result["curves"][0]
    assert curve["name"] == "accuracy-vs-eps-linf" and len(curve["series"]) == 6  # 3 attacks x 2 models
    for points in curve["series"].values():
        assert points[0] == [0.0, summary["clean_reference"]]
    assert any("transfer-to-deployment" in note for note in result["notes"])
    assert result["data"]["n"] == 8 and set(result["libraries"]) == {"numpy", "torch", "torchattacks"}


def test_eps_zero_changes_nothing(trained):
    settings = AttackSettings(("fgsm", "pgd", "pgd-l2", "cw", "sinifgsm", "nattack", "evolutionary"), eps=0.0,
                              eps_l2=0.0, queries=20, steps=2, dataset="digits", limit=6)
    summary = run_suite(Target("tiny_cnn", trained), settings)["summary"]
    clean = summary["clean_reference"]
    assert all(value == clean for key, value in summary.items() if key.endswith("_reference"))


def test_transfer_from_source_weights(trained, tmp_path):
    from aiot.models import get_model_spec

    torch.manual_seed(1)
    source = tmp_path / "random.pt"
    torch.save(get_model_spec("tiny_cnn").build().state_dict(), source)
    settings = AttackSettings(("sinifgsm",), eps=0.1, steps=3, dataset="digits", limit=6, source_weights=source)
    result = run_suite(Target("tiny_cnn", trained), settings)
    row = _rows(result)["sinifgsm"]
    assert row["crafted on"] == "source" and row["family"] == "transfer"
    assert 0 <= row["accuracy (reference)"] <= result["summary"]["clean_reference"]
    assert "SI-NI-FGSM was crafted on the source weights." in result["notes"]
