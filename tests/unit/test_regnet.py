"""RegNetX-600MF from its published design: widths, depths, size and cost."""

from __future__ import annotations

import pytest
import torch

from aiot.models import count_complexity, get_model_spec
from aiot.models.regnet import (
    BOTTLENECK,
    DEPTH,
    DEPTHS,
    GROUP_WIDTH,
    W0,
    WA,
    WIDTHS,
    WM,
    regnet_widths,
)


def test_design_parameters_give_the_papers_stages():
    assert regnet_widths(DEPTH, W0, WA, WM, GROUP_WIDTH, BOTTLENECK) == (DEPTHS, WIDTHS)
    assert DEPTHS == (1, 3, 5, 7) and WIDTHS == (48, 96, 240, 528) and sum(DEPTHS) == DEPTH


def test_regnetx_600mf_has_6_2_m_parameters_and_600_m_flops():
    spec = get_model_spec("regnetx_600mf")
    counted = count_complexity(spec.build(), (1, *spec.input.shape))
    assert counted.params == pytest.approx(6.2e6, rel=0.01)
    assert counted.macs == pytest.approx(600e6, rel=0.01)
    assert spec.reference_flops_m == 600.0 and spec.paper == "RobustMQ"


def test_group_convs_have_width_24_groups():
    model = get_model_spec("regnetx_600mf").build()
    groups = {m.in_channels // m.groups for m in model.modules()
              if isinstance(m, torch.nn.Conv2d) and m.groups > 1}
    assert groups == {GROUP_WIDTH}


@pytest.mark.parametrize("name", ["regnetx_600mf_mnist", "regnetx-600mf-cifar", "regnetx600mf"])
def test_small_variants_and_aliases_run(name):
    spec = get_model_spec(name)
    assert spec.build()(spec.example_input()).shape == (1, spec.num_classes)
