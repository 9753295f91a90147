"""Source memos: a conversion asked again (same zoo model, format, options, folder, weights file)
finds its artifact without building the model, and anything that changed goes the whole way."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from aiot.converters import api, conversion_cache


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """An empty conversion cache (entries and memos) for this test."""
    monkeypatch.setenv("AIOT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def builds(monkeypatch):
    """The source models loaded from now on (each one a model built)."""
    made = []
    real = api.load_source

    def load(ref, *args, **kwargs):
        made.append(ref.name)
        return real(ref, *args, **kwargs)

    monkeypatch.setattr(api, "load_source", load)
    return made


def test_a_conversion_asked_again_builds_no_model(tmp_path, own_cache, builds):
    first = api.convert_model("tiny_cnn", "onnx", tmp_path / "a")
    again = api.convert_model("tiny_cnn", "onnx", tmp_path / "a")
    assert builds == ["tiny_cnn"] and again.cached
    assert (again.artifact, again.sha256, again.parity) == (first.artifact, first.sha256, first.parity)
    (memo,) = (own_cache / "conversion-sources").iterdir()
    kept = json.loads(memo.read_text())
    assert kept["artifact"] == "tiny_cnn.onnx"
    assert kept["source_hash"] == first.facts["source"]["state_sha256"]
    # another folder, other options: their own requests, the model built for each
    api.convert_model("tiny_cnn", "onnx", tmp_path / "b")
    api.convert_model("tiny_cnn", "onnx", tmp_path / "a", options={"opset": "18"})
    assert builds == ["tiny_cnn"] * 3


def test_a_changed_artifact_or_weights_file_goes_the_whole_way(tmp_path, own_cache, builds):
    weights = tmp_path / "w.pt"
    from aiot.models import get_model_spec

    torch.manual_seed(1)
    torch.save(get_model_spec("tiny_cnn").build().state_dict(), weights)
    first = api.convert_model("tiny_cnn", "onnx", tmp_path / "a", weights=weights)
    assert api.convert_model("tiny_cnn", "onnx", tmp_path / "a", weights=weights).cached
    assert len(builds) == 1
    # other weights in the same file: a new stamp, the model built and converted again
    torch.manual_seed(2)
    torch.save(get_model_spec("tiny_cnn").build().state_dict(), weights)
    os.utime(weights, ns=(1, 1))
    second = api.convert_model("tiny_cnn", "onnx", tmp_path / "a", weights=weights)
    assert len(builds) == 2 and not second.cached and second.sha256 != first.sha256
    # the artifact damaged by hand: its sidecar refuses it, so it is converted again
    data = bytearray(second.artifact.read_bytes())
    data[len(data) // 2] ^= 0xFF
    second.artifact.write_bytes(bytes(data))
    third = api.convert_model("tiny_cnn", "onnx", tmp_path / "a", weights=weights)
    assert len(builds) == 3 and third.sha256 == second.sha256


def test_a_memo_is_a_name_and_a_hash_or_nothing(tmp_path, own_cache, builds):
    api.convert_model("tiny_cnn", "onnx", tmp_path / "a")
    (memo,) = (own_cache / "conversion-sources").iterdir()
    outside = tmp_path / "elsewhere.onnx"
    for hostile in ({"artifact": str(outside), "source_hash": "x"}, {"artifact": 3}, [1, 2], "{"):
        memo.write_text(hostile if isinstance(hostile, str) else json.dumps(hostile))
        memo.chmod(0o600)
        assert conversion_cache.recalled(memo.stem) is None
    memo.write_text(json.dumps({"artifact": "tiny_cnn.onnx", "source_hash": "x"}))
    assert api.convert_model("tiny_cnn", "onnx", tmp_path / "a").cached  # a wrong hash: rebuilt
    assert builds == ["tiny_cnn", "tiny_cnn"]
    memo.chmod(0o666)  # another account could have written it: never read
    assert conversion_cache.recalled(memo.stem) is None


def test_user_code_and_packaged_weights_are_never_recalled():
    """A user's factory imports code aiot cannot stamp; packaged weights live in a package."""
    assert api._request_key("tests/transformer_models.py:bert", "onnx", ".", None, None, None,
                            None, None, (8, None)) is None
    assert api._request_key("efficientnet_lite0", "onnx", ".", None, None, None, None, None,
                            (8, None)) is None


def test_a_recalled_conversion_imports_no_torch(tmp_path, own_cache):
    """The point of the memo: a sweep whose artifacts all exist starts without torch."""
    api.convert_model("tiny_cnn", "onnx", tmp_path / "a")
    code = ("import sys; from aiot.converters.api import convert_model; "
            f"r = convert_model('tiny_cnn', 'onnx', {str(tmp_path / 'a')!r}); "
            "print(r.cached, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ}, timeout=120, check=True)
    assert done.stdout.split() == ["True", "False"], done.stderr
