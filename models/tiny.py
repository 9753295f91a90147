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

from aiot.models.binary import BinaryConv2d


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


class TinyBNN(nn.Module):
    """A small binarized network for tests of binarized runtimes (LCE, daBNN).

    Full-precision first conv (1→64, BN, ReLU, 2x2 max-pool) and last linear layer, as in
    BiBench; in between three binary 3x3 convs each followed by BatchNorm: 64→128, 128→128 at
    stride 2 (an even 14 px input, the case LCE's padding fusion gets wrong) and 128→128,
    then global average pooling. Channel counts are multiples of 64, as daBNN requires, and
    128 wherever daBNN's ARMv8 kernels need an even pixel count (a 7x7 map at 64 channels
    trips an assertion in its 3x3 kernel).
    """

    def __init__(self, num_classes: int = 10, in_channels: int = 1) -> None:
        super().__init__()
        self.features = nn.Sequential(OrderedDict([
            ("conv1", nn.Conv2d(in_channels, 64, 3, padding=1, bias=False)),
            ("bn1", nn.BatchNorm2d(64)),
            ("relu1", nn.ReLU()),
            ("pool1", nn.MaxPool2d(2, 2)),
            ("bconv2", BinaryConv2d(64, 128, 3, padding=1)),
            ("bn2", nn.BatchNorm2d(128)),
            ("bconv3", BinaryConv2d(128, 128, 3, stride=2, padding=1)),
            ("bn3", nn.BatchNorm2d(128)),
            ("bconv4", BinaryConv2d(128, 128, 3, padding=1)),
            ("bn4", nn.BatchNorm2d(128)),
            ("pool4", nn.AdaptiveAvgPool2d(1)),
        ]))  # fmt: skip
        self.classifier = nn.Linear(128, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x).flatten(1))


def tiny_bnn(num_classes: int = 10, in_channels: int = 1) -> TinyBNN:
    """Build the tiny binarized network (see :class:`TinyBNN`)."""
    return TinyBNN(num_classes, in_channels)


class TinyVGG(nn.Module):
    """The full-precision twin of :class:`TinyBNN`, to be binarized with a BiBench algorithm.

    conv 1→64 (BN, ReLU, 2x2 max-pool), then 3x3 convs 64→128, 128→128 at stride 2 and
    128→128, each with BN and ReLU, global average pooling and a linear classifier. Its
    binarized form (first conv and classifier kept in full precision) has the shapes daBNN
    and LCE need: multiples of 64 channels and even maps where daBNN's kernels want them.
    About 0.37 M parameters and 29 M MACs at 28 px.
    """

    def __init__(self, num_classes: int = 10, in_channels: int = 1) -> None:
        super().__init__()
        self.features = nn.Sequential(OrderedDict([
            ("conv1", nn.Conv2d(in_channels, 64, 3, padding=1, bias=False)),
            ("bn1", nn.BatchNorm2d(64)),
            ("relu1", nn.ReLU()),
            ("pool1", nn.MaxPool2d(2, 2)),
            ("conv2", nn.Conv2d(64, 128, 3, padding=1, bias=False)),
            ("bn2", nn.BatchNorm2d(128)),
            ("relu2", nn.ReLU()),
            ("conv3", nn.Conv2d(128, 128, 3, stride=2, padding=1, bias=False)),
            ("bn3", nn.BatchNorm2d(128)),
            ("relu3", nn.ReLU()),
            ("conv4", nn.Conv2d(128, 128, 3, padding=1, bias=False)),
            ("bn4", nn.BatchNorm2d(128)),
            ("relu4", nn.ReLU()),
            ("pool4", nn.AdaptiveAvgPool2d(1)),
        ]))  # fmt: skip
        self.classifier = nn.Linear(128, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x).flatten(1))


def tiny_vgg(num_classes: int = 10, in_channels: int = 1) -> TinyVGG:
    """Build the tiny VGG-style network (see :class:`TinyVGG`)."""
    return TinyVGG(num_classes, in_channels)
