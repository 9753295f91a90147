"""Binarized building blocks that binarized runtimes (LCE, daBNN) can execute exactly.

A :class:`BinaryConv2d` computes ``conv(sign(pad(x, -1)), sign(W)) * alpha``:

* ``sign`` maps ``x >= 0`` to +1 and ``x < 0`` to -1 (never 0), which is the bit convention
  of LCE (bit 1 iff negative) and daBNN;
* padding is applied to the *float* input with ``pad_value`` (-1 by default) *before*
  binarizing, so padded positions are a real binary value. Zero padding would make them
  ternary, which daBNN cannot express and LCE only supports in a slow path; -1 padding is
  daBNN's own convention, and padding before the sign also avoids LCE's mis-fusion of
  symmetric padding into SAME for stride-2 convolutions;
* ``alpha`` is an optional per-output-channel scale (mean |W|, XNOR-Net style, or fixed
  values in the ``fixed_alpha`` buffer), which LCE folds into its output multiplier and daBNN
  into the following BatchNorm;
* ``threshold`` is an optional per-input-channel activation threshold (ReActNet's RSign,
  "activation mean-shifting"): the layer binarizes ``x - threshold``. It is subtracted before
  padding, so padded positions stay -1 whatever the threshold.

The BiBench algorithms (:mod:`aiot.models.bibench`) train their own layers and are frozen
into this one for deployment (:func:`aiot.models.bibench.freeze`).

Training uses the straight-through estimator (gradient passed where |x| <= 1). The
algorithm-specific binarizers of BiBench build on this layer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class _SignSTE(torch.autograd.Function):
    """sign with sign(0) = +1 forward; clipped identity (hardtanh') backward."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * (x.abs() <= 1).to(grad.dtype)


def binary_sign(x: Tensor) -> Tensor:
    """+1 where ``x >= 0``, -1 elsewhere; straight-through gradient for training.

    Without autograd (inference, export) it is a plain ``where``, which every exporter
    (TorchScript, ONNX, torch.export) can trace; the autograd Function only when training.
    """
    if torch.is_grad_enabled() and x.requires_grad:
        return _SignSTE.apply(x)
    return torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))


class BinaryConv2d(nn.Conv2d):
    """A convolution with binary (+1/-1) activations and weights.

    Args:
        in_channels, out_channels, kernel_size, stride: as :class:`torch.nn.Conv2d`.
        padding: symmetric padding in pixels, filled with ``pad_value`` before binarizing.
        pad_value: the value padded positions take (-1 or +1 keep them binary).
        scale: multiply each output channel by mean |W| of its filter (XNOR-Net's alpha).

    The parent's own ``padding`` stays 0: padding is done explicitly so that its value is
    part of the layer's meaning, which converters read from ``binary_padding``.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, pad_value: float = -1.0, scale: bool = False) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, padding=0, bias=False)
        if pad_value not in (-1.0, 1.0):
            raise ValueError(f"pad_value must be -1 or +1 to keep padding binary, got {pad_value}")
        self.binary_padding = int(padding)
        self.pad_value = float(pad_value)
        self.scale = bool(scale)
        # Deployment-time constants set by freezing a trained BiBench layer (None: unused).
        self.register_buffer("fixed_alpha", None)
        self.register_buffer("threshold", None)

    def binary_weight(self) -> Tensor:
        """The ±1 weights (without alpha)."""
        return binary_sign(self.weight)

    def alpha(self) -> Tensor | None:
        """Per-output-channel scale ``(O,)``, or None when the layer has none."""
        if self.fixed_alpha is not None:
            return self.fixed_alpha
        if not self.scale:
            return None
        return self.weight.abs().mean(dim=(1, 2, 3))

    def forward(self, x: Tensor) -> Tensor:
        if self.threshold is not None:
            x = x - self.threshold.view(1, -1, 1, 1)
        if self.binary_padding:
            p = self.binary_padding
            x = F.pad(x, (p, p, p, p), value=self.pad_value)
        out = F.conv2d(binary_sign(x), self.binary_weight(), None, self.stride, 0, self.dilation)
        alpha = self.alpha()
        return out if alpha is None else out * alpha.view(1, -1, 1, 1)

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, binary_padding={self.binary_padding}, "
                f"pad_value={self.pad_value}, scale={self.scale}")
