"""RegNetX-600MF (Radosavovic et al., "Designing Network Design Spaces", CVPR 2020), one of
RobustMQ's four architectures.

The paper's RegNetX-600MF (its Table and the pycls model zoo): depth 16, ``w_0 = 48``,
``w_a = 36.97``, ``w_m = 2.24``, group width 24, bottleneck ratio 1, which its quantized
linear parameterisation (:func:`regnet_widths`) turns into four stages of depths
``[1, 3, 5, 7]`` and widths ``[48, 96, 240, 528]``; about 6.2 M parameters and 600 M FLOPs
(multiply-accumulates) at 224 px.

The network: a 3x3/stride-2 stem of 32 channels, four stages of X blocks (1x1 conv, 3x3 group
conv with the stage's stride in the stage's first block, 1x1 conv, each followed by BatchNorm,
ReLU after the first two and after the residual add; a 1x1 projection shortcut where the shape
changes), global average pooling and a linear classifier.

Small-input variants (CIFAR 32 px, MNIST 28 px) give the stem stride 1; the stages are
unchanged.
"""

from __future__ import annotations

import math

from torch import Tensor, nn

from aiot.models.init import he_conv_identity_bn

#: RegNetX-600MF's design parameters (Radosavovic et al. 2020; pycls RegNetX-600MF).
DEPTH, W0, WA, WM, GROUP_WIDTH, BOTTLENECK, STEM = 16, 48, 36.97, 2.24, 24, 1.0, 32
#: What :func:`regnet_widths` makes of them.
DEPTHS, WIDTHS = (1, 3, 5, 7), (48, 96, 240, 528)


def regnet_widths(depth: int, w0: float, wa: float, wm: float, group_width: int,
                  bottleneck: float = 1.0, quantum: int = 8) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The paper's eq. 2-4: per-block widths ``u_j = w0 + wa j`` snapped to ``w0 wm^s`` with
    integer ``s``, rounded to a multiple of ``quantum``, then made a multiple of the group
    width (at the bottleneck), as pycls does; runs of equal width are the stages.

    Returns:
        ``(depths, widths)`` per stage.
    """
    widths = []
    for j in range(depth):
        s = round(math.log((w0 + wa * j) / w0) / math.log(wm))
        width = int(round(w0 * wm ** s / quantum) * quantum)
        inner = int(round(width * bottleneck))
        group = min(group_width, inner)
        widths.append(int(round(round(inner / group) * group / bottleneck)))
    stages: list[list[int]] = []
    for w in widths:
        if stages and stages[-1][1] == w:
            stages[-1][0] += 1
        else:
            stages.append([1, w])
    return tuple(d for d, _ in stages), tuple(w for _, w in stages)


def _conv_bn(in_ch: int, out_ch: int, kernel: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    return [nn.Conv2d(in_ch, out_ch, kernel, stride, kernel // 2, groups=groups, bias=False),
            nn.BatchNorm2d(out_ch)]


class XBlock(nn.Module):
    """RegNet's X block: 1x1, 3x3 group conv (stride), 1x1, residual add, ReLU."""

    def __init__(self, in_ch: int, out_ch: int, stride: int, group_width: int,
                 bottleneck: float) -> None:
        super().__init__()
        mid = int(round(out_ch * bottleneck))
        self.a = nn.Sequential(*_conv_bn(in_ch, mid, 1), nn.ReLU())
        self.b = nn.Sequential(*_conv_bn(mid, mid, 3, stride, groups=mid // group_width), nn.ReLU())
        self.c = nn.Sequential(*_conv_bn(mid, out_ch, 1))
        self.proj = (nn.Sequential(*_conv_bn(in_ch, out_ch, 1, stride))
                     if stride != 1 or in_ch != out_ch else None)
        self.relu = nn.ReLU()

    def forward(self, x: Tensor) -> Tensor:
        shortcut = x if self.proj is None else self.proj(x)
        return self.relu(shortcut + self.c(self.b(self.a(x))))


class RegNet(nn.Module):
    """Stem, stages of :class:`XBlock`, average pool and classifier."""

    def __init__(self, depths: tuple[int, ...], widths: tuple[int, ...], group_width: int,
                 bottleneck: float, stem: int, num_classes: int, in_channels: int,
                 small_input: bool) -> None:
        super().__init__()
        self.stem = nn.Sequential(*_conv_bn(in_channels, stem, 3, 1 if small_input else 2), nn.ReLU())
        stages, in_ch = [], stem
        for depth, width in zip(depths, widths, strict=True):
            blocks = [XBlock(in_ch if i == 0 else width, width, 2 if i == 0 else 1, group_width,
                             bottleneck) for i in range(depth)]
            stages.append(nn.Sequential(*blocks))
            in_ch = width
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_ch, num_classes)
        he_conv_identity_bn(self)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.pool(self.stages(self.stem(x))).flatten(1))


def regnetx_600mf(num_classes: int = 1000, in_channels: int = 3, small_input: bool = False) -> RegNet:
    """Build RegNetX-600MF (see the module docstring); small_input: stem stride 1."""
    return RegNet(DEPTHS, WIDTHS, GROUP_WIDTH, BOTTLENECK, STEM, num_classes, in_channels, small_input)
