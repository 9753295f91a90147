"""RobustMQ's quantizers: each forward grid, the straight-through and learned-parameter
gradients, the first/last-layer rule, and the names the CLI takes."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from aiot.core.errors import UnknownName, UsageError
from aiot.models import get_model_spec
from aiot.models.quant import (
    BITS,
    QuantizedLayer,
    parse_quantize,
    quantizable_layers,
    quantize,
    quantized_layers,
    split_suffix,
)
from aiot.models.quant.base import dorefa_weight, round_ste
from aiot.models.quant.dorefa import dorefa_activation
from aiot.models.quant.lsq import bounds, initial_step, lsq_quantize
from aiot.models.quant.pact import pact_activation


def _levels(t: torch.Tensor) -> torch.Tensor:
    return torch.unique(t.detach().round(decimals=5))


@pytest.mark.parametrize("bits", BITS)
def test_dorefa_activations_take_2_to_the_b_levels_on_0_1(bits):
    x = torch.linspace(-1, 2, 20001)
    levels = _levels(dorefa_activation(x, bits))
    assert len(levels) == 2 ** bits
    assert float(levels.min()) == 0.0 and float(levels.max()) == 1.0
    step = 1 / (2 ** bits - 1)
    assert torch.allclose(levels / step, (levels / step).round(), atol=1e-2)


@pytest.mark.parametrize("bits", BITS)
def test_dorefa_weights_take_2_to_the_b_levels_on_minus_1_1(bits):
    w = torch.randn(64, 32, 3, 3, generator=torch.Generator().manual_seed(0))
    levels = _levels(dorefa_weight(w, bits))
    assert len(levels) == 2 ** bits  # even count: 0 is not a level
    assert float(levels.min()) == -1.0 and float(levels.max()) == 1.0
    assert not torch.isclose(levels, torch.zeros(())).any()


def test_dorefa_activation_gradient_is_one_inside_the_clip_only():
    x = torch.tensor([-0.5, 0.2, 0.7, 1.5], requires_grad=True)
    dorefa_activation(x, 4).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 0.0]


def test_round_ste_passes_the_gradient_straight_through():
    x = torch.tensor([0.2, 0.7, 1.4], requires_grad=True)
    y = round_ste(x)
    (y * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert y.tolist() == [0.0, 1.0, 1.0] and x.grad.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("bits", BITS)
def test_pact_grid_is_2_to_the_b_levels_on_0_alpha(bits):
    alpha = torch.tensor(3.0)
    levels = _levels(pact_activation(torch.linspace(-2, 6, 20001), alpha, bits))
    assert len(levels) == 2 ** bits
    assert float(levels.min()) == 0.0 and math.isclose(float(levels.max()), 3.0, rel_tol=1e-6)


def test_pact_alpha_gradient_is_one_where_x_reaches_alpha_and_x_gradient_inside():
    alpha = torch.tensor(2.0, requires_grad=True)
    x = torch.tensor([-1.0, 0.3, 1.1, 1.9, 2.5, 7.0], requires_grad=True)
    pact_activation(x, alpha, 4).sum().backward()
    assert float(alpha.grad) == 2.0  # the two inputs above alpha, nothing from the others
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("signed", [True, False])
def test_lsq_grid_is_q_n_to_q_p_steps(bits, signed):
    step = torch.tensor(0.1)
    q_n, q_p = bounds(bits, signed)
    assert q_p - q_n + 1 == 2 ** bits
    x = torch.linspace(q_n * 0.1 - 5, q_p * 0.1 + 5, 50001)
    levels = _levels(lsq_quantize(x, step, bits, signed, 1))
    assert len(levels) == 2 ** bits
    assert math.isclose(float(levels.min()), q_n * 0.1, abs_tol=1e-4)
    assert math.isclose(float(levels.max()), q_p * 0.1, abs_tol=1e-4)


def test_lsq_step_gradient_is_eq_3_scaled_by_one_over_sqrt_n_q_p():
    bits, signed, count = 4, True, 1000
    q_n, q_p = bounds(bits, signed)
    x = torch.tensor([-3.0, -0.26, 0.04, 0.33, 0.55, 2.0])
    step = torch.tensor(0.2, requires_grad=True)
    lsq_quantize(x, step, bits, signed, count).sum().backward()
    v = x / 0.2
    inside = (v > q_n) & (v < q_p)
    eq3 = torch.where(inside, -v + v.round(), v.clamp(q_n, q_p))  # Esser et al. eq. 3
    expected = float(eq3.sum()) / math.sqrt(count * q_p)
    assert math.isclose(float(step.grad), expected, rel_tol=1e-5)


def test_lsq_steps_start_at_two_mean_abs_over_sqrt_q_p():
    conv = nn.Conv2d(8, 16, 3)
    layer = quantize(nn.Sequential(nn.Conv2d(1, 8, 1), conv, nn.Conv2d(16, 2, 1)), "lsq", 4)[1]
    assert math.isclose(float(layer.weight_step.detach()),
                        2 * float(conv.weight.abs().mean()) / math.sqrt(7), rel_tol=1e-5)
    x = torch.rand(4, 8, 10, 10)
    layer.train()
    layer(x)
    assert math.isclose(float(layer.input_step), initial_step(x, 4, False), rel_tol=1e-5)
    assert int(layer.input_signed) == 0
    assert layer.quantizer_params() == 2


@pytest.mark.parametrize("method", ["dorefa", "pact", "lsq"])
def test_first_and_last_layers_stay_full_precision(method):
    model = quantize(get_model_spec("tiny_cnn").build(), method, 4)
    assert [n for n, _ in quantized_layers(model)] == ["features.conv2", "features.conv3"]
    assert type(model.features.conv1) is nn.Conv2d and type(model.classifier) is nn.Linear
    assert model.quantized_with.option == f"{method}:4"


def test_first_and_last_rule_on_resnet18():
    model = get_model_spec("resnet18_mnist").build()
    names = [n for n, m in model.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    assert [n for n, _ in quantizable_layers(model)] == names[1:-1]
    quantize(model, "pact", 8)
    kept = [n for n, m in model.named_modules()
            if isinstance(m, (nn.Conv2d, nn.Linear)) and not isinstance(m, QuantizedLayer)]
    assert kept == [names[0], names[-1]]


@pytest.mark.parametrize("method", ["dorefa", "pact", "lsq"])
def test_quantized_model_trains_every_quantizer_parameter(method):
    torch.manual_seed(0)
    model = quantize(get_model_spec("tiny_cnn").build(), method, 4).train()
    nn.functional.cross_entropy(model(torch.randn(8, 1, 28, 28)), torch.arange(8)).backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
    state = model.state_dict()
    again = quantize(get_model_spec("tiny_cnn").build(), method, 4)
    again.load_state_dict(state)  # learned steps and clips travel with the weights
    model.eval(), again.eval()
    x = torch.randn(2, 1, 28, 28)
    assert torch.equal(model(x), again(x))


@pytest.mark.parametrize("text, option, suffix", [
    ("lsq:4", "lsq:4", "lsq4"), ("DoReFa:8", "dorefa:8", "dorefa8"), ("pact2", "pact:2", "pact2"),
])
def test_parse_quantize(text, option, suffix):
    chosen = parse_quantize(text)
    assert (chosen.option, chosen.suffix) == (option, suffix)


@pytest.mark.parametrize("text, error, words", [
    ("lsq:3", UsageError, "3 bits is not one of"), ("lsq:32", UsageError, "not one of"),
    ("lsq", UsageError, "not METHOD:BITS"), ("lsq:x", UsageError, "x bits"),
    ("awq:4", UnknownName, "awq"),
])
def test_parse_quantize_refuses(text, error, words):
    with pytest.raises(error, match=words):
        parse_quantize(text)


def test_split_suffix_knows_methods_only():
    assert split_suffix("lsq4").option == "lsq:4"
    assert split_suffix("bnn") is None and split_suffix("cifar") is None
    assert split_suffix("v2") is None
    with pytest.raises(UsageError):
        split_suffix("dorefa5")


def test_quantize_refuses_what_it_cannot_do():
    with pytest.raises(UsageError, match="no layer to quantize"):
        quantize(nn.Sequential(nn.Conv2d(1, 2, 1), nn.Linear(2, 2)), "lsq", 4)
    model = quantize(get_model_spec("tiny_cnn").build(), "lsq", 4)
    with pytest.raises(UsageError, match="already"):
        quantize(model, "pact", 4)
