"""Parity of binarized artifacts by sign agreement per binary layer (LCE, daBNN)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from aiot.converters.api import convert_model
from aiot.converters.sidecar import read_sidecar
from aiot.converters.sign_parity import MIN_SIGN_AGREEMENT, compare_signs
from aiot.core.errors import AccuracyMismatch

TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}


def _layers(rng, n=3):
    return {f"layer{i}": rng.standard_normal((4, 8, 5, 5)).astype(np.float32) for i in range(n)}


def test_reordering_noise_passes_and_a_wrong_layer_is_named():
    rng = np.random.default_rng(0)
    reference = _layers(rng)
    close = {k: v + rng.normal(0, 1e-6, v.shape).astype(np.float32) for k, v in reference.items()}
    report = compare_signs(reference, close, TOLERANCE)
    assert report["ok"] and report["min_sign_agreement"] > 0.999 and report["stem"]["ok"]
    wrong = dict(close, layer1=rng.standard_normal((4, 8, 5, 5)).astype(np.float32))
    report = compare_signs(reference, wrong, TOLERANCE)
    assert not report["ok"] and report["first_disagreeing_layer"] == "layer1"
    assert 0.4 < report["binary_layers"][1]["sign_agreement"] < 0.6  # below FLOOR: caught


def test_a_different_tie_rule_is_caught_on_exact_zeros():
    reference = {"a": np.array([[0.0] * 30 + [1.0] * 970], np.float32)}
    # 97 % of the signs agree, but every one of PyTorch's exact zeros went to -1
    report = compare_signs(reference, {"a": reference["a"].copy()}, TOLERANCE,
                           positive_at_zero=False)
    layer = report["binary_layers"][0]
    assert layer["sign_agreement"] == 0.97 and layer["ties"] == 30 and layer["tie_agreement"] == 0
    assert not report["ok"] and report["first_disagreeing_layer"] == "a"
    message = AccuracyMismatch("dabnn", {"signs": report}).message
    assert "binarizes PyTorch's exact zeros otherwise: 0.0% of 30 ties agree" in message


def test_the_float_stem_is_compared_by_value():
    rng = np.random.default_rng(1)
    reference = _layers(rng, 2)
    off = dict(reference, layer0=reference["layer0"] * 1.01)  # signs kept, values not
    report = compare_signs(reference, off, TOLERANCE)
    assert report["min_sign_agreement"] == 1.0 and not report["stem"]["ok"] and not report["ok"]
    assert "float layers before the first binary layer differ" in AccuracyMismatch(
        "lce", {"signs": report}).message


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["bnn", "dorefa", "bireal", "reactnet", "recu", "fda"])
def test_tiny_vgg_from_its_default_init_converts_to_lce_for_every_algorithm(
        tmp_path, algorithm, monkeypatch, fresh_conversions):
    from aiot.core import toolchains

    started, run_script = [], toolchains.run_script

    def counted(name, script, *args, **kwargs):
        started.append(script.name)
        return run_script(name, script, *args, **kwargs)

    monkeypatch.setattr(toolchains, "run_script", counted)
    res = convert_model(f"tiny_vgg_{algorithm}", "lce", tmp_path)
    assert started == ["build.py"]  # artifact and sign probe from one TensorFlow start
    signs = read_sidecar(res.artifact)["parity"]["signs"]
    assert res.parity["rule"] == "sign-agreement" and signs["ok"]
    assert [layer["layer"] for layer in signs["binary_layers"]] == [
        "features.conv2", "features.conv3", "features.conv4"]
    assert signs["binary_layers"][0]["sign_agreement"] == 1.0  # nothing to cascade yet


@pytest.mark.slow
def test_resnet18_cifar_bnn_from_its_default_init_converts_to_lce(tmp_path):
    """The issue's case: top-1 84.4 % under the logits rule, a correct graph all the same."""
    res = convert_model("resnet18_cifar_bnn", "lce", tmp_path)
    signs = res.parity["signs"]
    assert signs["ok"] and len(signs["binary_layers"]) >= 16 and signs["stem"]["ok"]
    agreement = [layer["sign_agreement"] for layer in signs["binary_layers"]]
    assert agreement[0] == 1.0 and min(agreement) >= MIN_SIGN_AGREEMENT


@pytest.mark.slow
def test_a_converter_bug_in_one_binary_layer_is_named(tmp_path, monkeypatch, fresh_conversions):
    """A lowering that flips one binary conv's weights (in the artifact and its probe alike,
    as a real converter bug would) fails at the layer that reads its output."""
    from aiot.converters.lce import converter as lce

    original = lce._layer_record

    def flip_conv3(layer):
        record, params = original(layer)
        if layer.name == "features_conv3":
            key = f"{layer.name}/weight_sign"
            params[key] = -params[key]
        return record, params

    monkeypatch.setattr(lce, "_layer_record", flip_conv3)
    wrong = "layer features.conv4 binarizes other signs than PyTorch: [0-9.]+% agree, 100.0% at"
    with pytest.raises(AccuracyMismatch, match=wrong):
        convert_model("tiny_vgg_bnn", "lce", tmp_path)
    assert not list(tmp_path.glob("*.tflite"))
