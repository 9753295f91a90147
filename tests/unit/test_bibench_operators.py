"""BiBench's eight binarized operators: forward values and gradients on hand-computed cases,
binarize(), freeze() and the Table-4 deployability verdicts."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from torch import nn

from aiot.core.errors import ConversionError, UnknownName, UsageError
from aiot.models import get_model_spec
from aiot.models.bibench import (
    ALGORITHMS,
    binarize,
    binarized_layers,
    build_binarized,
    freeze,
    get_algorithm,
    update_schedules,
    verdict,
)
from aiot.models.bibench.base import polynomial_derivative, sign_with, ste_derivative
from aiot.models.bibench.fda import MAX_TERMS, fourier_derivative
from aiot.models.bibench.recu import TAU_BEGIN, TAU_END, recu_weight

POINTS = torch.tensor([-1.5, -0.5, 0.0, 0.5, 1.5])


def _linear(alg: str, weight, bias=None):
    """A binarized 2->len(weight) linear layer of ``alg`` with the given weights."""
    plain = nn.Linear(len(weight[0]), len(weight), bias=bias is not None)
    with torch.no_grad():
        plain.weight.copy_(torch.tensor(weight))
        if bias is not None:
            plain.bias.copy_(torch.tensor(bias))
    return get_algorithm(alg).linear.from_float(plain)


def _conv(alg: str, weight, padding=0, stride=1):
    w = torch.tensor(weight, dtype=torch.float32)
    plain = nn.Conv2d(w.shape[1], w.shape[0], w.shape[2], stride=stride, padding=padding, bias=False)
    with torch.no_grad():
        plain.weight.copy_(w)
    return get_algorithm(alg).conv.from_float(plain)


def _grad_of_input(layer, x):
    x = x.clone().requires_grad_(True)
    layer.train()
    layer(x).sum().backward()
    return x.grad


# --- sign estimators ------------------------------------------------------------------------

def test_sign_maps_zero_to_plus_one_and_estimators_have_the_papers_shapes():
    assert sign_with(POINTS, ste_derivative).tolist() == [-1, -1, 1, 1, -1 + 2]
    assert ste_derivative(POINTS).tolist() == [0, 1, 1, 1, 0]
    # Bi-Real eq. 16: 2+2a on [-1, 0), 2-2a on [0, 1), 0 elsewhere.
    assert polynomial_derivative(POINTS).tolist() == [0, 1, 2, 1, 0]
    # FDA: the derivative of n terms of (4/pi) sum sin((2i+1) w t)/(2i+1) at t = 0 is 4wn/pi.
    for terms in (1, 3):
        assert float(fourier_derivative(terms)(torch.zeros(1))) == pytest.approx(4 * (math.pi / 2) * terms / math.pi)


def test_sign_with_passes_the_estimator_as_gradient():
    x = POINTS.clone().requires_grad_(True)
    sign_with(x, polynomial_derivative).sum().backward()
    assert x.grad.tolist() == [0, 1, 2, 1, 0]


# --- forward values, one hand-computed case per algorithm -----------------------------------
# x = [0.5, -1.5] binarizes to [+1, -1]; W = [[0.2, -0.6], [-0.1, -0.3]] to [[+1, -1], [-1, -1]],
# so the binary dot products are [2, 0].
X = torch.tensor([[0.5, -1.5]])
W = [[0.2, -0.6], [-0.1, -0.3]]


def test_bnn_is_the_plain_binary_dot_product():
    assert _linear("bnn", W)(X).tolist() == [[2.0, 0.0]]


def test_xnor_scales_by_channel_mean_abs_weight_and_mean_abs_activation():
    # alpha = [0.4, 0.2], K = mean(|0.5|, |-1.5|) = 1.0
    assert _linear("xnor", W)(X)[0].tolist() == pytest.approx([0.8, 0.0])
    assert _linear("xnor", W)(X * 2)[0].tolist() == pytest.approx([1.6, 0.0])  # K follows the input


def test_dorefa_uses_one_scale_per_layer_and_full_gradient_for_weights():
    # alpha = mean(0.2, 0.6, 0.1, 0.3) = 0.3 for every output
    assert _linear("dorefa", W)(X)[0].tolist() == pytest.approx([0.6, 0.0])
    big = _linear("dorefa", [[2.0, -0.5]])
    big(X).sum().backward()
    assert big.weight.grad[0, 0] != 0  # |w| > 1 still gets a gradient (unclipped STE)
    bnn = _linear("bnn", [[2.0, -0.5]])
    bnn(X).sum().backward()
    assert bnn.weight.grad[0, 0] == 0  # BNN's clipped STE stops it


def test_bireal_scales_per_channel_and_uses_the_polynomial_gradient():
    assert _linear("bireal", W)(X)[0].tolist() == pytest.approx([0.8, 0.0])
    layer = _linear("bireal", [[1.0, 1.0]])
    x = torch.tensor([[0.5, -0.25]])
    grad = _grad_of_input(layer, x)
    # d out / d x_i = alpha * w_sign_i * poly'(x_i) = 1 * [2-1, 2-0.5]
    assert grad[0].tolist() == pytest.approx([1.0, 1.5])


def test_reactnet_binarizes_around_a_learned_threshold():
    layer = _linear("reactnet", [[1.0, 1.0]])
    with torch.no_grad():
        layer.threshold.copy_(torch.tensor([0.6, -2.0]))
    # x - t = [-0.1, 0.5] -> [-1, +1]: dot 0
    assert layer(X)[0].tolist() == pytest.approx([0.0])
    x = torch.tensor([[0.5, -1.5]], requires_grad=True)
    layer(x).sum().backward()
    # eq. 22: the threshold's gradient is minus the input's
    assert layer.threshold.grad.tolist() == pytest.approx((-x.grad[0]).tolist())


def test_xnorpp_learns_channel_row_and_column_factors():
    model = nn.Sequential(nn.Conv2d(1, 1, 1), nn.Conv2d(1, 2, 1, bias=False), nn.Flatten(),
                          nn.Linear(2 * 3 * 2, 2))
    with torch.no_grad():
        model[1].weight.copy_(torch.tensor([[[[1.0]]], [[[-1.0]]]]))
    binarize(model, "xnorpp", (1, 1, 3, 2))  # the probe pass sizes beta and gamma
    layer = model[1]
    assert layer.beta.shape == (3,) and layer.gamma.shape == (2,)
    with torch.no_grad():
        layer.alpha.copy_(torch.tensor([2.0, 3.0]))
        layer.beta.copy_(torch.tensor([1.0, 10.0, 100.0]))
        layer.gamma.copy_(torch.tensor([1.0, -1.0]))
    out = layer(torch.ones(1, 1, 3, 2))  # signs: +1 for channel 0, -1 for channel 1
    assert out[0, 0].tolist() == [[2, -2], [20, -20], [200, -200]]
    assert out[0, 1].tolist() == [[-3, 3], [-30, 30], [-300, 300]]
    assert layer.scale_params() == 2 + 3 + 2


def test_recu_balances_standardizes_and_clamps_to_quantiles():
    torch.manual_seed(0)
    w = torch.randn(4, 8, 3, 3) * 0.1 + 0.05
    clamped = recu_weight(w, 0.9)
    standard = (w.flatten(1) - w.flatten(1).mean(1, keepdim=True))
    standard = standard / (standard.std(1, keepdim=True, unbiased=False) + 1e-5)
    assert float(clamped.max()) == pytest.approx(float(torch.quantile(standard.flatten(), 0.9)), abs=1e-5)
    assert float(clamped.min()) == pytest.approx(float(torch.quantile(standard.flatten(), 0.1)), abs=1e-5)
    layer = _conv("recu", w.tolist())
    update_schedules(nn.Sequential(layer), 1, 5)
    assert layer.tau == pytest.approx(TAU_BEGIN)
    update_schedules(nn.Sequential(layer), 5, 5)
    assert layer.tau == pytest.approx(TAU_END)
    # Balancing: the binary weights are the signs of w minus its channel mean (the clamp
    # keeps signs, its band straddles 0), not of w itself (mostly positive here).
    from aiot.models.bibench.base import hard_sign

    assert torch.equal(hard_sign(clamped), hard_sign(standard.view_as(w)))
    assert not torch.equal(hard_sign(clamped), hard_sign(w))


def test_fda_grows_its_series_and_drops_noise_adaptation_at_inference():
    layer = _conv("fda", torch.randn(2, 3, 3, 3).tolist(), padding=1)
    update_schedules(nn.Sequential(layer), 1, 4)
    assert layer.terms == 1
    update_schedules(nn.Sequential(layer), 4, 4)
    assert layer.terms == MAX_TERMS
    with torch.no_grad():
        layer.noise_out.weight.normal_()
    x = torch.randn(1, 3, 4, 4)
    layer.train()
    noisy = layer(x)
    layer.eval()
    plain = layer(x)
    reference = _conv("bireal", layer.weight.tolist(), padding=1).eval()(x)  # sign * mean|W|
    assert torch.allclose(plain, reference, atol=1e-6) and not torch.allclose(noisy, plain)


def test_binarized_conv_pads_with_minus_one_before_the_sign():
    layer = _conv("bnn", [[[[1.0] * 3] * 3]], padding=1)
    # a 1x1 input of +0.3: the centre tap is +1, the 8 padded taps -1
    assert layer(torch.full((1, 1, 1, 1), 0.3)).item() == -7.0


# --- binarize() -----------------------------------------------------------------------------

def test_binarize_keeps_first_and_last_layer_and_replaces_feeding_relus():
    spec = get_model_spec("tiny_vgg")
    model = build_binarized(spec, "bnn")
    names = [name for name, _ in binarized_layers(model)]
    assert names == ["features.conv2", "features.conv3", "features.conv4"]
    assert type(model.features.conv1) is nn.Conv2d and type(model.classifier) is nn.Linear
    acts = {n: type(m).__name__ for n, m in model.named_modules() if n.startswith("features.relu")}
    # relu1..3 feed binarized convs (relu1 through the max-pool); relu4 feeds the classifier.
    assert acts == {"features.relu1": "Hardtanh", "features.relu2": "Hardtanh",
                    "features.relu3": "Hardtanh", "features.relu4": "ReLU"}


def test_binarize_copies_weights_so_fine_tuning_starts_from_the_fp_model():
    torch.manual_seed(0)
    spec = get_model_spec("tiny_vgg")
    fp = spec.build()
    conv2 = fp.features.conv2.weight.clone()
    binarized = binarize(fp, "reactnet", (1, 1, 28, 28))
    assert torch.equal(binarized.features.conv2.weight, conv2)


def test_unknown_algorithm_suggests_close_names_and_aliases_resolve():
    with pytest.raises(UnknownName) as excinfo:
        get_algorithm("xnr")
    assert "xnor" in (excinfo.value.hint or "")
    assert get_algorithm("Bi-Real").name == "bireal" and get_algorithm("xnor++").name == "xnorpp"
    assert ALGORITHMS.names() == ["bnn", "xnor", "dorefa", "bireal", "xnorpp", "reactnet", "recu", "fda"]


def test_a_model_with_nothing_between_first_and_last_layer_is_refused():
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten(), nn.Linear(4, 2))
    with pytest.raises(UsageError, match="no layer to binarize"):
        binarize(model, "bnn")


@pytest.mark.parametrize("algorithm", ALGORITHMS.names())
def test_every_algorithm_trains_a_step_on_resnet(algorithm):
    spec = get_model_spec("resnet18_mnist")
    model = build_binarized(spec, algorithm).train()
    out = model(torch.randn(2, 1, 28, 28))
    out.sum().backward()
    grads = [layer.weight.grad for _, layer in binarized_layers(model)]
    assert len(grads) == 19 and all(g is not None and g.shape == layer.weight.shape
                                    for g, (_, layer) in zip(grads, binarized_layers(model), strict=True))
    assert any(float(g.abs().sum()) > 0 for g in grads)


# --- freeze() and deployability --------------------------------------------------------------

@pytest.mark.parametrize("algorithm", ["bnn", "dorefa", "bireal", "reactnet", "recu", "fda"])
def test_freeze_gives_binary_conv2d_layers_that_compute_the_same(algorithm):
    from aiot.models.binary import BinaryConv2d

    torch.manual_seed(1)
    spec = get_model_spec("tiny_vgg")
    model = build_binarized(spec, algorithm)
    for _, layer in binarized_layers(model):
        if hasattr(layer, "threshold"):
            with torch.no_grad():
                layer.threshold.uniform_(-0.5, 0.5)
    x = torch.randn(4, 1, 28, 28)
    frozen = freeze(model, "lce", x)
    binary = [m for m in frozen.modules() if isinstance(m, BinaryConv2d)]
    assert len(binary) == 3 and not binarized_layers(frozen)
    assert torch.allclose(frozen(x), model.eval()(x), atol=1e-5)
    assert (algorithm == "reactnet") == all(b.threshold is not None for b in binary)
    assert (algorithm == "bnn") == all(b.alpha() is None for b in binary)


@pytest.mark.parametrize("algorithm", ["xnor", "xnorpp"])
def test_freeze_refuses_input_or_position_dependent_scales(algorithm):
    model = build_binarized(get_model_spec("tiny_vgg"), algorithm)
    with pytest.raises(ConversionError, match="not deployable"):
        freeze(model, "lce")


def test_table4_verdicts():
    table = {(a, lib): verdict(a, lib).deployable for a in ALGORITHMS.names() for lib in ("lce", "dabnn")}
    assert table[("xnor", "lce")] == table[("xnor", "dabnn")] == "no"
    assert table[("xnorpp", "lce")] == table[("xnorpp", "dabnn")] == "no"
    assert table[("reactnet", "lce")] == "yes" and table[("reactnet", "dabnn")] == "conditional"
    for a in ("bnn", "dorefa", "bireal", "recu", "fda"):
        assert table[(a, "lce")] == table[(a, "dabnn")] == "yes"
    assert "re-scales activations" in verdict("xnor", "lce").reason
    assert "spatial" in verdict("xnorpp", "dabnn").reason
