"""LSQ: learned step size quantization (Esser et al., 2020, "Learned Step Size Quantization",
ICLR 2020, arXiv:1902.08153, eq. 1-5), as RobustMQ uses it.

``x_q = round(clip(x / s, Q_N, Q_P)) s`` with one learned step ``s`` for the layer's weights and
one for its input activations:

* weights are signed, ``Q_N = -2^(b-1)``, ``Q_P = 2^(b-1) - 1``; activations after a ReLU are
  unsigned, ``Q_N = 0``, ``Q_P = 2^b - 1`` (an input whose first batch holds negative values,
  such as MobileNetV2's linear bottlenecks, gets the signed grid);
* rounding passes its gradient straight through, so ``d x_q / d s`` is eq. 3:
  ``-x/s + round(x/s)`` inside the range, ``Q_N`` or ``Q_P`` outside;
* each step's gradient is scaled by ``g = 1 / sqrt(N Q_P)`` (eq. 4-5), ``N`` the number of
  weights, or of input features of one sample for activations;
* steps start at ``2 mean(|x|) / sqrt(Q_P)``: from the float weights for weights, from the
  first training batch for activations.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from aiot.models.quant.base import QuantizedConv2d, QuantizedLinear, grad_scale, round_ste


def bounds(bits: int, signed: bool) -> tuple[int, int]:
    """``(Q_N, Q_P)`` of a ``bits``-wide signed or unsigned grid."""
    if signed:
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return 0, 2 ** bits - 1


def lsq_quantize(x: Tensor, step: Tensor, bits: int, signed: bool, count: int) -> Tensor:
    """``round(clip(x / s, Q_N, Q_P)) s`` with the step gradient scaled by ``1/sqrt(count Q_P)``."""
    q_n, q_p = bounds(bits, signed)
    s = grad_scale(step, 1.0 / math.sqrt(count * q_p))
    return round_ste((x / s).clamp(q_n, q_p)) * s


def initial_step(x: Tensor, bits: int, signed: bool) -> float:
    """LSQ's start: ``2 mean(|x|) / sqrt(Q_P)`` (a small positive value for an all-zero x)."""
    return max(2 * float(x.detach().abs().mean()) / math.sqrt(bounds(bits, signed)[1]), 1e-8)


class _LSQ:
    method = "lsq"

    def setup(self, bits: int) -> None:
        super().setup(bits)
        device = self.weight.device
        self.weight_step = nn.Parameter(torch.tensor(initial_step(self.weight, bits, True),
                                                     device=device))
        self.input_step = nn.Parameter(torch.tensor(1.0, device=device))
        self.register_buffer("input_signed", torch.zeros((), dtype=torch.uint8, device=device))

    def quantize_weight(self, w: Tensor) -> Tensor:
        return lsq_quantize(w, self.weight_step, self.bits, True, w.numel())

    def quantize_input(self, x: Tensor) -> Tensor:
        if self.first_batch():
            with torch.no_grad():
                self.input_signed.fill_(int(bool((x < 0).any())))
                self.input_step.fill_(initial_step(x, self.bits, bool(self.input_signed)))
        return lsq_quantize(x, self.input_step, self.bits, bool(self.input_signed), x[0].numel())


class LSQConv2d(_LSQ, QuantizedConv2d):
    """LSQ convolution."""


class LSQLinear(_LSQ, QuantizedLinear):
    """LSQ linear layer."""


#: The drop-in layers, read by :func:`aiot.models.quant.quantize`.
LAYERS = (LSQConv2d, LSQLinear)
