"""What every RobustMQ quantized layer shares: the layer skeleton and the estimators.

A quantized convolution computes::

    out = conv( quantize_input(x), quantize_weight(W) ) + bias

with both hooks returning *fake-quantized* float tensors (values on the method's grid, in the
layer's float units), so training and the PyTorch reference run the same arithmetic an
integer kernel would. Rounding's gradient is the straight-through estimator (:func:`round_ste`:
forward ``round``, backward identity); clipping passes no gradient outside its range, as in
each paper. The bias (if any) stays full precision, as integer kernels keep it in int32.

Subclasses (one module per method) override the two hooks and may hold learned parameters
(PACT's clip, LSQ's steps); ``bits`` is fixed at construction and is not in the state dict,
so a quantized model is rebuilt from its name (``tiny_cnn_lsq4``) before its weights load.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def round_ste(x: Tensor) -> Tensor:
    """``round(x)`` forward, identity backward (the straight-through estimator).

    Without a gradient to pass it is ``round(x)`` alone, one pass over the tensor instead of
    three (the robustness suites evaluate a model tens of thousands of times): the same values
    bit for bit, since ``round(x) - x`` is exact in floating point (at most half a unit, on
    ``x``'s own grid) and so is adding it back."""
    if not (torch.is_grad_enabled() and x.requires_grad):
        return torch.round(x)
    return x + (torch.round(x) - x).detach()


def grad_scale(x: Tensor, scale: float) -> Tensor:
    """``x`` forward; its gradient multiplied by ``scale`` backward (LSQ's ``g``)."""
    scaled = x * scale
    return (x - scaled).detach() + scaled


def quantize_unit(x: Tensor, bits: int) -> Tensor:
    """DoReFa's ``q_k``: ``round((2^k - 1) x) / (2^k - 1)`` for ``x`` in [0, 1], rounding by
    the straight-through estimator; 2^k levels, 0 and 1 included."""
    levels = 2 ** bits - 1
    return round_ste(x * levels) / levels


def dorefa_weight(w: Tensor, bits: int) -> Tensor:
    """DoReFa's k-bit weights: ``2 q_k(tanh(w) / (2 max|tanh(w)|) + 1/2) - 1``.

    2^k levels evenly spaced on [-1, 1] (step ``2 / (2^k - 1)``; with an even count, 0 is not a
    level). The gradient reaches ``w`` through tanh and the normalisation.
    """
    t = torch.tanh(w)
    unit = t / (2 * t.abs().max().clamp_min(1e-12)) + 0.5
    return 2 * quantize_unit(unit, bits) - 1


class QuantizedLayer:
    """The hooks and facts shared by quantized convolutions and linear layers.

    Class attributes:
        method: canonical method name (``dorefa``, ``pact``, ``lsq``).
    """

    method: str = ""
    bits: int = 8

    def setup(self, bits: int) -> None:
        """Called once by ``from_float`` after the float weights are copied: set the width and
        create learned quantizer parameters (initialised from the weights where the paper does)."""
        self.bits = int(bits)
        self.register_buffer("initialized", torch.zeros((), dtype=torch.uint8))

    def quantize_weight(self, w: Tensor) -> Tensor:
        """The fake-quantized weight."""
        raise NotImplementedError

    def quantize_input(self, x: Tensor) -> Tensor:
        """The fake-quantized input activation."""
        raise NotImplementedError

    def first_batch(self) -> bool:
        """True once, at the first forward pass of a layer whose quantizer is initialised from
        data (PACT's clip, LSQ's activation step); a loaded state dict counts as initialised."""
        if bool(self.initialized):
            return False
        self.initialized.fill_(1)
        return True

    def quantizer_params(self) -> int:
        """Full-precision numbers (steps, clips) this layer keeps besides its b-bit weights."""
        return sum(p.numel() for n, p in self.named_parameters(recurse=False)
                   if n not in ("weight", "bias"))

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, method={self.method}, bits={self.bits}"


class QuantizedConv2d(QuantizedLayer, nn.Conv2d):
    """A drop-in replacement for an ``nn.Conv2d`` with quantized input and weights.

    Build it with :meth:`from_float`; hyper-parameters, weights and bias are copied.
    """

    @classmethod
    def from_float(cls, conv: nn.Conv2d, bits: int) -> QuantizedConv2d:
        """A quantized copy of ``conv`` at ``bits``."""
        layer = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride,
                    conv.padding, conv.dilation, conv.groups, conv.bias is not None,
                    conv.padding_mode)
        with torch.no_grad():
            layer.weight.copy_(conv.weight)
            if conv.bias is not None:
                layer.bias.copy_(conv.bias)
        layer.setup(bits)
        return layer.to(conv.weight.device)

    def forward(self, x: Tensor) -> Tensor:
        return self._conv_forward(self.quantize_input(x), self.quantize_weight(self.weight),
                                  self.bias)


class QuantizedLinear(QuantizedLayer, nn.Linear):
    """A drop-in replacement for an ``nn.Linear`` with quantized input and weights."""

    @classmethod
    def from_float(cls, linear: nn.Linear, bits: int) -> QuantizedLinear:
        """A quantized copy of ``linear`` at ``bits``."""
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None)
        with torch.no_grad():
            layer.weight.copy_(linear.weight)
            if linear.bias is not None:
                layer.bias.copy_(linear.bias)
        layer.setup(bits)
        return layer.to(linear.weight.device)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(self.quantize_input(x), self.quantize_weight(self.weight), self.bias)
