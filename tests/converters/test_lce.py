"""LCE: a binarized PyTorch model becomes LceBconv2d ops that match PyTorch in LCE's interpreter.

Needs the ``lce`` toolchain environment (TensorFlow 2.16 + LCE + NumPy < 2), which
``scripts/bootstrap.sh`` installs.
"""

import pytest

from aiot.converters import format_table
from aiot.converters.api import convert_model
from aiot.converters.sidecar import read_sidecar
from aiot.core import toolchains
from aiot.core.errors import ConversionError, MissingDependency

torch = pytest.importorskip("torch")


def _need_lce():
    from tests.converters.conftest import need_toolchain

    need_toolchain("lce")


@pytest.fixture(scope="module")
def lce_bnn(tmp_path_factory):
    _need_lce()
    return convert_model("tiny_bnn", "lce", tmp_path_factory.mktemp("lce"))


@pytest.mark.slow
def test_every_binary_conv_becomes_an_lce_bconv(lce_bnn):
    side = read_sidecar(lce_bnn.artifact)
    ops = side["converter"]["ops"]
    assert "CUSTOM:LceBconv2d" in ops and "CUSTOM:LceQuantize" in ops
    assert side["converter"]["binary_convs"] == 3
    # the stride-2 binary conv is padded before binarizing: PADV2, never a fused SAME
    assert "PADV2" in ops
    assert side["toolchain"]["larq-compute-engine"] == "0.16.0"


@pytest.mark.slow
def test_lce_interpreter_matches_pytorch_on_noise_and_real_images(lce_bnn):
    parity = lce_bnn.parity
    assert parity["ok"] and parity["max_abs"] < 1e-3 and parity["top1_agreement"] == 1.0
    assert parity["dataset"]["name"] == "fashion-mnist" and parity["dataset"]["top1_agreement"] == 1.0


@pytest.mark.slow
def test_float_stride2_padding_is_not_misfused(tmp_path):
    """LCE's converter turns a symmetric pad before a stride-2 conv into SAME, which pads
    (0, 1) on even sizes; our emitter must dodge it (error 4.9 before the fix)."""
    _need_lce()
    from torch import nn

    from aiot.converters.graph import lower
    from aiot.converters.lce.converter import write_graph
    from aiot.converters.parity import run_artifact
    from aiot.converters.tflite import tflite_ops
    from aiot.models.binary import BinaryConv2d

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 64, 7, stride=2, padding=3), nn.BatchNorm2d(64),
                          BinaryConv2d(64, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)).eval()
    example = torch.randn(1, 3, 32, 32)
    graph_file, weights_file, binary = write_graph(lower(model, example, "lce"), example, tmp_path)
    from aiot.converters.lce.converter import BUILD_SCRIPT

    toolchains.run_script("lce", BUILD_SCRIPT, [str(graph_file), str(weights_file), str(tmp_path / "m.tflite")])
    assert "CUSTOM:LceBconv2d" in tflite_ops(tmp_path / "m.tflite") and binary == 1
    inputs = torch.randn(4, 3, 32, 32)
    actual = run_artifact("lce", tmp_path / "m.tflite", inputs.numpy())
    with torch.no_grad():
        expected = model(inputs).numpy()
    assert abs(actual - expected).max() < 1e-3


@pytest.mark.slow
def test_a_float_model_is_refused_with_a_reason(tmp_path):
    _need_lce()
    with pytest.raises(ConversionError, match="no binary convolutions"):
        convert_model("tiny_cnn", "lce", tmp_path)
    assert not list(tmp_path.glob("*.tflite"))


def test_missing_toolchain_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("AIOT_TOOLCHAINS_DIR", str(tmp_path / "none"))
    row = next(r for r in format_table() if r["name"] == "lce")
    assert not row["available"] and row["hint"] == "run: aiot toolchains install lce"
    with pytest.raises(MissingDependency) as info:
        convert_model("tiny_bnn", "lce", tmp_path)
    assert info.value.hint == "run: aiot toolchains install lce"


def test_a_separate_zero_padding_is_refused_before_the_toolchain_runs(tmp_path):
    from torch import nn

    from aiot.converters.graph import lower
    from aiot.converters.lce.converter import write_graph
    from aiot.models.binary import BinaryConv2d

    model = nn.Sequential(nn.ZeroPad2d(1), BinaryConv2d(8, 8, 3), nn.BatchNorm2d(8)).eval()
    example = torch.randn(1, 8, 6, 6)
    with pytest.raises(ConversionError, match="'_0' is a separate zero padding"):
        write_graph(lower(model, example, "lce"), example, tmp_path)


FACTORISED = '''
import torch
from torch import nn


class Factorised(nn.Module):
    """Inception's factorised 7x7: a 1x7 then a 7x1 conv, padded (0, 3) and (3, 0), in
    CamelCase modules (torch.fx renames those nodes: Branch7x7 -> branch7x7)."""

    def __init__(self):
        super().__init__()
        self.Stem = nn.Sequential(nn.Conv2d(1, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64))
        self.Branch1x7 = nn.Sequential(nn.Conv2d(64, 64, (1, 7), padding=(0, 3), bias=False), nn.BatchNorm2d(64))
        self.Branch7x1 = nn.Sequential(nn.Conv2d(64, 64, (7, 1), padding=(3, 0), bias=False), nn.BatchNorm2d(64))
        self.Head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))

    def forward(self, x):
        return self.Head(self.Branch7x1(self.Branch1x7(self.Stem(x))))


def make():
    torch.manual_seed(0)
    return Factorised().eval(), torch.randn(1, 1, 20, 20)
'''


@pytest.mark.slow
def test_non_square_binary_kernels_convert_with_sign_parity(tmp_path):
    """A 1x7 and a 7x1 binary conv (Inception) keep their shape and padding in LCE; daBNN,
    whose kernels take one size, refuses them by name."""
    _need_lce()
    (tmp_path / "factorised.py").write_text(FACTORISED)
    res = convert_model(f"{tmp_path / 'factorised.py'}:make", "lce", tmp_path / "out", binarize="bnn")
    side = read_sidecar(res.artifact)
    assert side["converter"]["binary_convs"] == 2
    signs = side["parity"]["signs"]
    assert [layer["layer"] for layer in signs["binary_layers"]] == ["Branch1x7.0", "Branch7x1.0"]
    assert signs["min_sign_agreement"] > 0.99 and res.parity["ok"]
    with pytest.raises(ConversionError, match="kernel .*differs between height and width"):
        convert_model(f"{tmp_path / 'factorised.py'}:make", "dabnn", tmp_path / "out", binarize="bnn")


@pytest.mark.parametrize("size", range(5, 18))
@pytest.mark.parametrize(("kernel", "stride", "pad"), [(3, 2, 0), (2, 2, 0), (3, 2, 1), (3, 3, 1)])
def test_ceil_mode_padding_gives_pytorchs_output_size(size, kernel, stride, pad):
    from aiot.converters.lce.build import _ceil_extra

    padded = size + 2 * pad
    extra = _ceil_extra(padded, kernel, stride, pad)
    valid = (padded + extra - kernel) // stride + 1
    pool = torch.nn.MaxPool2d(kernel, stride, pad, ceil_mode=True)
    assert valid == pool(torch.zeros(1, 1, size, size)).shape[-1]


@pytest.mark.slow
def test_binarized_squeezenet_converts(tmp_path):
    """SqueezeNet's binary convs keep their bias (folded as an identity BatchNorm) and its
    ceil_mode max pooling is padded at the end (both refused before)."""
    _need_lce()
    res = convert_model("squeezenet_mnist", "lce", tmp_path, binarize="bnn")
    signs = read_sidecar(res.artifact)["parity"]["signs"]
    assert res.parity["ok"] and len(signs["binary_layers"]) == 24 and signs["min_sign_agreement"] > 0.99
