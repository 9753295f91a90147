"""Quantized models on the command line and in training: zoo names, one-line refusals, the
training key, and a real quantization-aware training run."""

from __future__ import annotations

import importlib.util
from dataclasses import replace

import pytest

pytest.importorskip("torch")

from aiot.core.errors import UsageError
from aiot.host.training.trainer import TrainConfig, weights_file
from aiot.models.model_ref import resolve_model

BASE = TrainConfig(model="tiny_cnn", dataset="digits", epochs=1, batch_size=64, lr=3e-3, seed=0)


def _one_line_error(result, *fragments: str) -> None:
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    for fragment in fragments:
        assert fragment in result.stderr


def test_quantized_zoo_names_resolve_for_the_commands_that_take_them():
    ref = resolve_model("resnet18_lsq4", quantized_ok=True)
    assert (ref.name, ref.quantize, ref.binarize, ref.label()) == ("resnet18", "lsq:4", None,
                                                                   "resnet18_lsq4")
    assert ref.source()["quantize"] == "lsq:4"
    assert resolve_model("tiny_cnn", quantize="DoReFa:8", quantized_ok=True).label() == "tiny_cnn_dorefa8"
    assert resolve_model("regnetx_600mf_pact2", quantized_ok=True).quantize == "pact:2"
    assert resolve_model("resnet18_dorefa").binarize == "dorefa"  # BiBench's 1-bit DoReFa


@pytest.mark.parametrize("text, kwargs, words", [
    ("resnet18_lsq4", {}, "does not run yet"),  # a command that would run the float model
    ("resnet18_lsq3", {"quantized_ok": True}, "3 bits is not one of"),
    ("resnet18_lsq4", {"quantize": "pact:4", "quantized_ok": True}, "already quantized"),
    ("resnet18_bnn", {"quantize": "lsq:4", "quantized_ok": True}, "is binarized"),
    ("resnet18_lsq4", {"binarize": "bnn", "quantized_ok": True}, "is quantized"),
])
def test_quantized_references_refused(text, kwargs, words):
    with pytest.raises(UsageError, match=words):
        resolve_model(text, **kwargs)


def test_quantization_is_part_of_the_training_key_and_file_name(tmp_path):
    lsq4 = replace(BASE, quantize="lsq:4")
    assert len({BASE.key(), lsq4.key(), replace(BASE, quantize="lsq:8").key(),
                replace(lsq4, init="scratch").key()}) == 4
    assert replace(BASE, quantize="LSQ4").key() == lsq4.key()  # same run, other spelling
    assert lsq4.full_precision().key() == BASE.key()
    assert weights_file(lsq4, tmp_path).name.startswith("tiny_cnn.lsq4-digits-")


@pytest.mark.parametrize("args, words", [
    (["--quantize", "lsq:3"], ["3 bits is not one of", "2, 4, 6, 8"]),
    (["--quantize", "awq:4"], ["unknown quantization method 'awq'"]),
    (["--quantize", "lsq"], ["not METHOD:BITS"]),
    (["--quantize", "lsq:4", "--binarize", "bnn"], ["exclude each other"]),
])
def test_train_refuses_unsupported_combinations_in_one_line(cli, args, words):
    result = cli("train", "tiny_cnn", "--dataset", "digits", *args, code=2)
    _one_line_error(result, *words)


def test_models_info_and_list_show_quantized_models(cli):
    info = cli.json("models", "info", "tiny_cnn_lsq4")
    assert info["quantized"]["bits"] == 4 and info["quantized"]["title"] == "LSQ"
    assert info["quantized"]["quantized_layers"] == ["features.conv2", "features.conv3"]
    assert info["quantized"]["quantizer_params"] == 4  # a weight and an input step per layer
    text = cli("models", "list", "--paper", "RobustMQ").stdout
    assert "regnetx_600mf" in text and "<model>_<method><bits>" in text


def test_models_list_and_info_say_where_quantized_models_deploy(cli):
    """Issue 51: 8-bit LSQ deploys as int8 in three runtimes; the listing says so, as
    aiot.models.quant.deploy decides, and no longer that nothing deploys."""
    from aiot.models.quant.deploy import deployment_refusal
    from aiot.models.quant.methods import parse_quantize

    text = " ".join(cli("models", "list", "--paper", "aiot").stdout.split())
    assert "not deployable yet" not in text
    assert "lsq8 deploys as int8 to executorch, onnx, tflite (e.g. resnet18_mnist_lsq8)" in text
    assert "the others are measured in PyTorch" in text
    rows = {r["name"]: r for r in cli.json("models", "list", "--paper", "aiot")}
    assert rows["tiny_cnn"]["quantized_deploys"] == {"tiny_cnn_lsq8": ["executorch", "onnx", "tflite"]}
    for fmt in ("onnx", "executorch", "tflite", "ort", "ptl"):  # the listing and the refusals agree
        assert (fmt in rows["tiny_cnn"]["quantized_deploys"]["tiny_cnn_lsq8"]) == (
            deployment_refusal(parse_quantize("lsq:8"), fmt) is None)
    info = cli.json("models", "info", "tiny_cnn_lsq8")["quantized"]
    assert info["deploys_to"] == ["executorch", "onnx", "tflite"]
    assert info["deployment"] == "as int8 to executorch, onnx, tflite"
    narrow = cli.json("models", "info", "tiny_cnn_lsq4")["quantized"]
    assert narrow["deploys_to"] == [] and "is not deployable" in narrow["deployment"]
    shown = " ".join(cli("models", "info", "tiny_cnn_lsq8").stdout.split())
    assert "deploys │ as int8 to executorch, onnx, tflite" in shown


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("sklearn") is None, reason="scikit-learn is not installed")
def test_train_quantized_on_digits_learns_and_records_what_it_trained(cli):
    import torch

    from aiot.models import get_model_spec
    from aiot.models.datasets import load_dataset
    from aiot.models.quant import build_quantized, parse_quantize
    from aiot.host.training.trainer import evaluate

    record = cli.json("train", "tiny_cnn", "--dataset", "digits", "--epochs", "2",
                      "--batch-size", "64", "--lr", "3e-3", "--quantize", "pact:4")
    assert record["status"] == "ok" and record["spec"]["quantize"] == "pact:4"
    assert record["accuracy"] > 0.6  # chance is 0.1
    weights = record["result"]["weights_path"]
    assert "tiny_cnn.pact4-digits-" in weights
    # The learned clips load with the weights and give the recorded accuracy back.
    spec = get_model_spec("tiny_cnn")
    model = build_quantized(spec, parse_quantize("pact:4"), weights)
    x, y = load_dataset("digits", spec.input, "test")
    assert evaluate(model, torch.from_numpy(x), torch.from_numpy(y)) == pytest.approx(
        record["accuracy"], abs=1e-9)
