"""Model references: zoo names, <zoo>_<algorithm>, artifact files by their bytes, user code."""

from __future__ import annotations

import zipfile

import pytest

from aiot.converters import check_format
from aiot.core.errors import UnknownName, UsageError
from aiot.models.model_ref import (
    ARTIFACT,
    CODE,
    ZOO,
    default_format,
    detect_format,
    record_name,
    resolve_model,
)


@pytest.mark.parametrize("text, name, binarize, fmt", [
    ("resnet18", "resnet18", None, "tflite"),
    ("resnet18_bnn", "resnet18", "bnn", "lce"),
    ("vgg_small_reactnet", "vgg_small", "reactnet", "lce"),
    ("resnet18_cifar", "resnet18_cifar", None, "tflite"),  # a zoo name that ends in _<word>
    ("resnet18_cifar_bireal", "resnet18_cifar", "bireal", "lce"),
    ("tiny_vgg_xnor", "tiny_vgg", "xnor", "tflite"),  # XNOR's scales: LCE refuses it
    ("TINY_VGG_BNN", "tiny_vgg", "bnn", "lce"),
])
def test_zoo_names_and_binarized_zoo_names(text, name, binarize, fmt):
    ref = resolve_model(text)
    assert (ref.kind, ref.name, ref.binarize, default_format(ref)) == (ZOO, name, binarize, fmt)


def test_unknown_zoo_name_suggests_close_names():
    with pytest.raises(UnknownName) as caught:
        resolve_model("resnet19_bnn")
    assert "resnet18" in caught.value.hint


@pytest.mark.parametrize(("typed", "first"), [
    ("resnet18_bnnn", "resnet18_bnn"),  # a binarized zoo name
    ("resnet18_mnist_lsqq8", "resnet18_mnist_lsq8"),  # a quantized one
    ("tiny_cnn_xnorr", "tiny_cnn_xnor"),
    ("resnt18", "resnet18"),  # a plain zoo name's typo stays a plain zoo name
])
def test_suggestions_include_binarized_and_quantized_zoo_names(typed, first):
    with pytest.raises(UnknownName) as caught:
        resolve_model(typed)
    assert caught.value.close[0] == first, caught.value.hint
    assert caught.value.hint.startswith(f"did you mean {first}")
    if typed == "resnt18":  # closer plain names exist: no derived name crowds them out
        assert not any("_" in name for name in caught.value.close), caught.value.close


def test_a_name_close_to_nothing_lists_the_zoo_not_every_derived_name():
    with pytest.raises(UnknownName) as caught:
        resolve_model("zzzz")
    assert caught.value.hint.startswith("known: ") and "resnet18," in caught.value.hint
    assert "resnet18_bnn" not in caught.value.hint and "_lsq" not in caught.value.hint


def test_binarize_option_agrees_with_the_suffix():
    assert resolve_model("resnet18", "BNN").binarize == "bnn"
    assert resolve_model("resnet18_bnn", "bnn").binarize == "bnn"
    with pytest.raises(UsageError, match="already binarized with bnn"):
        resolve_model("resnet18_bnn", "reactnet")


def _file(path, data: bytes):
    path.write_bytes(data)
    return path


def test_formats_come_from_the_bytes_not_the_name(tmp_path):
    assert detect_format(_file(tmp_path / "m.bin", b"\x18\0\0\0TFL3" + b"\0" * 32)) == "tflite"
    lce = _file(tmp_path / "b.tflite", b"\x18\0\0\0TFL3" + b"\0" * 8 + b"LceBconv2d")
    assert detect_format(lce) == "lce"
    assert detect_format(_file(tmp_path / "m.x", b"\x10\0\0\0ORTM" + b"\0" * 8)) == "ort"
    assert detect_format(_file(tmp_path / "m.y", b"\x10\0\0\0ET12" + b"\0" * 8)) == "executorch"
    with zipfile.ZipFile(tmp_path / "m.ptl", "w") as archive:
        archive.writestr("m/bytecode.pkl", b"")
    assert detect_format(tmp_path / "m.ptl") == "ptl"
    with zipfile.ZipFile(tmp_path / "p.zip", "w") as archive:
        archive.writestr("p/archive_format", b"pt2")
    assert detect_format(tmp_path / "p.zip") == "pt2"


def test_files_that_are_no_model_are_one_line_errors(tmp_path):
    with pytest.raises(UsageError, match="cannot tell what kind of model notes.txt is"):
        detect_format(_file(tmp_path / "notes.txt", b"hello world, not a model"))
    with zipfile.ZipFile(tmp_path / "w.pt", "w") as archive:
        archive.writestr("w/data.pkl", b"")
    with pytest.raises(UsageError, match="TorchScript or state-dict file"):
        detect_format(tmp_path / "w.pt")
    with pytest.raises(UsageError, match="not a valid ONNX model"):
        detect_format(_file(tmp_path / "broken.onnx", b"\xff\xfe garbage"))
    with pytest.raises(UsageError, match="has no init net beside it"):
        detect_format(_file(tmp_path / "m.predict_net.pb", b"\n\x03net"))


def test_an_artifact_is_named_by_file_name_and_hash_never_by_path(tmp_path):
    path = _file(tmp_path / "net.tflite", b"\x18\0\0\0TFL3" + b"\0" * 32)
    ref = resolve_model(str(path))
    assert (ref.kind, ref.name, ref.format) == (ARTIFACT, "net.tflite", "tflite")
    assert len(ref.sha256) == 64 and ref.label() == f"net.tflite@{ref.sha256[:8]}"
    assert str(tmp_path) not in str(ref.source())
    assert default_format(ref) == "tflite" and check_format(ref, "TFLite") == "tflite"
    with pytest.raises(UsageError, match="net.tflite is a tflite artifact, not onnx"):
        check_format(ref, "onnx")
    with pytest.raises(UsageError, match="cannot apply to the artifact file"):
        resolve_model(str(path), "bnn")


def test_missing_files_and_malformed_code_references(tmp_path):
    with pytest.raises(UsageError, match="model file .*gone.onnx does not exist"):
        resolve_model(str(tmp_path / "gone.onnx"))
    with pytest.raises(UsageError, match="model file .*nowhere.py does not exist"):
        resolve_model(str(tmp_path / "nowhere.py") + ":make")
    (tmp_path / "net.py").write_text("def make(): pass\n")
    with pytest.raises(UsageError, match="is not a Python name"):
        resolve_model(str(tmp_path / "net.py") + ":make-it")
    ref = resolve_model(str(tmp_path / "net.py") + ":make")
    assert (ref.kind, ref.name, ref.factory) == (CODE, "net.py:make", "make")
    module = resolve_model("mypkg.nets:build")
    assert (module.kind, module.module, module.factory, module.path) == (CODE, "mypkg.nets",
                                                                          "build", None)


def test_record_names_for_filters(tmp_path):
    assert record_name("resnet18_bnn") == "resnet18"
    assert record_name(str(tmp_path / "old" / "net.onnx")) == "net.onnx"  # a file gone since
    assert record_name(None) is None
