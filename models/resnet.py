"""ResNet-18/34/50 (He et al., "Deep Residual Learning for Image Recognition", CVPR 2016).

ImageNet variants follow the paper's Table 1 with the "v1.5" placement of the stride in
bottleneck blocks (on the 3x3 conv, as torchvision and most deployed checkpoints do). Module
names match torchvision's, so a torchvision ``state_dict`` loads into these models unchanged.

Small-input variants (CIFAR 32 px, MNIST 28 px) replace the 7x7/stride-2 stem and the
max-pool with one 3x3/stride-1 conv, as the CIFAR ResNet-18 of BiBench and most CIFAR
codebases do; the four stages are unchanged.
"""

from __future__ import annotations

from torch import Tensor, nn

from aiot.models.init import he_conv_identity_bn


def conv3x3(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    """3x3 convolution with padding 1 and no bias (a BatchNorm follows)."""
    return nn.Conv2d(in_planes, out_planes, 3, stride=stride, padding=1, bias=False)


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    """1x1 convolution without bias."""
    return nn.Conv2d(in_planes, out_planes, 1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convs with an identity (or 1x1 projection) shortcut; used by ResNet-18/34."""

    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = conv3x3(in_planes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU()
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = _shortcut(in_planes, planes * self.expansion, stride)

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        # Out-of-place add: in-place ops on a tensor another branch still reads break export.
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carries the stride), 1x1 expand x4; used by ResNet-50."""

    expansion = 4

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = conv1x1(in_planes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU()
        self.downsample = _shortcut(in_planes, planes * self.expansion, stride)

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


def _shortcut(in_planes: int, out_planes: int, stride: int) -> nn.Sequential | None:
    """Projection shortcut (option B of the paper) where shape changes, else None (identity)."""
    if stride == 1 and in_planes == out_planes:
        return None
    return nn.Sequential(conv1x1(in_planes, out_planes, stride), nn.BatchNorm2d(out_planes))


class ResNet(nn.Module):
    """ResNet backbone plus global-average-pool and linear classifier.

    Args:
        block: :class:`BasicBlock` or :class:`Bottleneck`.
        layers: number of blocks in each of the four stages.
        num_classes: logits size.
        in_channels: 3 for RGB, 1 for grayscale.
        small_input: use the 3x3/stride-1 stem without max-pool (for 28-32 px inputs).
    """

    def __init__(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        layers: tuple[int, int, int, int],
        num_classes: int = 1000,
        in_channels: int = 3,
        small_input: bool = False,
    ) -> None:
        super().__init__()
        if small_input:
            self.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
            self.maxpool: nn.Module = nn.Identity()
        else:
            self.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
            self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        in_planes = 64
        stages = []
        for index, (planes, blocks) in enumerate(zip((64, 128, 256, 512), layers)):
            stride = 1 if index == 0 else 2
            stage = [block(in_planes, planes, stride)]
            in_planes = planes * block.expansion
            stage += [block(in_planes, planes) for _ in range(blocks - 1)]
            stages.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        he_conv_identity_bn(self)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.avgpool(x).flatten(1))


_LAYERS = {
    18: (BasicBlock, (2, 2, 2, 2)),
    34: (BasicBlock, (3, 4, 6, 3)),
    50: (Bottleneck, (3, 4, 6, 3)),
}


def resnet(depth: int, num_classes: int = 1000, in_channels: int = 3, small_input: bool = False) -> ResNet:
    """Build ResNet-``depth`` (18, 34 or 50).

    Args:
        depth: 18, 34 or 50.
        num_classes: logits size.
        in_channels: input channels.
        small_input: CIFAR/MNIST stem (3x3 stride 1, no max-pool).

    Returns:
        A freshly initialised :class:`ResNet` in training mode.
    """
    if depth not in _LAYERS:
        raise ValueError(f"ResNet depth must be one of {sorted(_LAYERS)}, got {depth}")
    block, layers = _LAYERS[depth]
    return ResNet(block, layers, num_classes, in_channels, small_input)
