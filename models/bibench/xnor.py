"""XNOR-Net (Rastegari et al., 2016; BiBench eq. 14).

``o = (sign(a) (*) sign(w)) * K * alpha``:

* ``alpha`` = mean |W| per output channel (a statistic of the weights, gradient kept);
* ``K`` re-scales the *activations*: the mean of |a| over input channels, averaged over each
  kernel window (a k x k box filter with the conv's stride and zero padding); for a linear
  layer, the mean |a| of each input row.

K depends on the input at inference time ("activation re-scaling"), which neither LCE nor
daBNN can run: XNOR is not deployable (BiBench Table 4). Both binarizers use the clipped STE.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from aiot.models.bibench.base import BinarizedConv2d, BinarizedLinear, channel_mean_abs, numel


class XNORConv2d(BinarizedConv2d):
    """XNOR-Net convolution with weight scale alpha and activation scale K."""

    algorithm = "xnor"

    def weight_scale(self, w: Tensor) -> Tensor:
        return channel_mean_abs(w)

    def output_scale(self, x_float: Tensor, out: Tensor) -> Tensor:
        mean_abs = x_float.abs().mean(dim=1, keepdim=True)
        kh, kw = self.kernel_size
        box = mean_abs.new_full((1, 1, kh, kw), 1.0 / (kh * kw))
        k = F.conv2d(mean_abs, box, None, self.stride, self.binary_padding, self.dilation)
        return out * k

    def scale_params(self) -> int:
        return self.out_channels

    def extra_fp_ops(self, input_shape, output_shape) -> int:
        kh, kw = self.kernel_size
        out_hw = numel(output_shape[1:])
        # |a| mean over channels, the k x k box filter, then alpha and K multiplies.
        return numel(input_shape) + kh * kw * out_hw + 2 * numel(output_shape)


class XNORLinear(BinarizedLinear):
    """XNOR-Net linear layer: alpha per output feature, K = mean |a| per input row."""

    algorithm = "xnor"

    def weight_scale(self, w: Tensor) -> Tensor:
        return channel_mean_abs(w)

    def output_scale(self, x_float: Tensor, out: Tensor) -> Tensor:
        return out * x_float.abs().mean(dim=-1, keepdim=True)

    def scale_params(self) -> int:
        return self.out_features

    def extra_fp_ops(self, input_shape, output_shape) -> int:
        return numel(input_shape) + 2 * numel(output_shape)
