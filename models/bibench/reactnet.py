"""ReActNet's binarized operator (Liu et al., 2020; BiBench eq. 19-24).

* RSign: activations are binarized around a learned per-input-channel threshold,
  ``sign(a - tau)`` ("activation mean-shifting"); its gradient w.r.t. tau is minus the
  gradient w.r.t. a (eq. 22), which autograd gives from the subtraction;
* the activation sign's gradient is the piecewise polynomial of eq. 23-24, the weights' the
  clipped STE (eq. 12);
* alpha = mean |W| per output channel (eq. 20).

RPReLU and ReActNet's MobileNet-based blocks are architecture, not operator, and are not
part of BiBench's operator-level comparison. Deployment: LCE runs the threshold as a float
subtraction before its binarization; daBNN has no such op, so aiot folds each threshold
into the BatchNorm that produces the layer's input where that is exact, and refuses otherwise.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from aiot.models.bibench.base import (
    BinarizedConv2d,
    BinarizedLinear,
    channel_mean_abs,
    numel,
    polynomial_derivative,
    sign_with,
)


class _ReAct:
    algorithm = "reactnet"

    def _init_threshold(self, channels: int) -> None:
        self.threshold = nn.Parameter(torch.zeros(channels))

    def shift_input(self, x: Tensor) -> Tensor:
        shape = (1, -1) + (1,) * (x.dim() - 2)
        return x - self.threshold.view(shape)

    def act_sign(self, x: Tensor) -> Tensor:
        return sign_with(x, polynomial_derivative)

    def weight_scale(self, w: Tensor) -> Tensor:
        return channel_mean_abs(w)

    def scale_params(self) -> int:
        return self.weight.shape[0] + self.threshold.numel()

    def extra_fp_ops(self, input_shape, output_shape) -> int:
        return numel(output_shape) + numel(input_shape)  # alpha multiply + threshold subtract


class ReActConv2d(_ReAct, BinarizedConv2d):
    """ReActNet convolution (RSign + polynomial gradient + channel-wise alpha)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._init_threshold(self.in_channels)


class ReActLinear(_ReAct, BinarizedLinear):
    """ReActNet linear layer."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._init_threshold(self.in_features)
