"""BiBench on the command line: train --binarize, models info --binarize, convert and run
refusals with one-line errors, and a binarized run's record carrying its algorithm."""

from __future__ import annotations

import importlib.util
import re

import pytest

from tests.helpers import single_error

pytest.importorskip("torch")


def test_models_info_shows_verdicts_layers_and_ratios(cli):
    info = cli.json("models", "info", "tiny_vgg", "--binarize", "reactnet")
    facts = info["binarized"]
    assert facts["name"] == "reactnet" and facts["activation_mean_shift"] is True
    assert facts["binarized_layers"] == ["features.conv2", "features.conv3", "features.conv4"]
    verdicts = {v["library"]: v["deployable"] for v in facts["deployability"]}
    assert verdicts == {"lce": "yes", "dabnn": "conditional"}
    assert facts["r_c"] > 10 and facts["r_s"] > 10
    text = cli("models", "info", "tiny_vgg", "--binarize", "xnor").stdout
    assert "deploys to lce" in text and "re-scales activations" in text


def test_unknown_algorithm_is_one_line_with_suggestions(cli):
    result = cli("models", "info", "tiny_vgg", "--binarize", "xnr", code=2)
    single_error(result, "unknown binarization algorithm 'xnr'", "xnor")


def test_converting_an_undeployable_algorithm_is_refused_with_the_reason(cli, tmp_path):
    result = cli("convert", "tiny_vgg", "--binarize", "xnor++", "--format", "dabnn", code=1)
    single_error(result, "spatial-wise scale factors")
    result = cli("run", "-m", "tiny_vgg", "-f", "lce", "--binarize", "xnor", code=1)
    single_error(result, "re-scales activations")
    assert not (tmp_path / "results" / "artifacts").exists() or not any(
        (tmp_path / "results" / "artifacts").iterdir())


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("sklearn") is None, reason="scikit-learn is not installed")
def test_train_binarized_on_digits_stores_a_record_and_weights_that_convert(cli, tmp_path):
    record = cli.json("train", "tiny_cnn", "--dataset", "digits", "--epochs", "1",
                      "--batch-size", "64", "--lr", "3e-3", "--binarize", "bi-real")
    assert record["status"] == "ok" and record["spec"]["binarize"] == "bi-real"
    assert record["accuracy"] > 0.3  # chance is 0.1
    weights = record["result"]["weights_path"]
    assert "tiny_cnn.bireal-digits-" in weights
    # The trained binarized weights load into the binarized model and convert (ONNX, fast).
    converted = cli.json("convert", "tiny_cnn", "--binarize", "bireal", "--weights", weights,
                         "--format", "onnx")
    # Named by what sets it apart: the algorithm and the weights file's hash.
    assert re.search(r"tiny_cnn\.bireal\.w-[0-9a-f]{8}\.onnx$", converted["artifact"])
    assert converted["parity"]["dataset"]["top1_agreement"] >= 0.9
    # Weights of another algorithm do not fit (ReActNet has thresholds): one line, no traceback.
    result = cli("convert", "tiny_cnn", "--binarize", "reactnet", "--format", "onnx",
                 "--weights", weights, code=1)
    single_error(result, weights)
