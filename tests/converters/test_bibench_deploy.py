"""Frozen BiBench models on binarized runtimes: daBNN drops Hardtanh clamps and folds
ReActNet's thresholds into BatchNorm exactly (or refuses, naming the layer); LCE runs them.

Parity is checked on logits and, stronger, on every binary activation: a single flipped sign
can move a ReActNet logit by less than the converter's atol, so each binary conv's input bits
in the reference executor are compared with PyTorch's ``x - threshold >= 0``.
"""

import numpy as np
import pytest

from tests.converters.conftest import need_toolchain, randomize_bn

torch = pytest.importorskip("torch")
pytest.importorskip("flatbuffers")

from aiot.converters.dabnn.reference import load_model, run_model
from aiot.converters.dabnn.schema import parse_model
from aiot.core.errors import ConversionError
from aiot.models import get_model_spec
from aiot.models.bibench import build_binarized, freeze
from aiot.models.binary import BinaryConv2d
from tests.converters.test_dabnn import _export, _parity

nn = torch.nn
SHAPE = (1, 28, 28)
# Thresholds a clamp to [-1, 1] decides alone (-1 and below: always +1; above 1: always -1)
# or does not (1 itself, and just inside -1): channels 0..5 of every ReActNet layer.
EDGE = np.array([-1.0, 1.0, 1.5, -2.0, np.nextafter(np.float32(1), np.float32(2)),
                 np.nextafter(np.float32(-1), np.float32(0))], np.float32)
DECIDED_PER_LAYER = 4  # -1, 1.5, -2 and 1 + ulp


def _frozen_tiny_vgg(algorithm: str, seed: int = 0, randomized: bool = True):
    """Frozen tiny_vgg: BatchNorm statistics and (ReActNet) thresholds randomized, seeded."""
    torch.manual_seed(seed)
    model = build_binarized(get_model_spec("tiny_vgg"), algorithm)
    if not randomized:  # PyTorch's identity BatchNorms: exact zeros before every sign
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.reset_parameters()
    if randomized:
        randomize_bn(model, seed, signed_gamma=True, bias=1, mean=1, var=2)
        gen = torch.Generator().manual_seed(seed + 100)
        with torch.no_grad():
            for module in model.modules():
                if isinstance(getattr(module, "threshold", None), nn.Parameter):
                    t = torch.rand(module.threshold.shape, generator=gen) - 0.5
                    t[: len(EDGE)] = torch.from_numpy(EDGE)
                    module.threshold.copy_(t)
    example = torch.randn(1, *SHAPE, generator=torch.Generator().manual_seed(seed))
    return freeze(model, "dabnn", example)


def _binary_inputs(model, path, x):
    """Per binary conv: (PyTorch's input bits, daBNN's input bits) on ``x`` (<= 16 images)."""
    captured = []

    def hook(module, args):
        t = 0 if module.threshold is None else module.threshold.view(1, -1, 1, 1)
        captured.append(((args[0] - t) >= 0).numpy())

    hooks = [m.register_forward_pre_hook(hook) for m in model.modules()
             if isinstance(m, BinaryConv2d)]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for handle in hooks:
            handle.remove()
    loaded = load_model(path)
    tensors = run_model(loaded, x.numpy(), keep_tensors=True)
    ours = [(tensors[layer.params["input"]] > 0).transpose(0, 3, 1, 2)
            for layer in loaded.model.layers if layer.type == "BinConv2D"]
    assert len(ours) == len(captured)
    return list(zip(captured, ours, strict=True))


def _assert_exact(model, path, shape, seed=1):
    """Logits within atol (and far tighter), every binary activation identical."""
    report = _parity(model, path, shape, n=16, seed=seed)
    assert report["ok"] and report["max_abs"] < 1e-4 and report["top1_agreement"] == 1.0, report
    x = torch.randn(16, *shape, generator=torch.Generator().manual_seed(seed + 1))
    for index, (want, got) in enumerate(_binary_inputs(model, path, x)):
        assert 0.02 < want.mean() < 0.98, f"binary conv {index}: degenerate signs"
        assert (want == got).all(), f"binary conv {index}: {(want != got).sum()} signs differ"
    return report


@pytest.mark.parametrize("randomized", [True, False], ids=["random", "default"])
@pytest.mark.parametrize("algorithm", ["bnn", "reactnet"])
def test_tiny_vgg_converts_exactly(tmp_path, algorithm, randomized):
    for seed in (0, 1) if randomized else (0,):
        model = _frozen_tiny_vgg(algorithm, seed, randomized)
        path = tmp_path / f"{algorithm}{seed}.dab"
        facts = _export(model, SHAPE, path)
        assert facts["ops"] == ["Affine", "AvePool", "BinConv2D", "FpConv2D", "MaxPool", "Relu"]
        assert facts["binary_convs"] == 3 and facts["dropped_clamps"] == 3
        assert facts["layers"] == 12  # no layer for the Hardtanhs
        assert facts["sign_shifts"] == 0  # no ReLU feeds a binary conv
        thresholded = algorithm == "reactnet" and randomized
        decided = 3 * DECIDED_PER_LAYER if thresholded else 0
        assert facts["constant_sign_channels"] == decided
        assert facts["folded_thresholds"] == (64 + 128 + 128 - decided if thresholded else 0)
        if not randomized:  # default BatchNorms put exact zeros before every binary conv
            assert facts["sign_nudged_channels"] == 64 + 128 + 128
        _assert_exact(model, path, SHAPE, seed=seed + 1)
    if thresholded:  # the clamp-decided channels are constants in bn1's Affine
        tensors = {t.name: t.float32_data for t in parse_model(path.read_bytes()).initializers}
        a, b = tensors["features_bn1_a"], tensors["features_bn1_b"]
        assert a[[0, 2, 3, 4]].tolist() == [0] * 4 and b[[0, 2, 3, 4]].tolist() == [1, -1, 1, -1]
        assert (a[[1, 5]] != 0).all()  # t = 1 and t just above -1 stay thresholds


def _with_threshold(conv, values):
    conv.threshold = torch.as_tensor(values, dtype=torch.float32)
    return conv


def _thresholds(seed, channels=64):
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(channels, generator=gen) - 0.5


class SharedBatchNorm(nn.Module):
    """One BatchNorm feeding two thresholded binary convs (one through a clamp and a
    max-pool): foldable only when both thresholds agree."""

    def __init__(self, same: bool):
        super().__init__()
        self.bn0 = nn.BatchNorm2d(64)
        self.clamp = nn.Hardtanh()
        self.pool = nn.MaxPool2d(3, 1, padding=1)
        self.b1 = _with_threshold(BinaryConv2d(64, 64, 3, padding=1), _thresholds(0))
        self.b2 = _with_threshold(BinaryConv2d(64, 64, 3, padding=1), _thresholds(0 if same else 1))
        self.bn1, self.bn2 = nn.BatchNorm2d(64), nn.BatchNorm2d(64)
        self.fc = nn.Linear(64 * 4 * 4, 5)

    def forward(self, x):
        y = self.bn0(x)
        z = self.bn1(self.b1(self.pool(self.clamp(y)))) + self.bn2(self.b2(y))
        return self.fc(torch.flatten(z, 1))


class Residual(nn.Module):
    """The thresholded conv's BatchNorm is also read by a full-precision add."""

    def __init__(self):
        super().__init__()
        self.bn0 = nn.BatchNorm2d(64)
        self.conv = _with_threshold(BinaryConv2d(64, 64, 3, padding=1), _thresholds(2))
        self.bn1 = nn.BatchNorm2d(64)

    def forward(self, x):
        y = self.bn0(x)
        return self.bn1(self.conv(y)) + y


def _plain(before, threshold_seed=3):
    return nn.Sequential(*before, _with_threshold(BinaryConv2d(64, 64, 3, padding=1),
                                                  _thresholds(threshold_seed)),
                         nn.BatchNorm2d(64), nn.Flatten(), nn.Linear(64 * 4 * 4, 5))


def test_a_batchnorm_shared_by_equal_thresholds_is_folded(tmp_path):
    torch.manual_seed(0)
    model = randomize_bn(SharedBatchNorm(same=True), 4, signed_gamma=True, bias=0.5)
    path = tmp_path / "shared.dab"
    facts = _export(model, (64, 4, 4), path)
    assert facts["folded_thresholds"] == 64 and facts["dropped_clamps"] == 1
    _assert_exact(model, path, (64, 4, 4))


def test_a_clamp_above_zero_decides_every_sign(tmp_path):
    """Hardtanh(0, 1) before an unthresholded binary conv: sign(clamp(v)) is +1 for all v,
    which the BatchNorm's Affine then writes as a constant."""
    torch.manual_seed(0)
    model = randomize_bn(nn.Sequential(nn.BatchNorm2d(64), nn.Hardtanh(0, 1),
                                       BinaryConv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64),
                                       nn.Flatten(), nn.Linear(64 * 4 * 4, 5)), 5)
    path = tmp_path / "relu1.dab"
    assert _export(model, (64, 4, 4), path)["constant_sign_channels"] == 64
    report = _parity(model, path, (64, 4, 4), n=16)
    assert report["ok"] and report["max_abs"] < 1e-4, report


@pytest.mark.parametrize(("model", "layer", "why"), [
    (SharedBatchNorm(same=False), "b1", ("'bn0' (bn) also feeds binary convolutions that need "
                                        "other thresholds")),
    (Residual(), "conv", "'bn0' (bn) also feeds 'add' (add)"),
    (_plain([]), "_0", "its input comes from 'input_1' (input), not from a BatchNorm"),
    (_plain([nn.BatchNorm2d(64), nn.ReLU()]), "_2", "its input comes from '_1' (relu)"),
    (_plain([nn.Conv2d(64, 64, 1), nn.Hardtanh()]), "_2", "its input comes from '_0' (conv)"),
], ids=["other-threshold", "residual", "input", "relu", "conv"])
def test_thresholds_that_cannot_fold_are_refused(tmp_path, model, layer, why):
    with pytest.raises(ConversionError) as err:
        _export(model, (64, 4, 4), tmp_path / "m.dab")
    line = err.value.one_line()
    assert err.value.stage == "lower" and "\n" not in line
    assert f"'{layer}' (bconv): binarizes x - threshold" in line
    assert "BiBench Table 4" in line and f"but {why}" in line and "LCE" in line
    assert list(tmp_path.iterdir()) == []


class ClampIntoAdd(nn.Module):
    """A clamp read by a binary conv and, through a max-pool, by a full-precision add."""

    def __init__(self):
        super().__init__()
        self.bn0, self.clamp, self.pool = nn.BatchNorm2d(64), nn.Hardtanh(), nn.MaxPool2d(3, 1, 1)
        self.conv, self.bn1 = BinaryConv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64)

    def forward(self, x):
        y = self.pool(self.clamp(self.bn0(x)))
        return self.bn1(self.conv(y)) + y


def _head(*tail):
    return nn.Sequential(nn.BatchNorm2d(64), BinaryConv2d(64, 64, 3, padding=1),
                         nn.BatchNorm2d(64), *tail)


@pytest.mark.parametrize(("model", "layer", "reader"), [
    (ClampIntoAdd(), "clamp", "'add' (add) reads the clamped values too"),
    (_head(nn.Hardtanh(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 3)), "_3",
     "'_4' (global_avgpool) reads the clamped values too"),
    (_head(nn.Hardtanh()), "_3", "the model returns the clamped values"),
], ids=["add", "pooling", "output"])
def test_a_clamp_feeding_float_layers_is_refused(tmp_path, model, layer, reader):
    with pytest.raises(ConversionError) as err:
        _export(model, (64, 4, 4), tmp_path / "m.dab")
    line = err.value.one_line()
    assert err.value.stage == "lower" and "\n" not in line
    assert f"layer '{layer}' (hardtanh): daBNN has no clamp operator" in line
    assert f"but {reader} (use ReLU before full-precision layers" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_lce_runs_reactnet_tiny_vgg_with_thresholds(tmp_path):
    need_toolchain("lce")
    from aiot.converters.lce.converter import LceConverter, _count_op
    from aiot.converters.parity import compare_outputs, run_artifact
    from aiot.converters.sign_parity import compare_signs, torch_binary_inputs

    model = _frozen_tiny_vgg("reactnet")
    path = tmp_path / "tiny_vgg.lce.tflite"
    facts = LceConverter().export(model, torch.randn(1, *SHAPE), path, {})
    assert facts["binary_convs"] == 3 and _count_op(path, "LceBconv2d") == 3
    assert "CONV_2D" in facts["ops"]  # the stem; every binary conv is an LceBconv2d
    x = torch.randn(16, *SHAPE, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(x).numpy()
    report = compare_outputs(expected, run_artifact("lce", path, x.numpy()), atol=1e-3, rtol=None)
    assert report["ok"] and report["top1_agreement"] == 1.0, report
    # A probe the export did not keep (another converter made the file) is built on its own,
    # and it too must reproduce the file's outputs exactly before its signs count.
    reference = torch_binary_inputs(model, x[:4])
    probed = LceConverter().binary_inputs(model, path, x[:4].numpy(), list(reference))
    assert compare_signs(reference, probed, {"atol": 1e-3, "rtol": None})["ok"]
