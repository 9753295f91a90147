"""The machine's conversion cache: a second results folder gets the first one's verified
artifact without exporting again; a damaged entry, other options or the off switch convert."""

from __future__ import annotations

import json

import pytest

from aiot.converters import api, conversion_cache
from aiot.converters.sidecar import sidecar_path


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """An empty conversion cache for this test (the suite's is shared by its tests)."""
    monkeypatch.setenv("AIOT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "conversions"


@pytest.fixture
def exports(monkeypatch):
    """The export calls made from now on, by artifact name."""
    made = []
    real = api._export

    def export(converter, model, example, artifact, options, spec=None):
        made.append(artifact.name)
        return real(converter, model, example, artifact, options, spec)

    monkeypatch.setattr(api, "_export", export)
    return made


def test_a_second_results_folder_copies_the_first_ones_conversion(tmp_path, own_cache, exports):
    first = api.convert_model("tiny_cnn", "onnx", tmp_path / "a")
    second = api.convert_model("tiny_cnn", "onnx", tmp_path / "b")
    assert exports == ["tiny_cnn.onnx"]  # exported once, for the first folder
    assert not first.cached and second.cached
    assert second.artifact == tmp_path / "b" / "tiny_cnn.onnx"
    assert second.sha256 == first.sha256 and second.parity == first.parity
    copied = json.loads(sidecar_path(second.artifact).read_text())
    origin = copied.pop("from_cache")  # the copy names the conversion it came from
    assert copied == first.facts and second.facts["from_cache"] == origin
    (entry,) = own_cache.iterdir()
    assert origin["key"] == entry.name and origin["converted_at"] == first.facts["created_at"]
    assert [p.name for p in own_cache.iterdir()] != []
    # the copy is the folder's own: the folder's cache reuses it even with the machine's gone
    for entry in own_cache.iterdir():
        for f in entry.iterdir():
            f.unlink()
        entry.rmdir()
    assert api.convert_model("tiny_cnn", "onnx", tmp_path / "b").cached
    assert exports == ["tiny_cnn.onnx"]


def test_every_file_of_a_multi_file_artifact_is_copied(tmp_path, own_cache, exports):
    """Caffe2's predict net and init net: both come from the cache, each checked."""
    pytest.importorskip("google.protobuf")
    first = api.convert_model("tiny_cnn", "caffe2", tmp_path / "a")
    second = api.convert_model("tiny_cnn", "caffe2", tmp_path / "b")
    assert second.cached and len(exports) == 1
    names = sorted(p.name for p in (tmp_path / "b").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "a").iterdir()) and len(names) == 3
    init_net = "tiny_cnn.caffe2.init_net.pb"
    assert (tmp_path / "b" / init_net).read_bytes() == (first.artifact.parent / init_net).read_bytes()


def test_a_damaged_entry_is_converted_again_and_replaced(tmp_path, own_cache, exports):
    first = api.convert_model("tiny_cnn", "onnx", tmp_path / "a")
    (entry,) = own_cache.iterdir()
    kept = entry / "tiny_cnn.onnx"
    data = bytearray(kept.read_bytes())
    data[len(data) // 2] ^= 0xFF
    kept.write_bytes(bytes(data))
    again = api.convert_model("tiny_cnn", "onnx", tmp_path / "b")
    assert not again.cached and exports == ["tiny_cnn.onnx", "tiny_cnn.onnx"]
    assert again.sha256 == first.sha256  # the damaged copy never reached the folder
    assert api.convert_model("tiny_cnn", "onnx", tmp_path / "c").cached  # the entry was replaced
    assert len(exports) == 2


def test_other_options_or_the_off_switch_convert(tmp_path, own_cache, exports, monkeypatch):
    api.convert_model("tiny_cnn", "onnx", tmp_path / "a")
    other = api.convert_model("tiny_cnn", "onnx", tmp_path / "b", options={"opset": "18"})
    assert not other.cached and other.artifact.name != "tiny_cnn.onnx"
    monkeypatch.setenv(conversion_cache.SWITCH, "off")
    assert not api.convert_model("tiny_cnn", "onnx", tmp_path / "c").cached
    assert len(exports) == 3


def test_an_unwritable_cache_only_costs_a_conversion(tmp_path, monkeypatch, exports):
    blocked = tmp_path / "cache"
    blocked.mkdir()
    (blocked / "conversions").write_text("a file where the folder would be")
    monkeypatch.setenv("AIOT_CACHE_DIR", str(blocked))
    assert not api.convert_model("tiny_cnn", "onnx", tmp_path / "a").cached
    assert not api.convert_model("tiny_cnn", "onnx", tmp_path / "b").cached
    assert len(exports) == 2


def test_the_cache_is_trimmed_least_recently_used_first(tmp_path):
    import os

    root = tmp_path / "conversions"
    for age, name in enumerate(("old", "mid", "new")):
        (root / name).mkdir(parents=True)
        (root / name / "a.bin").write_bytes(b"x" * 100)
        os.utime(root / name, (1000 + age, 1000 + age))
    conversion_cache._trim(root, 250)
    assert sorted(p.name for p in root.iterdir()) == ["mid", "new"]
