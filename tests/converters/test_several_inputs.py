"""A researcher's model as it is: several inputs (a tuple, or keywords in a dict), each at its
own dtype, and Hugging Face transformers built from their configs (tests/transformer_models.py:
a BERT encoder with two int64 inputs and dict outputs, a ViT, a GPT-2 style decoder, an image
with a bool mask by keyword) convert to every format that holds several inputs, with a passing
parity check and the inputs' names kept; the formats of one input refuse in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")

from aiot.converters.api import convert_model
from aiot.converters.inputs import InputFeed
from aiot.core.errors import ConversionError, UsageError
from aiot.converters.base import get_converter
from aiot.core.fileio import sha256_file
from aiot.host.engine.signature import read_signature
from tests.converters.conftest import need_toolchain

MODELS = str(Path(__file__).resolve().parents[1] / "transformer_models.py")
SEVERAL = ["onnx", "ort", "tflite", "ptl", "executorch"]


def _convert(factory: str, fmt: str, tmp_path, **kwargs):
    if fmt == "executorch":
        need_toolchain("executorch")
    return convert_model(f"{MODELS}:{factory}", fmt, tmp_path, **kwargs)


def _runtime_names(result) -> list[str]:
    """The input names the format's own runtime reads from the artifact."""
    backend = get_converter(result.facts["format"]).backend
    found = read_signature(backend, result.artifact, sha256_file(result.artifact))
    return [i["name"] for i in found["inputs"]]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", SEVERAL)
def test_a_bert_with_two_int64_inputs_and_dict_outputs_converts(tmp_path, fmt):
    result = _convert("bert", fmt, tmp_path)
    assert result.parity["verdict"] == "pass" and result.parity["max_abs"] < 1e-4
    facts = result.facts
    inputs = facts["inputs"]
    assert [(i["name"], i["dtype"], i["shape"]) for i in inputs] == [
        ("input_ids", "int64", [16]), ("attention_mask", "int64", [16])]
    # the ids are drawn inside the vocabulary, the mask in its example's span
    assert inputs[0]["range"] == [0, 1000] and "word_embeddings" in inputs[0]["range_from"]
    assert inputs[1]["range"] == [0, 2] and inputs[1]["range_from"] == "example"
    assert [o["name"] for o in facts["outputs"]] == ["last_hidden_state", "pooler_output"]
    assert [o["name"] for o in result.parity["outputs"]] == ["last_hidden_state", "pooler_output"]
    if fmt == "executorch":  # positional in the file; the sidecar says which is which
        assert _runtime_names(result) == ["input_0", "input_1"]
        assert [i["runtime_name"] for i in inputs] == ["input_0", "input_1"]
    else:
        assert sorted(_runtime_names(result)) == ["attention_mask", "input_ids"]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", SEVERAL)
def test_a_float_image_and_a_bool_mask_by_keyword_convert(tmp_path, fmt):
    result = _convert("masked_image", fmt, tmp_path)
    assert result.parity["verdict"] == "pass"
    assert [(i["name"], i["dtype"]) for i in result.facts["inputs"]] == [
        ("image", "float32"), ("mask", "bool")]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", SEVERAL)
def test_a_gpt2_style_decoder_converts(tmp_path, fmt):
    result = _convert("gpt2", fmt, tmp_path)
    assert result.parity["verdict"] == "pass"
    (ids,) = result.facts["inputs"]
    assert (ids["name"], ids["dtype"], ids["range"]) == ("input_ids", "int64", [0, 1000])


@pytest.mark.slow
@pytest.mark.parametrize("fmt", SEVERAL)
def test_a_vit_converts(tmp_path, fmt):
    result = _convert("vit", fmt, tmp_path)
    assert result.parity["verdict"] == "pass"
    assert result.facts["inputs"][0]["name"] == "pixel_values"


@pytest.mark.parametrize("fmt", ["caffe2", "dabnn", "lce"])
def test_a_format_of_one_input_refuses_several_in_one_line(tmp_path, fmt):
    with pytest.raises(ConversionError) as caught:
        convert_model(f"{MODELS}:masked_image", fmt, tmp_path)
    assert caught.value.stage == "check"
    assert "takes 2 inputs (image, mask)" in caught.value.detail
    assert "onnx" in caught.value.hint and "\n" not in str(caught.value)
    assert not list(tmp_path.iterdir())  # refused before anything was written


def test_a_held_value_reaches_parity_and_the_sidecar(tmp_path):
    result = _convert("bert", "ptl", tmp_path,
                      feed=InputFeed((("attention_mask", 1),), strict=True))
    assert result.facts["inputs"][1]["value"] == 1
    with pytest.raises(UsageError, match="no input of"):
        _convert("bert", "ptl", tmp_path, feed=InputFeed((("mask", 1),), strict=True))


def test_a_batch_of_real_inputs_replaces_the_noise(tmp_path):
    import numpy as np

    rng = np.random.default_rng(0)
    batch = tmp_path / "real.npz"
    np.savez(batch, input_ids=rng.integers(0, 1000, (3, 16)), attention_mask=np.ones((3, 16), np.int64))
    result = _convert("bert", "ptl", tmp_path / "out", feed=InputFeed(npz=str(batch)))
    assert result.parity["n"] == 3
    np.savez(batch, input_ids=rng.integers(0, 1000, (3, 16)).astype(np.int32),
             attention_mask=np.ones((3, 16), np.int64))
    with pytest.raises(UsageError, match="'input_ids' is int32"):
        _convert("bert", "ptl", tmp_path / "out2", feed=InputFeed(npz=str(batch)))


DTYPES = '''
import torch


class Mixed(torch.nn.Module):
    """int32 ids into an embedding, float16 features, a bool flag: one output."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(50, 8)
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, ids, features, keep):
        x = self.embed(ids).mean(1) + features.float()
        return self.lin(x) * keep.float()


def make():
    return Mixed().eval(), (torch.tensor([[3, 7, 49, 0]], dtype=torch.int32),
                            torch.randn(1, 8).half(), torch.tensor([[True]]))
'''


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["onnx", "tflite", "ptl", "executorch"])
def test_each_input_keeps_its_dtype(tmp_path, fmt):
    (tmp_path / "mixed.py").write_text(DTYPES)
    if fmt == "executorch":
        need_toolchain("executorch")
    result = convert_model(f"{tmp_path / 'mixed.py'}:make", fmt, tmp_path / "out")
    assert result.parity["verdict"] == "pass"
    assert [(i["name"], i["dtype"], i.get("range")) for i in result.facts["inputs"]] == [
        ("ids", "int32", [0, 50]), ("features", "float16", None), ("keep", "bool", None)]


@pytest.mark.parametrize("keywords", [False, True])
def test_a_program_of_several_inputs_is_read_as_it_is(tmp_path, keywords):
    import torch

    from tests.transformer_models import masked_image

    model, example = masked_image()
    args, kwargs = ((), example) if keywords else (tuple(example.values()), None)
    path = tmp_path / "masked.pt2"
    torch.export.save(torch.export.export(model, args, kwargs), path)
    result = convert_model(str(path), "ptl", tmp_path / "out")
    assert result.parity["verdict"] == "pass"
    assert [i["dtype"] for i in result.facts["inputs"]] == ["float32", "bool"]
    if keywords:
        assert [i["name"] for i in result.facts["inputs"]] == ["image", "mask"]
