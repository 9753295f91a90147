"""DoReFa-Net's k-bit weights and activations (Zhou et al., 2016, "DoReFa-Net: Training Low
Bitwidth Convolutional Neural Networks with Low Bitwidth Gradients", arXiv:1606.06160, eq. 9
and §2.4), as RobustMQ uses it.

* Weights: ``w_q = 2 q_k( tanh(w) / (2 max|tanh(w)|) + 1/2 ) - 1`` with
  ``q_k(x) = round((2^k - 1) x) / (2^k - 1)``: 2^k levels on [-1, 1], gradient through tanh
  and the normalisation, rounding by the straight-through estimator.
* Activations: ``q_k(clip(x, 0, 1))``: 2^k levels on [0, 1]; the gradient is 1 inside the
  clip range and 0 outside. The grid is unsigned: a negative input becomes 0, as in the paper
  (its activations follow a ReLU).

DoReFa has no learned quantizer parameter; the weight grid is per layer (one max).
"""

from __future__ import annotations

from torch import Tensor

from aiot.models.quant.base import (
    QuantizedConv2d,
    QuantizedLinear,
    dorefa_weight,
    quantize_unit,
)


def dorefa_activation(x: Tensor, bits: int) -> Tensor:
    """``q_k(clip(x, 0, 1))`` with the clipped straight-through gradient."""
    return quantize_unit(x.clamp(0.0, 1.0), bits)


class _DoReFa:
    method = "dorefa"

    def quantize_weight(self, w: Tensor) -> Tensor:
        return dorefa_weight(w, self.bits)

    def quantize_input(self, x: Tensor) -> Tensor:
        return dorefa_activation(x, self.bits)


class DoReFaConv2d(_DoReFa, QuantizedConv2d):
    """DoReFa convolution."""


class DoReFaLinear(_DoReFa, QuantizedLinear):
    """DoReFa linear layer."""


#: The drop-in layers, read by :func:`aiot.models.quant.quantize`.
LAYERS = (DoReFaConv2d, DoReFaLinear)
