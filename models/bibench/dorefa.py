"""DoReFa-Net with 1-bit weights and activations (Zhou et al., 2016; BiBench eq. 15).

``o = (sign(a) (*) sign(w)) * alpha`` with one per-layer alpha = mean |W| over the whole
tensor ("statistics by layer", BiBench Table 6). Weights get DoReFa's straight-through
gradient unchanged ("the full-precision gradient"); activations the clipped STE.

A per-layer scale is a channel-wise scale with equal values, so DoReFa deploys like BNN:
the factor folds into the BatchNorm after the layer.
"""

from __future__ import annotations

from torch import Tensor

from aiot.models.bibench.base import (
    BinarizedConv2d,
    BinarizedLinear,
    identity_derivative,
    sign_with,
)


class _DoReFa:
    algorithm = "dorefa"

    def weight_sign(self, w: Tensor) -> Tensor:
        return sign_with(w, identity_derivative)

    def weight_scale(self, w: Tensor) -> Tensor:
        return w.abs().mean()

    def scale_params(self) -> int:
        return 1


class DoReFaConv2d(_DoReFa, BinarizedConv2d):
    """DoReFa convolution."""


class DoReFaLinear(_DoReFa, BinarizedLinear):
    """DoReFa linear layer."""
