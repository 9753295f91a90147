"""BiBench's theoretical complexity (eq. 7-8): hand-counted cases and the paper's Table 3."""

import math

import pytest
import torch
from torch import nn

from aiot.models.bibench import (
    ALGORITHMS,
    BinarizedComplexity,
    binarized_complexity,
    count_binarized,
    module_complexity,
    om_comp,
    om_comp_by_algorithm,
)

SHAPE = (1, 1, 8, 8)


class Net(nn.Module):
    """conv1 (FP) -> conv2 (binarized) -> pool -> fc1 (binarized, bias) -> fc2 (FP)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1, bias=False)  # 36 params, 4*64 outputs x 9
        self.bn1 = nn.BatchNorm2d(4)  # 8
        self.act1 = nn.Hardtanh()
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1, bias=False)  # 288, 8*64 outputs x 36
        self.bn2 = nn.BatchNorm2d(8)  # 16
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Linear(8, 16)  # 128 + 16 bias, 16 outputs x 8
        self.fc2 = nn.Linear(16, 10)  # 160 + 10, 10 outputs x 16

    def forward(self, x):
        x = self.pool(self.bn2(self.conv2(self.act1(self.bn1(self.conv1(x))))))
        return self.fc2(torch.nn.functional.hardtanh(self.fc1(x.flatten(1))))


FP_PARAMS = 36 + 8 + 288 + 16 + 144 + 170  # 662
FP_MACS = 256 * 9 + 512 * 36 + 16 * 8 + 10 * 16  # 21024
BINARY_PARAMS = 288 + 128  # weights of conv2 and fc1 only
BINARY_MACS = 512 * 36 + 16 * 8  # 18560
BNN_FP_PARAMS = 36 + 8 + 16 + 16 + 170  # conv1, BNs, fc1's bias, fc2: 246
BNN_FP_MACS = 256 * 9 + 10 * 16  # conv1 and fc2: 2464


def _complexity(algorithm: str) -> BinarizedComplexity:
    torch.manual_seed(0)
    return module_complexity(Net(), algorithm, SHAPE, name="net")


def test_bnn_counts_by_hand():
    r = _complexity("bnn")
    assert (r.fp_params, r.fp_macs) == (FP_PARAMS, FP_MACS)
    assert (r.binary_params, r.binarized_fp_params) == (BINARY_PARAMS, BNN_FP_PARAMS)
    assert (r.binary_macs, r.binarized_fp_macs) == (BINARY_MACS, BNN_FP_MACS)
    assert r.r_c == pytest.approx(662 / (416 / 32 + 246))
    assert r.r_s == pytest.approx(21024 / (18560 / 64 + 2464))
    assert r.storage_bytes == 416 / 8 + 246 * 4 and r.fp_storage_bytes == 662 * 4
    assert r.to_dict()["r_c"] == r.r_c and r.algorithm == "bnn" and r.model == "net"


def test_xnor_adds_scales_and_activation_rescaling():
    r = _complexity("xnor-net")  # aliases resolve
    assert r.algorithm == "xnor" and r.binary_params == BINARY_PARAMS
    assert r.binarized_fp_params == BNN_FP_PARAMS + 8 + 16  # alpha per output channel / feature
    # conv2: |a| mean over 4x8x8 inputs, 3x3 box filter per output pixel, alpha and K multiplies;
    # fc1: |a| mean over 8 inputs, then alpha and K on 16 outputs.
    conv2 = 4 * 64 + 9 * 64 + 2 * 8 * 64
    fc1 = 8 + 2 * 16
    assert r.binarized_fp_macs == BNN_FP_MACS + conv2 + fc1
    bnn = _complexity("bnn")
    assert r.r_c < bnn.r_c and r.r_s < bnn.r_s


def test_xnorpp_and_reactnet_scale_parameters_are_counted_once():
    xnorpp = _complexity("xnorpp")  # alpha (8) x beta (8 rows) x gamma (8 cols); fc1: alpha (16)
    assert xnorpp.binarized_fp_params == BNN_FP_PARAMS + 24 + 16
    assert xnorpp.binarized_fp_macs == BNN_FP_MACS + 8 * 64 + 16
    react = _complexity("reactnet")  # alpha + one threshold per input channel / feature
    assert react.binarized_fp_params == BNN_FP_PARAMS + (8 + 4) + (16 + 8)
    assert react.binarized_fp_macs == BNN_FP_MACS + (8 * 64 + 4 * 64) + (16 + 8)


def test_dorefa_has_one_scale_per_layer():
    r = _complexity("dorefa")
    assert r.binarized_fp_params == BNN_FP_PARAMS + 2
    assert r.binarized_fp_macs == BNN_FP_MACS + 8 * 64 + 16  # one multiply per output


def test_fda_training_only_noise_modules_are_not_counted():
    torch.manual_seed(0)
    model = Net()
    r = module_complexity(model, "fda", SHAPE)
    noise = sum(p.numel() for m in model.modules() for n in ("noise_in", "noise_out")
                if hasattr(m, n) for p in getattr(m, n).parameters())
    assert noise == 2 * (36 * 16) + 2 * (8 * 16)  # they exist (training) ...
    bireal = _complexity("bireal")  # ... but inference is Bi-Real's: sign weights, channel alpha
    assert r.binary_params == bireal.binary_params
    assert r.binarized_fp_params == bireal.binarized_fp_params
    assert (r.binary_macs, r.binarized_fp_macs) == (bireal.binary_macs, bireal.binarized_fp_macs)
    assert sum(p.numel() for p in model.parameters()) == 416 + r.binarized_fp_params - 24 + noise


def test_count_binarized_needs_batch_one():
    torch.manual_seed(0)
    model = Net()
    module_complexity(model, "bnn", SHAPE)
    with pytest.raises(ValueError, match="batch of 1"):
        count_binarized(model, (2, 1, 8, 8))


def _row(algorithm: str, r_c: float, r_s: float) -> BinarizedComplexity:
    # r_c = fp_params / binarized_fp_params, r_s = fp_macs / binarized_fp_macs (nothing binary).
    return BinarizedComplexity("m", algorithm, fp_params=int(r_c * 10), fp_macs=int(r_s * 10),
                               binary_params=0, binarized_fp_params=10, binary_macs=0,
                               binarized_fp_macs=10)


def test_om_comp_formula():
    assert BinarizedComplexity("m", "bnn", 320, 640, 320, 0, 640, 0).r_c == 32
    assert BinarizedComplexity("m", "bnn", 320, 640, 320, 0, 640, 0).r_s == 64
    rows = [_row("bnn", 10, 20), _row("bnn", 30, 40)]
    assert om_comp(rows) == pytest.approx(math.sqrt((20**2 + 30**2) / 2))
    assert om_comp([_row("bnn", 13, 13)]) == pytest.approx(13)
    by = om_comp_by_algorithm([*rows, _row("xnor", 8, 6)])
    assert list(by) == ["bnn", "xnor"] and by["xnor"] == pytest.approx(math.sqrt(50))
    with pytest.raises(ValueError):
        om_comp([])
    with pytest.raises(ValueError, match="per algorithm"):
        om_comp([*rows, _row("xnor", 8, 6)])


# BiBench Table 3, "Theoretical Complexity": (r_s "Speedup", r_c "Compression", OM_comp).
PAPER_TABLE_3 = {
    "bnn": (12.60, 13.27, 12.94), "xnor": (12.26, 13.20, 12.74), "dorefa": (12.37, 13.20, 12.79),
    "bireal": (12.37, 13.20, 12.79), "xnorpp": (12.26, 13.16, 12.71),
    "reactnet": (12.26, 13.20, 12.74), "recu": (12.37, 13.20, 12.79), "fda": (12.37, 13.20, 12.79),
}


@pytest.mark.slow
def test_resnet18_imagenet_against_bibench_table_3():
    from aiot.models import get_model_spec

    spec = get_model_spec("resnet18")
    rows = {a: binarized_complexity(spec, a) for a in ALGORITHMS.names()}
    print("\n" + "".join(f"{h:>9}" for h in ("algorithm", "r_c", "paper", "r_s", "paper",
                                               "OM_comp", "paper")))
    for a, r in rows.items():
        paper_s, paper_c, paper_om = PAPER_TABLE_3[a]
        om = om_comp([r])
        values = (r.r_c, paper_c, r.r_s, paper_s, om, paper_om)
        print(f"{a:>9}" + "".join(f"{v:9.2f}" for v in values))
        # The paper's setting (ImageNet ResNet-18, 224 px) is ours: within 2 % (see the module
        # docstring of aiot.models.bibench.complexity for where the accounting differs).
        assert r.r_c == pytest.approx(paper_c, rel=0.02)
        assert r.r_s == pytest.approx(paper_s, rel=0.02)
        assert om == pytest.approx(paper_om, rel=0.02)
    # Structure of Table 3: BNN, with no factor, compresses most and is fastest; activation
    # re-scaling (XNOR) and mean-shifting (ReActNet) cost speed; statistic channel scales agree.
    assert max(rows.values(), key=lambda r: r.r_c).algorithm == "bnn"
    assert max(rows.values(), key=lambda r: r.r_s).algorithm == "bnn"
    for a in ("xnor", "reactnet"):
        assert rows[a].r_s < rows["bireal"].r_s < rows["bnn"].r_s
    assert rows["xnorpp"].r_c < rows["bireal"].r_c
    for a in ("recu", "fda"):
        assert (rows[a].r_c, rows[a].r_s) == (rows["bireal"].r_c, rows["bireal"].r_s)
    assert rows["bnn"].fp_params == 11_689_512 and rows["bnn"].binary_params == 11_157_504
