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


def binary_padding(padding) -> int | tuple[int, int]:
    """A binary conv's padding: one int where both axes pad alike (the common case, and what
    converters and records have always seen), else ``(height, width)``."""
    if isinstance(padding, int):
        return padding
    height, width = (int(p) for p in padding)
    return height if height == width else (height, width)


def pad_hw(padding) -> tuple[int, int]:
    """``(height, width)`` padding of :func:`binary_padding`'s value."""
    return (padding, padding) if isinstance(padding, int) else (int(padding[0]), int(padding[1]))


def pad_sides(padding) -> tuple[int, int, int, int]:
    """``F.pad``'s ``(left, right, top, bottom)`` for a binary conv's padding."""
    height, width = pad_hw(padding)
    return (width, width, height, height)


class BinaryConv2d(nn.Conv2d):
    """A convolution with binary (+1/-1) activations and weights.

    Args:
        in_channels, out_channels, kernel_size, stride: as :class:`torch.nn.Conv2d`
            (a kernel may be non-square: Inception's 1x7 and 7x1).
        padding: padding in pixels, the same on both sides of an axis: one value, or
            ``(height, width)`` (a 1x7 kernel pads ``(0, 3)``), filled with ``pad_value``
            before binarizing.
        pad_value: the value padded positions take (-1 or +1 keep them binary).
        scale: multiply each output channel by mean |W| of its filter (XNOR-Net's alpha).

    The parent's own ``padding`` stays 0: padding is done explicitly so that its value is
    part of the layer's meaning, which converters read from ``binary_padding``.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride: int = 1,
                 padding=0, pad_value: float = -1.0, scale: bool = False) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, padding=0, bias=False)
        if pad_value not in (-1.0, 1.0):
            raise ValueError(f"pad_value must be -1 or +1 to keep padding binary, got {pad_value}")
        self.binary_padding = binary_padding(padding)
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
            x = F.pad(x, pad_sides(self.binary_padding), value=self.pad_value)
        out = F.conv2d(binary_sign(x), self.binary_weight(), None, self.stride, 0, self.dilation)
        alpha = self.alpha()
        return out if alpha is None else out * alpha.view(1, -1, 1, 1)

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, binary_padding={self.binary_padding}, "
                f"pad_value={self.pad_value}, scale={self.scale}")
