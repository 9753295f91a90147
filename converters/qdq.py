"""An 8-bit LSQ model as the module ONNX exports to QDQ: QuantizeLinear/DequantizeLinear pairs
with the learned scales, in a shape ONNX Runtime runs with its integer kernels.

Which models deploy is :mod:`aiot.models.quant.deploy`'s decision; this module only rewrites
a deployable one, on a copy, into a form whose arithmetic is the fake-quantized model's:

* each quantized layer quantizes its input with ``fake_quantize_per_tensor_affine`` (its
  learned step, zero point 0, uint8 after a ReLU or LSQ's signed int8 grid), exported as a
  QuantizeLinear/DequantizeLinear pair, and its weight likewise (int8, zero point 0);
* a quantized convolution followed by a BatchNorm gets it folded in: the BN's per-channel
  factor ``g = gamma / sqrt(var + eps)`` multiplies the weight's step, so the folded weight
  is the same int8 ``q`` with per-channel scales ``s_w g`` (exact); a channel with ``s_w g < 0``
  (a negative BN factor, or a step LSQ's training drove below zero) stores ``-q`` with scale
  ``|s_w g|``, since runtimes hold positive scales only (``q = -128`` there saturates at 127:
  one level);
* when the conv's output alone reaches the next quantized layer (unsigned grid) through ReLU
  and max-pooling only, it is quantized right at the conv with that layer's input step:
  ``Q(maxpool(relu(y)))`` equals ``maxpool(Q(y))`` for uint8 with zero point 0 (its clamp
  at 0 is the ReLU, and quantizing is monotonic; the ReLU then sees non-negative levels and
  changes nothing), so ONNX Runtime sees DQ→Conv→Q, which it fuses into QLinearConv. A conv
  whose output reaches float layers (tiny_cnn's last quantized one, before the
  full-precision classifier) or a residual addition (a ResNet block's second conv) runs as
  DQ→Conv in float.

What stays inexact: float rounding where the BN is folded, which may move a value at a
rounding boundary by one level, and, in every runtime's integer convolution (QLinearConv,
TFLite's and XNNPACK's int8 convs), the folded bias added as int32 on the grid ``s_x s_w``: up
to half a unit of it, a few thousandths of an output level, which moves a value one level over
where it lies that close to a boundary. Neither can be removed by the plan (the bias grid is
the kernels' own); a model that amplifies such flips shows them in its top-1 parity (the
README's trained resnet18_mnist_lsq8).

For ExecuTorch (``fmt="executorch"``) the same plan is written with the
``quantized_decomposed`` operators XNNPACK's partitioner lowers to its QS8 kernels, as PT2E's
``convert_pt2e`` leaves them: activations on int8 (LSQ's unsigned grid ``[0, 255]`` with zero
point 0 is int8 with zero point -128, the same levels), weights stored as int8 with a
per-channel dequantize. A conv whose output reaches float layers keeps its exact dequantized
float weight there (XNNPACK runs DQ→Conv→Q convolutions as integer and leaves a dequantized
one undelegated), so it runs in float inside the delegate, as in the ONNX graph.

For TFLite (``fmt="tflite"``) the operators are the same, but each integer convolution's
weight is the float ``s q`` quantized in the graph (``quantize_per_channel`` then
``dequantize_per_channel``, the form ``convert_pt2e(fold_quantize=False)`` leaves): litert-torch's
static Q/DQ conversion folds that pair into an int8 constant with the per-channel scales and
fuses DQ→Conv→Q into an int8 CONV_2D, whereas a dequantize of a stored int8 tensor does not
lower (StableHLO's ``uniform_dequantize`` wants a quantized type). The float weight is exactly
``s q``, so quantizing it gives back ``q``.
"""

from __future__ import annotations

import copy
from collections import Counter

import torch
import torch.fx
from torch import Tensor, nn

from aiot.core.errors import ConversionError
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
        self.style = "onnx"

    def use_decomposed(self, stored_levels: bool = True) -> None:
        """Switch to PT2E's ``quantized_decomposed`` Q/DQ (see the module): with the weight
        stored as int8 levels (``stored_levels``: ExecuTorch) or quantized in the graph from
        its float value (TFLite)."""
        import torch.ao.quantization.fx._decomposed  # noqa: F401 - registers quantized_decomposed

        self.style = "decomposed"
        self.register_buffer("zeros", torch.zeros(len(self.scales), dtype=torch.int64))
        self.register_buffer("levels", torch.ops.quantized_decomposed.quantize_per_channel(
            self.weight, self.scales, self.zeros, 0, -128, 127, torch.int8) if stored_levels else None)
        if stored_levels and self.output_step is not None:  # the file holds the levels only
            self.weight = None

    def _forward_decomposed(self, x: Tensor) -> Tensor:
        ops = torch.ops.quantized_decomposed
        zero = -128 if self.input_range[0] == 0 else 0  # uint8 levels as int8, shifted
        x = ops.dequantize_per_tensor(ops.quantize_per_tensor(x, self.input_step, zero, -128, 127, torch.int8),
                                      self.input_step, zero, -128, 127, torch.int8)
        levels = self.levels
        if self.output_step is not None and levels is None:
            levels = ops.quantize_per_channel(self.weight, self.scales, self.zeros, 0, -128, 127, torch.int8)
        w = self.weight if self.output_step is None else ops.dequantize_per_channel(
            levels, self.scales, self.zeros, 0, -128, 127, torch.int8)
        y = (nn.functional.conv2d(x, w, self.bias, **self.conv) if self.conv is not None
             else nn.functional.linear(x, w, self.bias))
        if self.output_step is not None:
            y = ops.dequantize_per_tensor(ops.quantize_per_tensor(y, self.output_step, -128, -128, 127, torch.int8),
                                          self.output_step, -128, -128, 127, torch.int8)
        return y

    def forward(self, x: Tensor) -> Tensor:
        if self.style == "decomposed":
            return self._forward_decomposed(x)
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
    """The layer with ``bn`` folded in, its weight ``levels * scales`` on positive per-channel
    scales: LSQ's step is a free parameter that training can drive below zero (``s q`` is
    then ``|s| (-q)``), and every runtime's int8 scale is positive (litert-torch cannot even
    write a negative one; XNNPACK refuses it at load), so the sign of ``s g`` moves into the
    levels."""
    q, step = _integer_weight(layer)
    channels = q.shape[0]
    bias = layer.bias.detach() if layer.bias is not None else torch.zeros(channels)
    g = torch.ones(channels)
    if bn is not None:
        g = bn.weight.detach() / torch.sqrt(bn.running_var + bn.eps)
        bias = (bias - bn.running_mean) * g + bn.bias.detach()
    factor = step * g
    sign = torch.where(factor < 0, -1.0, 1.0).reshape(-1, *([1] * (q.dim() - 1)))
    levels = (q * sign).clamp(-128, 127)
    scales = factor.abs()
    new_bias = bias if bn is not None or layer.bias is not None else None
    return _QDQLayer(layer, scales, levels * scales.reshape(sign.shape), new_bias)


#: The formats written with PT2E's ``quantized_decomposed`` operators (see the module); any
#: other (``onnx``, ``ort``) gets ONNX's QDQ.
DECOMPOSED = ("executorch", "tflite")


def qdq_model(model: nn.Module, fmt: str = "onnx") -> nn.Module:
    """A copy of the 8-bit LSQ ``model`` (eval mode, steps initialised) rewritten for QDQ
    export (see the module) in the style of format ``fmt``: ExecuTorch's XNNPACK, litert-torch's
    TFLite, else ONNX's QDQ; ``model`` itself is left as it is, the parity reference.

    The data flow is read from a ``torch.fx`` trace (quantized layers as leaves), so the
    folding and output quantization follow what the forward does (a ResNet block's conv1 →
    bn1 → relu → conv2), not the order modules were registered in; a model that does not
    trace keeps plain Q/DQ around each quantized layer.
    """
    _refuse_nonpositive_input_steps(model, fmt)
    export = copy.deepcopy(model).eval()
    try:
        plan = _plan(export)
    except Exception:  # noqa: BLE001 - untraceable: still exact, only without fusion
        plan = [(name, None, None) for name, m in export.named_modules()
                if isinstance(m, QuantizedLayer)]
    for name, bn_name, output_step in plan:
        layer = export.get_submodule(name)
        bn = export.get_submodule(bn_name) if bn_name else None
        rewritten = _folded(layer, bn)
        rewritten.output_step = output_step
        if fmt in DECOMPOSED:
            rewritten.use_decomposed(stored_levels=fmt == "executorch")
        _set_submodule(export, name, rewritten)
        if bn_name:
            _set_submodule(export, bn_name, nn.Identity())
    return export


def _refuse_nonpositive_input_steps(model: nn.Module, fmt: str) -> None:
    """A learned activation step at or below zero is refused in one line: a weight step's sign
    can move into the stored levels, an activation's cannot (the data make its levels at run
    time, on a positive scale), and on LSQ's unsigned grid such a layer passes zeros alone."""
    for name, layer in model.named_modules():
        step = getattr(layer, "input_step", None) if isinstance(layer, QuantizedLayer) else None
        if step is not None and float(step.detach()) <= 0:
            step = float(step.detach())
            raise ConversionError(fmt, "check", f"{name}'s learned activation step is "
                                  f"{step:.3g}: int8 scales are positive in "
                                  "every runtime", "retrain it (its input quantizer collapsed)")


class _Tracer(torch.fx.Tracer):
    def is_leaf_module(self, module, qualname):
        return isinstance(module, QuantizedLayer) or super().is_leaf_module(module, qualname)


def _plan(model: nn.Module) -> list[tuple[str, str | None, float | None]]:
    """``(layer, BatchNorm folded into it or None, output step or None)`` per quantized layer."""
    graph = _Tracer().trace(model)
    modules = dict(model.named_modules())
    calls = Counter(n.target for n in graph.nodes if n.op == "call_module")

    def module(node):
        return modules.get(node.target) if node.op == "call_module" else None

    plan = []
    for node in graph.nodes:
        layer = module(node)
        if not isinstance(layer, QuantizedLayer):
            continue
        bn_name, end = None, node
        follower = next(iter(node.users)) if len(node.users) == 1 else None
        if (isinstance(layer, nn.Conv2d) and follower is not None
                and isinstance(module(follower), nn.BatchNorm2d) and calls[follower.target] == 1):
            bn_name, end = follower.target, follower
        plan.append((node.target, bn_name, _next_step(end, module)))
    return plan


def _next_step(node, module) -> float | None:
    """The input step of the quantized layer that ``node``'s output alone reaches through
    ReLU and max-pooling (which commute with its zero-point-0 quantizer, whose clamp at 0 is
    the ReLU), when that layer quantizes on the unsigned grid; else None."""
    while len(node.users) == 1:
        node = next(iter(node.users))
        target = module(node)
        if isinstance(target, QuantizedLayer):
            return None if bool(target.input_signed) else float(target.input_step.detach())
        relu = node.op == "call_function" and node.target in (torch.relu, nn.functional.relu)
        if not (relu or isinstance(target, _MONOTONIC)):
            return None
    return None


def _set_submodule(model: nn.Module, name: str, new: nn.Module) -> None:
    parent, _, leaf = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, leaf, new)


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

