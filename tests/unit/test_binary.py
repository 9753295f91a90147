"""BinaryConv2d: the binary semantics LCE and daBNN execute, and a trainable gradient."""

import pytest

torch = pytest.importorskip("torch")

from aiot.models.binary import BinaryConv2d, binary_sign


def test_sign_of_zero_is_plus_one_and_gradient_is_clipped_identity():
    x = torch.tensor([-2.0, -0.5, 0.0, 0.5, 2.0], requires_grad=True)
    y = binary_sign(x)
    assert y.tolist() == [-1.0, -1.0, 1.0, 1.0, 1.0]
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]


def test_padding_is_minus_one_before_the_sign():
    conv = BinaryConv2d(1, 1, 3, padding=1)
    with torch.no_grad():
        conv.weight.fill_(1.0)
    out = conv(torch.ones(1, 1, 3, 3))  # corners see 4 ones and 5 padded -1s
    assert out[0, 0, 0, 0].item() == -1.0 and out[0, 0, 1, 1].item() == 9.0


def test_alpha_scales_each_output_channel():
    conv = BinaryConv2d(2, 2, 1, scale=True)
    with torch.no_grad():
        conv.weight.copy_(torch.tensor([[[[0.5]], [[-0.5]]], [[[2.0]], [[2.0]]]]))
    out = conv(torch.ones(1, 2, 1, 1))
    assert out.flatten().tolist() == [0.0, 4.0]  # (1 - 1) * 0.5 and (1 + 1) * 2.0


def test_zero_padding_is_refused_because_it_is_not_binary():
    with pytest.raises(ValueError, match="pad_value must be -1 or \\+1"):
        BinaryConv2d(1, 1, 3, padding=1, pad_value=0.0)


def test_inference_graph_is_traceable_by_exporters():
    conv = BinaryConv2d(1, 2, 3, padding=1).eval()
    with torch.no_grad():
        traced = torch.jit.trace(conv, torch.randn(1, 1, 5, 5))
    x = torch.randn(1, 1, 5, 5)
    assert torch.equal(traced(x), conv(x))
