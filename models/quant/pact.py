"""PACT: parameterized clipping activation (Choi et al., 2018, "PACT: Parameterized Clipping
Activation for Quantized Neural Networks", arXiv:1805.06085, eq. 1-3), as RobustMQ uses it.

* Activations: ``y = clip(x, 0, alpha)`` with one learned ``alpha`` per layer, then
  ``y_q = round(y (2^k - 1) / alpha) alpha / (2^k - 1)`` (2^k levels on [0, alpha]). The
  gradient is the paper's eq. 3: the straight-through estimator treats ``y_q`` as ``y``, so
  ``d y_q / d alpha`` is 1 where ``x >= alpha`` and 0 elsewhere, and ``d y_q / d x`` is 1 on
  ``[0, alpha)`` and 0 elsewhere.
* Weights: DoReFa's (:func:`aiot.models.quant.base.dorefa_weight`), as in the paper.

``alpha``'s start: the paper starts it at 10 and decays it by L2 while training from scratch;
aiot fine-tunes from the float model, so ``alpha`` starts at the 99.9th percentile of the first
training batch's activations (at 10, a 2-bit grid would have steps of 3.3 on activations of
order 1), and is trained without decay.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from aiot.models.quant.base import QuantizedConv2d, QuantizedLinear, dorefa_weight

#: How much of the first batch's activation distribution ``alpha`` starts above.
ALPHA_QUANTILE = 0.999
_SAMPLE = 65536  # torch.quantile's input is capped; a strided sample is plenty


def pact_activation(x: Tensor, alpha: Tensor, bits: int) -> Tensor:
    """``clip(x, 0, alpha)`` quantized to 2^k levels; PACT's gradients (see the module)."""
    clipped = torch.minimum(torch.relu(x), alpha)  # d/d alpha = 1 exactly where x > alpha
    levels = 2 ** bits - 1
    step = alpha.detach() / levels
    quantized = torch.round(clipped.detach() / step) * step
    return clipped + (quantized - clipped.detach()).detach()


def initial_alpha(x: Tensor) -> float:
    """The :data:`ALPHA_QUANTILE` quantile of ``relu(x)`` (at least a small positive value)."""
    flat = torch.relu(x.detach()).flatten().float()
    if flat.numel() > _SAMPLE:
        flat = flat[:: flat.numel() // _SAMPLE + 1]
    return max(float(torch.quantile(flat, ALPHA_QUANTILE)), 1e-3)


class _PACT:
    method = "pact"

    def setup(self, bits: int) -> None:
        super().setup(bits)
        self.alpha = nn.Parameter(torch.tensor(10.0, device=self.weight.device))

    def quantize_weight(self, w: Tensor) -> Tensor:
        return dorefa_weight(w, self.bits)

    def quantize_input(self, x: Tensor) -> Tensor:
        if self.first_batch():
            with torch.no_grad():
                self.alpha.fill_(initial_alpha(x))
        return pact_activation(x, self.alpha, self.bits)


class PACTConv2d(_PACT, QuantizedConv2d):
    """PACT convolution."""


class PACTLinear(_PACT, QuantizedLinear):
    """PACT linear layer."""


#: The drop-in layers, read by :func:`aiot.models.quant.quantize`.
LAYERS = (PACTConv2d, PACTLinear)
