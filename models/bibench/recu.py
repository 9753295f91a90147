"""ReCU (Xu et al., 2021; BiBench eq. 25-29).

Weights are *balanced* (the mean of each output channel's filter subtracted), standardized
(divided by that filter's standard deviation) and passed through the rectified clamp unit
``recu(w) = max(min(w, Q(tau)), Q(1 - tau))`` with Q the quantiles of the layer's
standardized weights, so outliers stop dominating; the clamp's gradient is zero outside the
quantile band and the sign's the clipped STE. ``tau`` follows ReCU's schedule, growing
linearly from 0.85 in the first epoch to 0.99 in the last (:meth:`update`). alpha = mean
|recu(w)| per output channel; the activation sign uses the piecewise polynomial (eq. 29).

At inference the binary weights are ``sign(recu(...))`` (a fixed tensor) and alpha a
channel-wise constant: deployable like Bi-Real.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiot.models.bibench.base import (
    BinarizedConv2d,
    BinarizedLinear,
    channel_mean_abs,
    polynomial_derivative,
    sign_with,
)

TAU_BEGIN, TAU_END = 0.85, 0.99


def recu_weight(weight: Tensor, tau: float) -> Tensor:
    """Balanced, standardized and clamped weights (same shape as ``weight``)."""
    flat = weight.flatten(1)
    centred = flat - flat.mean(dim=1, keepdim=True)
    standard = centred / (centred.std(dim=1, keepdim=True, unbiased=False) + 1e-5)
    values = standard.detach().flatten()
    if values.numel() > 1_000_000:  # torch.quantile's input limit is 16 M; a sample suffices
        values = values[torch.linspace(0, values.numel() - 1, 1_000_000).long()]
    upper = torch.quantile(values, tau)
    lower = torch.quantile(values, 1 - tau)
    return torch.maximum(torch.minimum(standard, upper), lower).view_as(weight)


class _ReCU:
    algorithm = "recu"
    tau = TAU_BEGIN

    def effective_weight(self) -> Tensor:
        return recu_weight(self.weight, self.tau)

    def act_sign(self, x: Tensor) -> Tensor:
        return sign_with(x, polynomial_derivative)

    def weight_scale(self, w: Tensor) -> Tensor:
        return channel_mean_abs(w).detach()

    def update(self, epoch: int, max_epochs: int) -> None:
        progress = 0.0 if max_epochs <= 1 else (epoch - 1) / (max_epochs - 1)
        self.tau = TAU_BEGIN + (TAU_END - TAU_BEGIN) * progress

    def scale_params(self) -> int:
        return self.weight.shape[0]


class ReCUConv2d(_ReCU, BinarizedConv2d):
    """ReCU convolution."""


class ReCULinear(_ReCU, BinarizedLinear):
    """ReCU linear layer."""
