"""Bi-Real Net (Liu et al., 2018; BiBench eq. 15-16).

Forward as DoReFa but with a per-output-channel alpha = mean |W| ("statistics by channel");
the activation sign's gradient is the derivative of Bi-Real's piecewise polynomial
(2 + 2a on [-1, 0), 2 - 2a on [0, 1), 0 elsewhere), the weights' the clipped STE. Bi-Real's
extra real-valued shortcuts are architectural, not part of the operator, and are left to
the backbone (BiBench's rule).
"""

from __future__ import annotations

from torch import Tensor

from aiot.models.bibench.base import (
    BinarizedConv2d,
    BinarizedLinear,
    channel_mean_abs,
    polynomial_derivative,
    sign_with,
)


class _BiReal:
    algorithm = "bireal"

    def act_sign(self, x: Tensor) -> Tensor:
        return sign_with(x, polynomial_derivative)

    def weight_scale(self, w: Tensor) -> Tensor:
        return channel_mean_abs(w)

    def scale_params(self) -> int:
        return self.weight.shape[0]


class BiRealConv2d(_BiReal, BinarizedConv2d):
    """Bi-Real convolution."""


class BiRealLinear(_BiReal, BinarizedLinear):
    """Bi-Real linear layer."""
