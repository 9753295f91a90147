"""VGG-Small, the CIFAR-10 VGG variant of the binarization literature (LQ-Nets, Zhang et al.,
ECCV 2018; used by IR-Net, BiBench and others).

Six 3x3 convs with 128-128-256-256-512-512 channels, a 2x2 max-pool after every second
conv, BatchNorm + ReLU after each conv, and one linear classifier on the flattened
512 x 4 x 4 map (for 32 px inputs). As in those codebases the pool comes *before* the
BatchNorm of the layers it follows, convs have no bias, and there is no dropout.

The network is CIFAR-sized by design (an ImageNet-sized VGG-Small would need a 400 M
parameter classifier); for 28 px inputs the flattened map is 512 x 3 x 3.
"""

from __future__ import annotations

from collections import OrderedDict

from torch import Tensor, nn

from aiot.models.init import he_conv_identity_bn

CHANNELS = (128, 128, 256, 256, 512, 512)


def _features(in_channels: int) -> tuple[nn.Sequential, int]:
    """Conv stack named conv0..conv5 / pool{1,3,5} / bn0..bn5 / relu0..relu5; returns it and
    the number of 2x downsamplings."""
    layers: list[tuple[str, nn.Module]] = []
    previous = in_channels
    pools = 0
    for index, channels in enumerate(CHANNELS):
        layers.append((f"conv{index}", nn.Conv2d(previous, channels, 3, padding=1, bias=False)))
        if index % 2 == 1:
            layers.append((f"pool{index}", nn.MaxPool2d(2, 2)))
            pools += 1
        layers.append((f"bn{index}", nn.BatchNorm2d(channels)))
        layers.append((f"relu{index}", nn.ReLU()))
        previous = channels
    return nn.Sequential(OrderedDict(layers)), pools


class VGGSmall(nn.Module):
    """VGG-Small.

    Args:
        num_classes: logits size.
        in_channels: input channels.
        image_size: input height and width (square), which fixes the classifier's input size.
    """

    def __init__(self, num_classes: int = 10, in_channels: int = 3, image_size: int = 32) -> None:
        super().__init__()
        self.features, pools = _features(in_channels)
        side = image_size
        for _ in range(pools):
            side //= 2  # MaxPool2d(2, 2) floors odd sizes
        if side < 1:
            raise ValueError(f"VGG-Small needs inputs of at least {2 ** pools} px, got {image_size}")
        self.classifier = nn.Linear(CHANNELS[-1] * side * side, num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        he_conv_identity_bn(self)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x).flatten(1))


def vgg_small(num_classes: int = 10, in_channels: int = 3, image_size: int = 32) -> VGGSmall:
    """Build VGG-Small for square ``image_size`` inputs (see :class:`VGGSmall`)."""
    return VGGSmall(num_classes, in_channels, image_size)
