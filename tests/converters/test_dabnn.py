"""daBNN (.dab): hand-written flatbuffer, bit packing, refusals, and NumPy-reference parity."""

import shutil
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from aiot.converters import dabnn
from aiot.converters.api import build_source_model, convert_model
from aiot.converters.dabnn.emit import emit
from aiot.converters.dabnn.reference import check_model, in_place_hazards
from aiot.converters.dabnn.schema import (
    LAYER_TYPES,
    Layer,
    build_model,
    pack_bits,
    parse_model,
    unpack_bits,
    words_per_row,
)
from aiot.converters.graph import lower
from aiot.converters.parity import compare_outputs
from aiot.converters.sidecar import read_sidecar
from aiot.core.errors import AccuracyMismatch, ArtifactError, ConversionError, UsageError
from tests.converters.conftest import randomize_bn

torch = pytest.importorskip("torch")
pytest.importorskip("flatbuffers")
nn = torch.nn
BinaryConv2d = pytest.importorskip("aiot.models.binary").BinaryConv2d
CONVERTER = dabnn.DabnnConverter()
TINY_OPS = ["Affine", "AvePool", "BinConv2D", "FpConv2D", "MaxPool", "Relu"]


_randomize_bn = partial(randomize_bn, signed_gamma=True, bias=3, mean=10, var=50)


def _export(model, shape, path):
    return CONVERTER.export(model.eval(), torch.randn(1, *shape), path, {})


def _parity(model, path, shape, n=6, seed=1):
    x = torch.randn(n, *shape, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        expected = model(x).reshape(n, -1).numpy()
    return compare_outputs(expected, CONVERTER.reference_outputs(path, x.numpy()), atol=1e-3,
                           rtol=None)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return convert_model("tiny_bnn", "dabnn", tmp_path_factory.mktemp("dabnn"), dataset_samples=0)


def test_tiny_bnn_converts_with_parity(tiny):
    assert tiny.artifact.name == "tiny_bnn.dabnn.dab"  # extension != format name
    assert tiny.parity["ok"] and tiny.parity["max_abs"] < 1e-3 and tiny.parity["n"] == 8
    assert tiny.parity["top1_agreement"] == 1.0 and tiny.parity.get("min_top1") is None
    side = read_sidecar(tiny.artifact)
    facts = side["converter"]
    assert side["backend"] is None and side["toolchain"]["flatbuffers"]
    assert facts["ops"] == TINY_OPS and facts["binary_convs"] == 3 and facts["dab_version"] == 2
    assert facts["layers"] == 13 and facts["output"] == "classifier" and facts["layout"] == "NHWC"
    # relu1 -> pool1 feeds bconv2: one sign shift; default BatchNorms put exact zeros on the
    # popcount lattice of every channel of bn2 and bn3, so all 64 + 128 are nudged
    assert facts["sign_shifts"] == 1 and facts["sign_nudged_channels"] == 256  # bn2 + bn3
    # bconv3 (64 -> 128, stride 2) has a 7x7 output: odd, which daBNN's ARMv8 kernel rejects
    assert facts["device_warnings"] == []  # every ARMv8 kernel precondition holds for tiny_bnn


def test_random_batchnorm_statistics_are_folded(tmp_path):
    _, model = build_source_model("tiny_bnn")
    weights = tmp_path / "weights.pt"
    torch.save(_randomize_bn(model).state_dict(), weights)
    res = convert_model("tiny_bnn", "dabnn", tmp_path, weights=weights, dataset_samples=0)
    assert res.parity["ok"] and res.parity["max_abs"] < 1e-3, res.parity
    assert read_sidecar(res.artifact)["converter"]["sign_nudged_channels"] == 0


class Mixed(nn.Module):
    """Alpha-scaled and plain binary convs, a residual add written identity-first (Add
    overwrites input1, so the emitter must swap it), concat, padded max pooling, a float
    conv with bias, and a linear layer on a flattened 4-D map (weights permuted CHW->HWC)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 64, 3, padding=1, bias=True)
        self.bn0 = nn.BatchNorm2d(64)
        self.b1 = BinaryConv2d(64, 64, 3, padding=1, scale=True)
        self.bn1 = nn.BatchNorm2d(64)
        self.b2 = BinaryConv2d(128, 128, 1)
        self.bn2 = nn.BatchNorm2d(128)
        self.pool = nn.MaxPool2d(3, 2, padding=1)
        self.avg = nn.AvgPool2d(2, 2)
        self.fc = nn.Linear(128 * 2 * 2, 7)

    def forward(self, x):
        x = self.bn0(self.stem(x))
        y = x + self.bn1(self.b1(x))
        z = self.bn2(self.b2(torch.cat([y, x], 1)))
        return self.fc(torch.flatten(self.avg(self.pool(z)), 1))


def test_every_emitted_layer_matches_pytorch(tmp_path):
    torch.manual_seed(0)
    model = _randomize_bn(Mixed(), seed=3)
    path = tmp_path / "mixed.dab"
    facts = _export(model, (3, 8, 8), path)
    assert facts["ops"] == ["Add", "Affine", "AvePool", "BinConv2D", "Concat", "FpConv2D",
                            "MaxPool"]
    report = _parity(model, path, (3, 8, 8))
    assert report["ok"], report
    add = next(layer for layer in parse_model(path.read_bytes()).layers if layer.type == "Add")
    assert add.params["input1"] == "bn1"  # swapped: x is read again by the concat


def test_zero_inputs_binarize_like_pytorch(tmp_path):
    """ReLU zeros are +1 in PyTorch but -1 in daBNN's packing; the sign shift fixes that."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.ReLU(), BinaryConv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64),
                          nn.Flatten(), nn.Linear(64 * 4 * 4, 3))
    path = tmp_path / "relu.dab"
    assert _export(model, (64, 4, 4), path)["sign_shifts"] == 1
    assert _parity(model, path, (64, 4, 4))["ok"]
    zeros = np.zeros((1, 64, 4, 4), np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(zeros)).numpy()
    assert np.abs(CONVERTER.reference_outputs(path, zeros) - expected).max() < 1e-3


def test_without_sign_nudges_default_batchnorm_zeros_flip(tmp_path, monkeypatch, fresh_conversions):
    """The nudges are what keeps exact BatchNorm zeros on PyTorch's side (sign(0) = +1)."""
    from aiot.converters.dabnn import emit as dabnn_emit

    monkeypatch.setattr(dabnn_emit, "keep_signs", lambda a, b, coef, shift, taps: (b, 0))
    with pytest.raises(AccuracyMismatch):
        convert_model("tiny_bnn", "dabnn", tmp_path, dataset_samples=0)


@pytest.mark.parametrize(("shape", "align", "per_row"), [
    ((2, 3, 3, 64), False, 9),  # C == 64: packed as is, 576 bits = 9 words
    ((2, 3, 3, 128), True, 18),  # multiple of 128: alignment adds nothing
    ((2, 3, 3, 192), True, 28),  # 1728 bits -> 1792 (14 x 128): one zero word per filter
    ((3, 1, 1, 64), True, 2),  # aligned C=64 1x1: 64 bits padded to 128
])
def test_bit_packing_round_trip(shape, align, per_row):
    gen = np.random.default_rng(0)
    signs = np.where(gen.random(shape) < 0.5, -1.0, 1.0)
    words = pack_bits(signs, align)
    assert words.dtype == np.dtype("<u8") and words.size == shape[0] * per_row
    assert words_per_row(int(np.prod(shape[1:])), align) == per_row
    bits = unpack_bits(words, shape, align)
    hwc = int(np.prod(shape[1:]))
    assert bits.shape == (shape[0], 64 * per_row)
    np.testing.assert_array_equal(bits[:, :hwc] * 2.0 - 1, signs.reshape(shape[0], -1))
    assert not bits[:, hwc:].any()  # alignment padding is zero bits


def test_bit_order_is_lsb_first_and_positive_is_one():
    values = -np.ones((1, 1, 1, 128))
    values[0, 0, 0, [0, 65, 127]] = 1
    words = pack_bits(values, True)
    assert words.tolist() == [1, (1 << 1) | (1 << 63)]
    assert pack_bits(np.zeros((1, 1, 1, 64)), False).tolist() == [0]  # 0 is not > 0: a -1 bit
    with pytest.raises(ArtifactError, match="words"):
        unpack_bits(words[:1], (1, 1, 1, 128), True)


def test_file_reparses_to_the_emitted_layers(tiny):
    raw = tiny.artifact.read_bytes()
    parsed = parse_model(raw)
    _, model = build_source_model("tiny_bnn")
    graph = lower(model, torch.zeros(1, 1, 28, 28), "dabnn")
    emitted, _ = emit(graph)
    assert parsed.layers == emitted.layers and parsed.version == 2
    assert [i.shape for i in parsed.inputs] == [(1, 28, 28, 1)]
    assert [t.name for t in parsed.initializers] == [t.name for t in emitted.initializers]
    for got, want in zip(parsed.initializers, emitted.initializers, strict=True):
        assert (got.shape, got.data_type, got.align_hwc_to_128) == (
            want.shape, want.data_type, want.align_hwc_to_128)
        data = "bin_data" if want.data_type == "Bit" else "float32_data"
        np.testing.assert_array_equal(getattr(got, data), np.ravel(getattr(want, data)))
    assert build_model(parsed) == raw  # the writer is deterministic and the reader loses nothing
    assert [layer.type for layer in parsed.layers][:5] == [
        "FpConv2D", "Affine", "Relu", "MaxPool", "Affine"]  # the last: bconv2's sign shift


def test_slot_ids_follow_dab_fbs(tiny):
    """Read with flatbuffers' bare Table at the vtable offsets of dab.fbs's field order."""
    from flatbuffers import number_types as N
    from flatbuffers.table import Table

    raw = tiny.artifact.read_bytes()

    def slot(table, field_id):  # a field's vtable entry sits at 4 + 2 * id
        return table.Offset(4 + 2 * field_id)

    def items(table, field_id):
        start = table.Vector(slot(table, field_id))
        return [Table(raw, table.Indirect(start + 4 * i))
                for i in range(table.VectorLen(slot(table, field_id)))]

    root = Table(raw, int.from_bytes(raw[:4], "little"))
    assert root.Get(N.Uint32Flags, root.Pos + slot(root, 3)) == 2  # Model.version
    layers, tensors = items(root, 0), items(root, 1)  # Model.layers, Model.initializers
    assert len(layers) == 13 and len(items(root, 2)) == 1  # Model.inputs
    # Layer.type FpConv2D (0) is the default and left out, as flatc's builders do
    assert slot(layers[0], 0) == 0 and slot(layers[0], 1) and not slot(layers[0], 2)
    binary = [t for t in layers if slot(t, 2)]  # Layer.bin_conv2d_param
    assert len(binary) == 3
    assert binary[0].Get(N.Int8Flags, binary[0].Pos + slot(binary[0], 0)) == 8  # BinConv2D
    assert LAYER_TYPES.index("BinConv2D") == 8
    param = Table(raw, binary[0].Indirect(binary[0].Pos + slot(binary[0], 2)))
    assert param.String(param.Pos + slot(param, 6)) == b"features_bconv2"  # BinConv2D.output
    pads = param.Vector(slot(param, 3))  # BinConv2D.pads
    assert [param.Get(N.Int32Flags, pads + 4 * i) for i in range(4)] == [1, 1, 1, 1]
    bits = [t for t in tensors if slot(t, 0) and t.Get(N.Int8Flags, t.Pos + slot(t, 0)) == 1]
    names = [t.String(t.Pos + slot(t, 4)) for t in bits]  # Tensor.name
    assert names == [f"features_bconv{i}_weight".encode() for i in (2, 3, 4)]
    assert [bool(slot(t, 5)) for t in bits] == [False, True, True]  # align_hwc_to_128: C != 64
    assert all(slot(t, 1) and not slot(t, 2) for t in bits)  # bin_data, no float32_data


class _BConv(nn.Module):
    def __init__(self, conv, after=None, in_ch=64, size=4):
        super().__init__()
        self.conv, self.bn = conv, nn.BatchNorm2d(conv.out_channels)
        self.after = after
        self.shape = (in_ch, size, size)

    def forward(self, x):
        y = self.conv(x)
        return self.bn(self.after(y) if self.after is not None else y)


@pytest.mark.parametrize(("model", "match"), [
    (_BConv(BinaryConv2d(32, 64, 3, padding=1), in_ch=32), r"32 input channels.*multiple of 64"),
    (_BConv(BinaryConv2d(64, 64, 3, padding=1), after=nn.ReLU()), "followed by relu"),
    (_BConv(BinaryConv2d(64, 64, 3, padding=1, pad_value=1.0)), r"pads with \+1"),
    (_BConv(BinaryConv2d(64, 64, 3, padding=1), size=5, in_ch=64), None),  # control: fine
])
def test_binary_rules_are_refused_naming_the_layer(tmp_path, model, match):
    path = tmp_path / "m.dab"
    if match is None:
        _export(model, model.shape, path)
        return
    with pytest.raises(ConversionError, match=match) as err:
        _export(model, model.shape, path)
    assert err.value.stage == "lower" and "'conv'" in err.value.message
    assert list(tmp_path.iterdir()) == []


def test_float_models_are_refused_in_one_line(tmp_path):
    with pytest.raises(ConversionError) as err:
        convert_model("tiny_cnn", "dabnn", tmp_path)
    assert err.value.format == "dabnn" and err.value.stage == "lower"
    assert err.value.one_line() == (
        "dabnn conversion failed at lower: this model has no binary convolutions "
        "(daBNN is for binarized models: use tiny_bnn, or --opt precision=fp32 for daBNN's "
        "float form of a full-precision model)")
    assert list(tmp_path.iterdir()) == []


def test_daBNN_fp32_form_of_a_float_model_converts_with_parity(tmp_path):
    res = convert_model("tiny_cnn", "dabnn", tmp_path, options={"precision": "fp32"},
                        dataset_samples=0)
    assert res.artifact.name == "tiny_cnn.precision-fp32.dabnn.dab"
    sidecar = read_sidecar(res.artifact)
    assert sidecar["converter"]["precision"] == "fp32" and sidecar["converter"]["binary_convs"] == 0
    assert "BinConv2D" not in sidecar["converter"]["ops"] and "FpConv2D" in sidecar["converter"]["ops"]
    assert res.parity["ok"] and res.parity["max_abs"] <= 1e-3 and res.parity["top1_agreement"] == 1
    with pytest.raises(ConversionError, match="has binary convolutions"):
        convert_model("tiny_bnn", "dabnn", tmp_path, options={"precision": "fp32"})
    with pytest.raises(UsageError, match="precision must be one of bnn, fp32"):
        convert_model("tiny_cnn", "dabnn", tmp_path, options={"precision": "int8"})


@pytest.mark.parametrize(("extra", "shape", "match"), [
    (nn.ReLU6(), (64, 4, 4), "ReLU6"),
    (nn.AvgPool2d(3, 1, padding=1), (64, 4, 4), "padded average pooling"),
    (nn.MaxPool2d(2, 2, ceil_mode=True), (64, 5, 5), "ceil_mode"),
    (nn.Identity(), (64, 4, 6), "non-square"),
    (nn.ZeroPad2d(1), (64, 4, 4), r"\(pad\): daBNN has no such layer"),
])
def test_layers_dabnn_lacks_are_refused(tmp_path, extra, shape, match):
    model = nn.Sequential(extra, BinaryConv2d(64, 64, 1), nn.BatchNorm2d(64))
    with pytest.raises(ConversionError, match=match):
        _export(model, shape, tmp_path / "m.dab")


class PreActivation(nn.Module):
    """BatchNorm on x while x is still needed for the shortcut: daBNN's in-place Affine
    would overwrite it."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(64)
        self.conv = BinaryConv2d(64, 64, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(64)

    def forward(self, x):
        return self.bn2(self.conv(self.bn(x))) + x


def test_in_place_overwrites_are_refused(tmp_path):
    with pytest.raises(ConversionError, match="overwrote it in place"):
        _export(PreActivation(), (64, 4, 4), tmp_path / "m.dab")


def test_in_place_hazards_are_found_in_files():
    from aiot.converters.dabnn.schema import Input, Model

    model = Model([Layer("Relu", {"input": "x", "output": "r"}),
                   Layer("Relu", {"input": "x", "output": "s"})], [], [Input("x", (1, 2, 2, 4))], 2)
    assert in_place_hazards(model) == ["layer 's' reads 'x' after 'r' overwrote it in place"]


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "missing", "version"])
def test_damaged_artifacts_give_a_clear_error(tiny, tmp_path, damage):
    artifact = tmp_path / "tiny_bnn.dab"
    shutil.copy(tiny.artifact, artifact)
    raw = artifact.read_bytes()
    if damage == "truncate":
        artifact.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        artifact.write_bytes(b"\xff" * 64)
    elif damage == "empty":
        artifact.write_bytes(b"")
    elif damage == "missing":
        artifact.unlink()
    else:
        parsed = parse_model(raw)
        parsed.version = 1
        artifact.write_bytes(build_model(parsed))
    with pytest.raises(ArtifactError, match="dabnn model"):
        CONVERTER.reference_outputs(artifact, np.zeros((1, 1, 28, 28), np.float32))


def test_every_truncation_is_an_artifact_error(tiny):
    raw = tiny.artifact.read_bytes()
    for cut in range(0, len(raw), max(1, len(raw) // 97)):
        with pytest.raises(ArtifactError):
            check_model(parse_model(raw[:cut], "cut"), "cut")


def test_shapes_daBNN_arm_kernels_assert_on_are_reported():
    """A 64-channel 3x3 binary conv with an odd output pixel count converts (the reference
    executor runs it) but would trip an assertion on ARMv8: the sidecar must say so."""
    from torch import nn

    from aiot.models.binary import BinaryConv2d

    model = nn.Sequential(nn.Conv2d(1, 64, 3, padding=1), nn.BatchNorm2d(64),
                          BinaryConv2d(64, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)).eval()
    _, facts = emit(lower(model, torch.zeros(1, 1, 14, 14), "dabnn"))
    assert any("bconv_3x3_64_opt4" in w and "7x7x64" in w for w in facts["device_warnings"])


RUNTIME = Path(__file__).parent / "fixtures" / "dabnn_runtime"


def test_reference_executor_matches_what_dabnn_itself_computed():
    """daBNN's own ``run`` (built from its source, on aarch64) loaded this emitted file and
    logged the classifier for an input of ones; aiot's executor must give the same numbers."""
    logged = [float(line.rsplit(":", 1)[1]) for line in
              (RUNTIME / "run-all-ones.txt").read_text().splitlines()
              if "] classifier: " in line]
    assert len(logged) == 10
    ones = np.ones((1, 1, 28, 28), dtype=np.float32)
    ours = CONVERTER.reference_outputs(RUNTIME / "tiny_bnn.dabnn.dab", ones).reshape(-1)
    # daBNN logs six significant digits: |v| < 30 leaves at most 5e-5 of rounding
    assert np.abs(ours - np.array(logged)).max() < 1e-4, (ours, logged)
