"""Inception-v3 (Szegedy et al., "Rethinking the Inception Architecture for Computer Vision",
CVPR 2016).

The 299x299 network of the paper's Table 1 as released in TF-Slim and torchvision: a
five-conv stem with two max-pools, three Inception-A (35x35), a grid reduction, four
Inception-C with factorised 7x7 convs (17x17), a second reduction and two Inception-E
(8x8). Module names match torchvision's ``inception_v3``. The auxiliary classifier is
training-only and left out by default (``aux_logits=False``): 23.83 M params without it,
27.16 M with it.

The small-input variant keeps every module but makes the stem convs stride 1 with
"same" padding and drops both stem max-pools, so 32 px inputs reach Inception-A at 32x32
(like 35x35 in the original) and the two reductions give 15x15 and 7x7 (13 and 6 for 28 px).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class BasicConv2d(nn.Module):
    """Conv (no bias) -> BatchNorm (eps 1e-3, as TF) -> ReLU."""

    def __init__(self, in_ch: int, out_ch: int, kernel, stride=1, padding=0) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, kernel, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(out_ch, eps=0.001)
        self.relu = nn.ReLU()

    def forward(self, x: Tensor) -> Tensor:
        return self.relu(self.bn(self.conv(x)))


class InceptionA(nn.Module):
    """35x35 module: 1x1, 5x5, double 3x3 and pooled branches (Fig. 5 of the paper)."""

    def __init__(self, in_ch: int, pool_features: int) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(in_ch, 64, 1)
        self.branch5x5_1 = BasicConv2d(in_ch, 48, 1)
        self.branch5x5_2 = BasicConv2d(48, 64, 5, padding=2)
        self.branch3x3dbl_1 = BasicConv2d(in_ch, 64, 1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, 3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, 3, padding=1)
        self.avg_pool = nn.AvgPool2d(3, stride=1, padding=1)
        self.branch_pool = BasicConv2d(in_ch, pool_features, 1)

    def forward(self, x: Tensor) -> Tensor:
        b1 = self.branch1x1(x)
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = self.branch_pool(self.avg_pool(x))
        return torch.cat([b1, b5, b3, bp], 1)


class InceptionB(nn.Module):
    """Grid reduction 35 -> 17: stride-2 3x3, stride-2 double 3x3 and max-pool branches."""

    def __init__(self, in_ch: int) -> None:
        super().__init__()
        self.branch3x3 = BasicConv2d(in_ch, 384, 3, stride=2)
        self.branch3x3dbl_1 = BasicConv2d(in_ch, 64, 1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, 3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, 3, stride=2)
        self.max_pool = nn.MaxPool2d(3, stride=2)

    def forward(self, x: Tensor) -> Tensor:
        b3 = self.branch3x3(x)
        bd = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat([b3, bd, self.max_pool(x)], 1)


class InceptionC(nn.Module):
    """17x17 module with 7x7 convs factorised into 1x7 and 7x1 (Fig. 6 of the paper)."""

    def __init__(self, in_ch: int, channels_7x7: int) -> None:
        super().__init__()
        c7 = channels_7x7
        self.branch1x1 = BasicConv2d(in_ch, 192, 1)
        self.branch7x7_1 = BasicConv2d(in_ch, c7, 1)
        self.branch7x7_2 = BasicConv2d(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7_3 = BasicConv2d(c7, 192, (7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = BasicConv2d(in_ch, c7, 1)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = BasicConv2d(c7, 192, (1, 7), padding=(0, 3))
        self.avg_pool = nn.AvgPool2d(3, stride=1, padding=1)
        self.branch_pool = BasicConv2d(in_ch, 192, 1)

    def forward(self, x: Tensor) -> Tensor:
        b1 = self.branch1x1(x)
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        bd = self.branch7x7dbl_1(x)
        bd = self.branch7x7dbl_3(self.branch7x7dbl_2(bd))
        bd = self.branch7x7dbl_5(self.branch7x7dbl_4(bd))
        bp = self.branch_pool(self.avg_pool(x))
        return torch.cat([b1, b7, bd, bp], 1)


class InceptionD(nn.Module):
    """Grid reduction 17 -> 8."""

    def __init__(self, in_ch: int) -> None:
        super().__init__()
        self.branch3x3_1 = BasicConv2d(in_ch, 192, 1)
        self.branch3x3_2 = BasicConv2d(192, 320, 3, stride=2)
        self.branch7x7x3_1 = BasicConv2d(in_ch, 192, 1)
        self.branch7x7x3_2 = BasicConv2d(192, 192, (1, 7), padding=(0, 3))
        self.branch7x7x3_3 = BasicConv2d(192, 192, (7, 1), padding=(3, 0))
        self.branch7x7x3_4 = BasicConv2d(192, 192, 3, stride=2)
        self.max_pool = nn.MaxPool2d(3, stride=2)

    def forward(self, x: Tensor) -> Tensor:
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_2(self.branch7x7x3_1(x))
        b7 = self.branch7x7x3_4(self.branch7x7x3_3(b7))
        return torch.cat([b3, b7, self.max_pool(x)], 1)


class InceptionE(nn.Module):
    """8x8 module with expanded filter banks: 3x3 split into parallel 1x3 and 3x1 (Fig. 7)."""

    def __init__(self, in_ch: int) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(in_ch, 320, 1)
        self.branch3x3_1 = BasicConv2d(in_ch, 384, 1)
        self.branch3x3_2a = BasicConv2d(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3_2b = BasicConv2d(384, 384, (3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = BasicConv2d(in_ch, 448, 1)
        self.branch3x3dbl_2 = BasicConv2d(448, 384, 3, padding=1)
        self.branch3x3dbl_3a = BasicConv2d(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = BasicConv2d(384, 384, (3, 1), padding=(1, 0))
        self.avg_pool = nn.AvgPool2d(3, stride=1, padding=1)
        self.branch_pool = BasicConv2d(in_ch, 192, 1)

    def forward(self, x: Tensor) -> Tensor:
        b1 = self.branch1x1(x)
        b3 = self.branch3x3_1(x)
        b3 = torch.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        bd = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        bd = torch.cat([self.branch3x3dbl_3a(bd), self.branch3x3dbl_3b(bd)], 1)
        bp = self.branch_pool(self.avg_pool(x))
        return torch.cat([b1, b3, bd, bp], 1)


class InceptionAux(nn.Module):
    """Auxiliary classifier on the 17x17 grid (training-time regulariser only)."""

    def __init__(self, in_ch: int, num_classes: int) -> None:
        super().__init__()
        self.avg_pool = nn.AvgPool2d(5, stride=3)
        self.conv0 = BasicConv2d(in_ch, 128, 1)
        self.conv1 = BasicConv2d(128, 768, 5)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(768, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.conv1(self.conv0(self.avg_pool(x)))
        return self.fc(self.avgpool(x).flatten(1))


class InceptionV3(nn.Module):
    """Inception-v3.

    Args:
        num_classes: logits size.
        in_channels: input channels.
        small_input: stride-1, padded stem without max-pools, for 28-32 px inputs.
        aux_logits: add the auxiliary classifier; then ``forward`` returns
            ``(logits, aux_logits)`` in training mode (and plain logits in eval mode).
            Needs at least ~75 px inputs for the ImageNet stem.
        dropout: dropout before the classifier (0.5).
    """

    def __init__(
        self,
        num_classes: int = 1000,
        in_channels: int = 3,
        small_input: bool = False,
        aux_logits: bool = False,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        stride, pad = (1, 1) if small_input else (2, 0)
        same = 1 if small_input else 0
        self.Conv2d_1a_3x3 = BasicConv2d(in_channels, 32, 3, stride=stride, padding=pad)
        self.Conv2d_2a_3x3 = BasicConv2d(32, 32, 3, padding=same)
        self.Conv2d_2b_3x3 = BasicConv2d(32, 64, 3, padding=1)
        self.maxpool1: nn.Module = nn.Identity() if small_input else nn.MaxPool2d(3, stride=2)
        self.Conv2d_3b_1x1 = BasicConv2d(64, 80, 1)
        self.Conv2d_4a_3x3 = BasicConv2d(80, 192, 3, padding=same)
        self.maxpool2: nn.Module = nn.Identity() if small_input else nn.MaxPool2d(3, stride=2)
        self.Mixed_5b = InceptionA(192, pool_features=32)
        self.Mixed_5c = InceptionA(256, pool_features=64)
        self.Mixed_5d = InceptionA(288, pool_features=64)
        self.Mixed_6a = InceptionB(288)
        self.Mixed_6b = InceptionC(768, channels_7x7=128)
        self.Mixed_6c = InceptionC(768, channels_7x7=160)
        self.Mixed_6d = InceptionC(768, channels_7x7=160)
        self.Mixed_6e = InceptionC(768, channels_7x7=192)
        self.AuxLogits = InceptionAux(768, num_classes) if aux_logits else None
        self.Mixed_7a = InceptionD(768)
        self.Mixed_7b = InceptionE(1280)
        self.Mixed_7c = InceptionE(2048)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(2048, num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        # Truncated normal (std 0.1) as in the TF-Slim reference implementation.
        for module in self.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(module.weight, mean=0.0, std=0.1, a=-2, b=2)
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, x: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        x = self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x)))
        x = self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(self.maxpool1(x)))
        x = self.maxpool2(x)
        x = self.Mixed_5d(self.Mixed_5c(self.Mixed_5b(x)))
        x = self.Mixed_6a(x)
        x = self.Mixed_6e(self.Mixed_6d(self.Mixed_6c(self.Mixed_6b(x))))
        # Branches on module state only (fixed in eval mode), never on tensor values.
        aux = self.AuxLogits(x) if self.AuxLogits is not None and self.training else None
        x = self.Mixed_7c(self.Mixed_7b(self.Mixed_7a(x)))
        logits = self.fc(self.dropout(self.avgpool(x).flatten(1)))
        return logits if aux is None else (logits, aux)


def inception_v3(
    num_classes: int = 1000, in_channels: int = 3, small_input: bool = False, aux_logits: bool = False
) -> InceptionV3:
    """Build Inception-v3 (see :class:`InceptionV3`)."""
    return InceptionV3(num_classes, in_channels, small_input, aux_logits)
