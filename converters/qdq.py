"""An 8-bit LSQ model as the module ONNX exports to QDQ: QuantizeLinear/DequantizeLinear pairs
with the learned scales, in a shape ONNX Runtime runs with its integer kernels.

Which models deploy is :mod:`aiot.models.quant.deploy`'s decision; this module only rewrites
a deployable one, on a copy, into a form whose arithmetic is the fake-quantized model's:

* each quantized layer quantizes its input with ``fake_quantize_per_tensor_affine`` (its
  learned step, zero point 0, uint8 after a ReLU or LSQ's signed int8 grid), exported as a
  QuantizeLinear/DequantizeLinear pair, and its weight likewise (int8, zero point 0);
* a quantized convolution followed by a BatchNorm gets it folded in: the BN's per-channel
  factor ``g = gamma / sqrt(var + eps)`` multiplies the weight's step, so the folded weight
  is the same int8 ``q`` with per-channel scales ``s_w g`` (exact); a channel with ``g < 0``
  stores ``-q`` with scale ``s_w |g|`` (``q = -128`` there saturates at 127: one level);
* when the conv's output reaches the next quantized layer through ReLU and max-pooling only,
  it is quantized right at the conv with that layer's input step: ``Q(maxpool(relu(y)))``
  equals ``maxpool(Q(y))`` for uint8 with zero point 0 (ReLU is the saturation at 0, and
  quantizing is monotonic), so the ReLU goes and ONNX Runtime sees DQ→Conv→Q, which it fuses
  into QLinearConv. A conv whose output reaches float layers (the last quantized one, before
  the full-precision classifier) runs as DQ→Conv in float.

What stays: float rounding where the BN is folded, which may move a value at a rounding
boundary by one level (see the parity report).
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor, nn

from aiot.models import get_model_spec
from aiot.models.quant import build_quantized, parse_quantize
from aiot.models.quant.base import QuantizedLayer

#: How many seeded example inputs set an untrained model's activation steps (LSQ starts them
#: from the first batch it sees; a conversion without weights sees this one).
CALIBRATION_BATCH = 8

#: Modules between a conv and the next quantizer that commute with a uint8 zero-point-0 Q.
_MONOTONIC = (nn.ReLU, nn.MaxPool2d)


class _QDQLayer(nn.Module):
    """A quantized conv or linear layer written with explicit Q/DQ for export."""

    def __init__(self, layer, scales: Tensor, weight: Tensor, bias: Tensor | None) -> None:
        super().__init__()
        self.conv = ({"stride": layer.stride, "padding": layer.padding, "dilation": layer.dilation,
                      "groups": layer.groups} if isinstance(layer, nn.Conv2d) else None)
        self.input_step = float(layer.input_step.detach())
        self.input_range = (-128, 127) if bool(layer.input_signed) else (0, 255)
        self.register_buffer("scales", scales.detach().float().clone())
        self.register_buffer("weight", weight.detach().clone())
        self.register_buffer("bias", None if bias is None else bias.detach().clone())
        self.output_step: float | None = None

    def forward(self, x: Tensor) -> Tensor:
        x = torch.fake_quantize_per_tensor_affine(x, self.input_step, 0, *self.input_range)
        zeros = torch.zeros(len(self.scales), dtype=torch.int32)
        w = torch.fake_quantize_per_channel_affine(self.weight, self.scales, zeros, 0, -128, 127)
        if self.conv is not None:
            y = nn.functional.conv2d(x, w, self.bias, **self.conv)
        else:
            y = nn.functional.linear(x, w, self.bias)
        if self.output_step is not None:
            y = torch.fake_quantize_per_tensor_affine(y, self.output_step, 0, 0, 255)
        return y


def _integer_weight(layer) -> tuple[Tensor, Tensor]:
    """``(q, step)``: the layer's weight as LSQ's int8 levels (as floats) and its step."""
    step = layer.weight_step.detach()
    return torch.round((layer.weight.detach() / step).clamp(-128, 127)), step


def _folded(layer, bn: nn.BatchNorm2d | None) -> _QDQLayer:
    q, step = _integer_weight(layer)
    channels = q.shape[0]
    bias = layer.bias.detach() if layer.bias is not None else torch.zeros(channels)
    if bn is None:
        return _QDQLayer(layer, step.expand(channels), q * step, layer.bias)
    g = bn.weight.detach() / torch.sqrt(bn.running_var + bn.eps)
    sign = torch.where(g < 0, -1.0, 1.0).reshape(-1, *([1] * (q.dim() - 1)))
    levels = (q * sign).clamp(-128, 127)
    scales = step * g.abs()
    new_bias = (bias - bn.running_mean) * g + bn.bias.detach()
    return _QDQLayer(layer, scales, levels * scales.reshape(sign.shape), new_bias)


def qdq_model(model: nn.Module) -> nn.Module:
    """A copy of the 8-bit LSQ ``model`` (eval mode, steps initialised) rewritten for QDQ
    export (see the module); ``model`` itself is left as it is, the parity reference."""
    export = copy.deepcopy(model).eval()
    for container in [m for m in export.modules() if isinstance(m, nn.Sequential)]:
        names = list(container._modules)
        for i, name in enumerate(names):
            layer = container._modules[name]
            if not isinstance(layer, QuantizedLayer):
                continue
            follower = container._modules[names[i + 1]] if i + 1 < len(names) else None
            bn = follower if isinstance(follower, nn.BatchNorm2d) else None
            rewritten = _folded(layer, bn)
            container._modules[name] = rewritten
            if bn is not None:
                container._modules[names[i + 1]] = nn.Identity()
            _quantize_output(container, names, i + (2 if bn is not None else 1), rewritten)
    for parent in export.modules():  # quantized layers outside a Sequential: Q/DQ, no folding
        for name, child in list(parent.named_children()):
            if isinstance(child, QuantizedLayer):
                setattr(parent, name, _folded(child, None))
    return export


def _quantize_output(container: nn.Sequential, names: list[str], start: int,
                     rewritten: _QDQLayer) -> None:
    """Quantize ``rewritten``'s output with the next quantized layer's step when only ReLU
    and max-pooling lie between them in ``container`` (and at least one ReLU: the output
    must be non-negative for uint8), dropping the ReLUs then redundant."""
    between = []
    for name in names[start:]:
        module = container._modules[name]
        if isinstance(module, QuantizedLayer) and not bool(module.input_signed):
            if any(isinstance(m, nn.ReLU) for _, m in between):
                rewritten.output_step = float(module.input_step.detach())
                for relu_name, m in between:
                    if isinstance(m, nn.ReLU):
                        container._modules[relu_name] = nn.Identity()
            return
        if not isinstance(module, _MONOTONIC):
            return
        between.append((name, module))


def build_quantized_source(ref, weights=None, seed: int = 0):
    """``(spec, model)``: the zoo model of ``ref`` (``tiny_cnn_lsq8``) quantized, with
    ``weights`` (a state dict of ``aiot train --quantize``) or else its seeded init, whose
    activation steps are set from :data:`CALIBRATION_BATCH` seeded example inputs (LSQ
    initialises them from the first batch), in eval mode; ``seed`` seeds both."""
    spec = get_model_spec(ref.name)
    torch.manual_seed(seed)
    model = build_quantized(spec, parse_quantize(ref.quantize), weights)
    with torch.no_grad():
        model(spec.example_input(batch=CALIBRATION_BATCH, seed=seed))
    return spec, model

