"""XNOR-Net++ (Bulat & Tzimiropoulos, 2019; BiBench eq. 17-18).

``o = (sign(a) (*) sign(w)) * Gamma`` with a *learned* ``Gamma = alpha (x) beta (x) gamma``,
``alpha`` over output channels, ``beta`` over output rows and ``gamma`` over output
columns (the form BiBench adopts). The spatial factors are sized by the layer's output, so
:func:`aiot.models.bibench.binarize` runs one probe forward pass to create them; a linear
layer has only ``alpha``. Both binarizers use the clipped STE.

Gamma varies over output positions ("spatial-wise" scaling), which cannot fold into a
per-channel BatchNorm: XNOR++ is not deployable on LCE or daBNN (BiBench Table 4).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from aiot.models.bibench.base import BinarizedConv2d, BinarizedLinear, channel_mean_abs, numel


class XNORPlusPlusConv2d(BinarizedConv2d):
    """XNOR-Net++ convolution with learned alpha (O), beta (H_out) and gamma (W_out)."""

    algorithm = "xnorpp"
    needs_probe = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.alpha = nn.Parameter(torch.ones(self.out_channels))
        self.beta: nn.Parameter | None = None
        self.gamma: nn.Parameter | None = None

    @classmethod
    def from_float(cls, conv):
        layer = super().from_float(conv)
        with torch.no_grad():  # start from XNOR's statistic, as the paper suggests
            layer.alpha.copy_(channel_mean_abs(layer.weight))
        return layer

    def output_scale(self, x_float: Tensor, out: Tensor) -> Tensor:
        height, width = out.shape[-2:]
        if self.beta is None:  # first (probe) pass: size the spatial factors
            self.beta = nn.Parameter(out.new_ones(height))
            self.gamma = nn.Parameter(out.new_ones(width))
        elif (self.beta.numel(), self.gamma.numel()) != (height, width):
            raise ValueError(f"XNOR++ layer was sized for {self.beta.numel()}x{self.gamma.numel()} "
                             f"outputs, got {height}x{width}: its input size must not change")
        gamma = self.alpha.view(-1, 1, 1) * self.beta.view(1, -1, 1) * self.gamma.view(1, 1, -1)
        return out * gamma.unsqueeze(0)

    def scale_params(self) -> int:
        spatial = 0 if self.beta is None else self.beta.numel() + self.gamma.numel()
        return self.out_channels + spatial

    def extra_fp_ops(self, input_shape, output_shape) -> int:
        return numel(output_shape)  # Gamma is a constant tensor at inference: one multiply


class XNORPlusPlusLinear(BinarizedLinear):
    """XNOR-Net++ linear layer: a learned alpha per output feature."""

    algorithm = "xnorpp"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.alpha = nn.Parameter(torch.ones(self.out_features))

    @classmethod
    def from_float(cls, linear):
        layer = super().from_float(linear)
        with torch.no_grad():
            layer.alpha.copy_(channel_mean_abs(layer.weight))
        return layer

    def output_scale(self, x_float: Tensor, out: Tensor) -> Tensor:
        return out * self.alpha

    def scale_params(self) -> int:
        return self.out_features
