"""What every BiBench binarized operator shares: the layer skeleton and the sign estimators.

A binarized convolution computes::

    out = conv( act_sign( pad( shift(x), -1 ) ), weight_sign(W) ) * weight_scale   [* output_scale]

* ``shift`` is the algorithm's activation redistribution (ReActNet's learned threshold);
  identity by default;
* padding fills the *float* tensor with -1 before the sign, so padded positions are a real
  binary value (the convention of :class:`aiot.models.binary.BinaryConv2d`, of daBNN, and the
  one that keeps LCE's conversion exact); training therefore sees what deployment runs;
* ``act_sign`` / ``weight_sign`` map ``>= 0`` to +1 and ``< 0`` to -1 in the forward pass;
  their backward pass is each algorithm's gradient approximation;
* ``weight_scale`` is a per-output-channel (or per-layer) factor, or None;
* ``output_scale`` is for factors that depend on the input (XNOR's K) or on the output
  position (XNOR++'s spatial Gamma); deployable algorithms have none.

Subclasses override the hooks. Each also declares its inference-time extras for
:mod:`aiot.models.bibench.complexity` (``scale_params``, ``extra_fp_ops``) and a per-epoch
``update(epoch, max_epochs)`` when it has a schedule (ReCU, FDA).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiot.models.binary import binary_padding, pad_sides


def hard_sign(x: Tensor) -> Tensor:
    """+1 where ``x >= 0``, -1 elsewhere (never 0): the forward pass of every binarizer."""
    return torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))


class _SignWithGradient(torch.autograd.Function):
    """sign forward; backward multiplies the incoming gradient by ``derivative(x)``."""

    @staticmethod
    def forward(ctx, x: Tensor, derivative) -> Tensor:
        ctx.save_for_backward(x)
        ctx.derivative = derivative
        return hard_sign(x)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (x,) = ctx.saved_tensors
        return grad * ctx.derivative(x).to(grad.dtype), None


def sign_with(x: Tensor, derivative) -> Tensor:
    """``hard_sign(x)`` whose gradient is ``grad * derivative(x)``.

    Outside autograd (inference, export) this is the plain ``where``, which every exporter
    can trace.
    """
    if torch.is_grad_enabled() and x.requires_grad:
        return _SignWithGradient.apply(x, derivative)
    return hard_sign(x)


def ste_derivative(x: Tensor) -> Tensor:
    """BNN's clipped straight-through estimator: 1 inside [-1, 1], 0 outside (eq. 12)."""
    return (x.abs() <= 1).to(x.dtype)


def polynomial_derivative(x: Tensor) -> Tensor:
    """Bi-Real's piecewise polynomial: 2+2x on [-1, 0), 2-2x on [0, 1), 0 elsewhere (eq. 16)."""
    inside = (x >= -1) & (x < 1)
    return torch.where(inside, 2 - 2 * x.abs(), torch.zeros_like(x))


def identity_derivative(x: Tensor) -> Tensor:
    """The unclipped straight-through estimator (DoReFa's "full-precision gradient")."""
    return torch.ones_like(x)


def channel_mean_abs(weight: Tensor) -> Tensor:
    """Mean |W| per output channel, shape ``(O,)``: XNOR-Net's alpha."""
    return weight.abs().flatten(1).mean(dim=1)


class BinarizedLayer:
    """The hooks and accounting shared by binarized convolutions and linear layers.

    Class attributes:
        algorithm: canonical algorithm name (``bnn``, ``xnor``, …).
    """

    algorithm: str = ""

    # -- hooks -------------------------------------------------------------------------
    def shift_input(self, x: Tensor) -> Tensor:
        """Activation redistribution before the sign (default: none)."""
        return x

    def act_sign(self, x: Tensor) -> Tensor:
        """Binarize activations (default: BNN's clipped STE)."""
        return sign_with(x, ste_derivative)

    def effective_weight(self) -> Tensor:
        """The real-valued weight that is binarized (default: the raw weight)."""
        return self.weight

    def weight_sign(self, w: Tensor) -> Tensor:
        """Binarize weights (default: BNN's clipped STE)."""
        return sign_with(w, ste_derivative)

    def weight_scale(self, w: Tensor) -> Tensor | None:
        """Factor per output channel ``(O,)`` or per layer ``()``, or None (default)."""
        return None

    def output_scale(self, x_float: Tensor, out: Tensor) -> Tensor:
        """Input- or position-dependent rescaling of the output (default: none)."""
        return out

    def update(self, epoch: int, max_epochs: int) -> None:
        """Called before each training epoch (1-based); schedules override it."""

    # -- accounting (inference time) -----------------------------------------------------
    def scale_params(self) -> int:
        """Full-precision numbers this layer keeps at inference besides its 1-bit weights."""
        return 0

    def extra_fp_ops(self, input_shape: tuple[int, ...], output_shape: tuple[int, ...]) -> int:
        """Full-precision multiply-accumulates per image beyond the binary ones.

        Default: one multiply per output element when the layer has a weight scale.
        Shapes exclude the batch dimension.
        """
        return numel(output_shape) if self.scale_params() else 0


def numel(shape: tuple[int, ...]) -> int:
    """Number of elements of a tensor of ``shape``."""
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _scaled(out: Tensor, scale: Tensor | None, spatial: bool) -> Tensor:
    if scale is None:
        return out
    if scale.dim() == 0:
        return out * scale
    return out * (scale.view(1, -1, 1, 1) if spatial else scale.view(1, -1))


class BinarizedConv2d(BinarizedLayer, nn.Conv2d):
    """A drop-in replacement for an ``nn.Conv2d`` whose activations and weights are binarized.

    Build it with :meth:`from_float`; the original padding becomes -1 padding of the float
    input (see the module docstring). Bias, if any, stays a full-precision add.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = False) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, padding=0,
                         dilation=dilation, groups=groups, bias=bias)
        self.binary_padding = binary_padding(padding)

    @classmethod
    def from_float(cls, conv: nn.Conv2d) -> BinarizedConv2d:
        """A binarized copy of ``conv`` (same shape, hyper-parameters and weights)."""
        if isinstance(conv.padding, str) or conv.padding_mode != "zeros":
            raise ValueError(f"cannot binarize a conv with padding={conv.padding!r}, "
                             f"padding_mode={conv.padding_mode!r}")
        layer = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride,
                    conv.padding, conv.dilation, conv.groups, conv.bias is not None)
        with torch.no_grad():
            layer.weight.copy_(conv.weight)
            if conv.bias is not None:
                layer.bias.copy_(conv.bias)
        return layer.to(conv.weight.device)

    def forward(self, x: Tensor) -> Tensor:
        shifted = self.shift_input(x)
        if self.binary_padding:
            shifted = F.pad(shifted, pad_sides(self.binary_padding), value=-1.0)
        w = self.effective_weight()
        out = F.conv2d(self.act_sign(shifted), self.weight_sign(w), None, self.stride, 0,
                       self.dilation, self.groups)
        out = self.output_scale(x, _scaled(out, self.weight_scale(w), spatial=True))
        return out if self.bias is None else out + self.bias.view(1, -1, 1, 1)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, binary_padding={self.binary_padding}, algorithm={self.algorithm}"


class BinarizedLinear(BinarizedLayer, nn.Linear):
    """A drop-in replacement for an ``nn.Linear`` with binarized activations and weights."""

    @classmethod
    def from_float(cls, linear: nn.Linear) -> BinarizedLinear:
        """A binarized copy of ``linear``."""
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None)
        with torch.no_grad():
            layer.weight.copy_(linear.weight)
            if linear.bias is not None:
                layer.bias.copy_(linear.bias)
        return layer.to(linear.weight.device)

    def forward(self, x: Tensor) -> Tensor:
        w = self.effective_weight()
        out = F.linear(self.act_sign(self.shift_input(x)), self.weight_sign(w))
        out = self.output_scale(x, _scaled(out, self.weight_scale(w), spatial=False))
        return out if self.bias is None else out + self.bias
