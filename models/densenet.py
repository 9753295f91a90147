"""DenseNet-121 (Huang et al., "Densely Connected Convolutional Networks", CVPR 2017).

DenseNet-BC with growth rate 32, bottleneck width 4 x growth, compression 0.5 and blocks of
(6, 12, 24, 16) layers. Module names match torchvision's ``densenet121``.

The small-input variant replaces the 7x7/stride-2 conv and max-pool with a 3x3/stride-1 conv
to 64 channels (as DenseNet-BC's own CIFAR models start with a 3x3 conv to 2 x growth).
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import Tensor, nn


class DenseLayer(nn.Module):
    """BN-ReLU-Conv1x1 (to bn_size * growth) then BN-ReLU-Conv3x3 (to growth)."""

    def __init__(self, in_ch: int, growth: int, bn_size: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(in_ch)
        self.relu1 = nn.ReLU()
        self.conv1 = nn.Conv2d(in_ch, bn_size * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.relu2 = nn.ReLU()
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.conv2(self.relu2(self.norm2(self.conv1(self.relu1(self.norm1(x))))))


class DenseBlock(nn.Module):
    """``num_layers`` dense layers; each sees the concatenation of all earlier outputs."""

    def __init__(self, num_layers: int, in_ch: int, growth: int, bn_size: int) -> None:
        super().__init__()
        for index in range(num_layers):
            self.add_module(f"denselayer{index + 1}", DenseLayer(in_ch + index * growth, growth, bn_size))

    def forward(self, x: Tensor) -> Tensor:
        features = [x]
        for layer in self.children():
            features.append(layer(torch.cat(features, 1)))
        return torch.cat(features, 1)


class Transition(nn.Sequential):
    """BN-ReLU-Conv1x1 (halves the channels) then 2x2 average pool."""

    def __init__(self, in_ch: int, out_ch: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(in_ch)
        self.relu = nn.ReLU()
        self.conv = nn.Conv2d(in_ch, out_ch, 1, bias=False)
        self.pool = nn.AvgPool2d(2, stride=2)


class DenseNet(nn.Module):
    """DenseNet-BC.

    Args:
        growth: growth rate k.
        block_config: dense layers per block.
        num_init_features: channels after the stem.
        bn_size: bottleneck width as a multiple of ``growth``.
        num_classes: logits size.
        in_channels: input channels.
        small_input: 3x3/stride-1 stem without max-pool for 28-32 px inputs.
    """

    def __init__(
        self,
        growth: int = 32,
        block_config: tuple[int, ...] = (6, 12, 24, 16),
        num_init_features: int = 64,
        bn_size: int = 4,
        num_classes: int = 1000,
        in_channels: int = 3,
        small_input: bool = False,
    ) -> None:
        super().__init__()
        if small_input:
            stem = [("conv0", nn.Conv2d(in_channels, num_init_features, 3, padding=1, bias=False))]
        else:
            stem = [("conv0", nn.Conv2d(in_channels, num_init_features, 7, 2, 3, bias=False))]
        stem += [("norm0", nn.BatchNorm2d(num_init_features)), ("relu0", nn.ReLU())]
        if not small_input:
            stem.append(("pool0", nn.MaxPool2d(3, stride=2, padding=1)))
        self.features = nn.Sequential(OrderedDict(stem))
        channels = num_init_features
        for index, num_layers in enumerate(block_config):
            self.features.add_module(f"denseblock{index + 1}", DenseBlock(num_layers, channels, growth, bn_size))
            channels += num_layers * growth
            if index != len(block_config) - 1:
                self.features.add_module(f"transition{index + 1}", Transition(channels, channels // 2))
                channels //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(channels))
        self.relu = nn.ReLU()
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.classifier = nn.Linear(channels, num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight)
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Linear):
                nn.init.zeros_(module.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.relu(self.features(x))
        return self.classifier(self.avgpool(x).flatten(1))


def densenet121(num_classes: int = 1000, in_channels: int = 3, small_input: bool = False) -> DenseNet:
    """Build DenseNet-121 (growth 32, blocks 6-12-24-16)."""
    return DenseNet(32, (6, 12, 24, 16), 64, 4, num_classes, in_channels, small_input)
