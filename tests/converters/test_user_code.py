"""The user's own PyTorch code as a model: file.py:factory, module:factory and .pt2 programs
convert like zoo models (same converters, parity, sidecars, cache)."""

from __future__ import annotations

import json
import textwrap

import pytest

torch = pytest.importorskip("torch")

from aiot.converters.api import convert_model
from aiot.converters.sidecar import read_sidecar
from aiot.core.errors import UsageError

MYNET = textwrap.dedent("""
    import torch
    from torch import nn

    from helpers_of_mynet import width  # the user's own sibling module


    class MyNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, width(), 3, padding=1)
            self.head = nn.Linear(width(), 5)

        def forward(self, x):
            return self.head(torch.relu(self.conv(x)).mean((2, 3)))


    def make():
        return MyNet(), torch.randn(1, 3, 16, 16)


    def bare():
        return MyNet()


    def broken():
        raise RuntimeError("checkpoint missing")


    def not_a_module():
        return 42


    def scripted():
        return torch.jit.script(MyNet().eval())


    def traced():
        example = torch.randn(1, 3, 16, 16)
        return torch.jit.trace(MyNet().eval(), example), example
""")


@pytest.fixture
def mynet(tmp_path):
    (tmp_path / "helpers_of_mynet.py").write_text("def width():\n    return 8\n")
    (tmp_path / "mynet.py").write_text(MYNET)
    return tmp_path / "mynet.py"


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["tflite", "onnx", "executorch"])
def test_a_factory_converts_with_parity(mynet, tmp_path, fmt):
    res = convert_model(f"{mynet}:make", fmt, tmp_path / "out")
    assert res.parity["ok"] and res.parity["max_abs"] < 1e-4 and res.parity["n"] == 8
    sidecar = read_sidecar(res.artifact)
    source = sidecar["source"]
    assert source["kind"] == "code" and source["model"] == "mynet.py:make"
    assert len(source["sha256"]) == 64 and str(tmp_path) not in json.dumps(source)
    assert sidecar["input"]["shape"] == [3, 16, 16] and sidecar["num_classes"] is None
    assert res.artifact.name.startswith(f"mynet.make-{source['sha256'][:8]}")
    again = convert_model(f"{mynet}:make", fmt, tmp_path / "out")
    assert again.cached and again.sha256 == res.sha256


def test_the_cache_follows_the_source_file(mynet, tmp_path, fresh_conversions):
    first = convert_model(f"{mynet}:make", "onnx", tmp_path / "out")
    mynet.write_text(MYNET.replace("padding=1", "padding=1, bias=False"))
    second = convert_model(f"{mynet}:make", "onnx", tmp_path / "out")
    assert not second.cached and second.artifact != first.artifact


def test_a_bare_module_needs_an_input_shape(mynet, tmp_path):
    with pytest.raises(UsageError, match="gives no example inputs") as caught:
        convert_model(f"{mynet}:bare", "onnx", tmp_path)
    assert "--input-shape" in caught.value.hint
    res = convert_model(f"{mynet}:bare", "onnx", tmp_path, input_shapes={"x": [1, 3, 8, 8]})
    assert read_sidecar(res.artifact)["input"]["shape"] == [3, 8, 8]


@pytest.mark.parametrize("factory, message", [
    ("broken", "mynet.py:broken raised RuntimeError: checkpoint missing"),
    ("not_a_module", "returned int, not an nn.Module"),
    ("mak", "has no function 'mak'"),
])
def test_bad_factories_are_one_line_errors(mynet, tmp_path, factory, message):
    with pytest.raises(UsageError, match=message):
        convert_model(f"{mynet}:{factory}", "onnx", tmp_path)
    assert not list(tmp_path.glob("*.onnx"))


@pytest.mark.parametrize("factory, kind", [("scripted", "RecursiveScriptModule"),
                                           ("traced", "TopLevelTracedModule")])
def test_a_torchscript_module_from_a_factory_gets_its_own_hint(mynet, tmp_path, factory, kind):
    with pytest.raises(UsageError, match=f"returned a TorchScript module \\({kind}\\)") as caught:
        convert_model(f"{mynet}:{factory}", "onnx", tmp_path)
    assert "before torch.jit.script/trace" in caught.value.hint
    assert "_save_for_lite_interpreter" in caught.value.hint  # the .ptl aiot runs as it is


def test_a_file_that_does_not_import_is_one_line(tmp_path):
    (tmp_path / "bad.py").write_text("import no_such_package_here\n")
    with pytest.raises(UsageError, match="importing bad.py failed"):
        convert_model(f"{tmp_path / 'bad.py'}:make", "onnx", tmp_path)
    with pytest.raises(UsageError, match="no module named 'no_such_pkg.nets'"):
        convert_model("no_such_pkg.nets:make", "onnx", tmp_path)


@pytest.mark.slow
def test_a_torch_export_program_converts(mynet, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    import mynet as user

    model, example = user.make()
    program = tmp_path / "net.pt2"
    torch.export.save(torch.export.export(model.eval(), (example,)), program)
    res = convert_model(str(program), "tflite", tmp_path / "out")
    assert res.parity["ok"] and res.parity["max_abs"] < 1e-4
    assert read_sidecar(res.artifact)["source"]["kind"] == "program"


def test_converting_an_artifact_is_refused(tmp_path):
    art = tmp_path / "m.tflite"
    art.write_bytes(b"\x18\0\0\0TFL3" + b"\0" * 32)
    with pytest.raises(UsageError, match="already a tflite artifact"):
        convert_model(str(art), "onnx", tmp_path)
