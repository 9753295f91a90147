"""MnasNet-B1, depth multiplier 1.0 (Tan et al., "MnasNet: Platform-Aware Neural Architecture
Search for Mobile", CVPR 2019).

Which MnasNet: AIoTBench's PyTorch Mobile and Caffe2 MnasNet were converted from torchvision,
whose ``mnasnet1_0`` is the B1 search result *without* squeeze-and-excitation (4.38 M params,
~315 M MACs). The paper's Table II quotes 3.9 M params, which is MnasNet-A1 (with SE, the
TFLite model zoo's version). We build B1 because it is what the PyTorch implementations ran.
Module names match torchvision's, so its ``state_dict`` loads unchanged.

The small-input variant removes the first 4x of downsampling, like the CIFAR ResNets: stride 1
in the stem conv and in the first stack (24 channels), so 32 px inputs end in a 4x4 map.
"""

from __future__ import annotations

from torch import Tensor, nn

from aiot.models.init import he_conv_identity_bn

# TensorFlow's BatchNorm decay 0.9997 expressed as a PyTorch momentum.
BN_MOMENTUM = 1 - 0.9997

# (out channels, kernel, first stride, expansion, repeats) of the six searched stacks.
STACKS = (
    (24, 3, 2, 3, 3),
    (40, 5, 2, 3, 3),
    (80, 5, 2, 6, 3),
    (96, 3, 1, 6, 2),
    (192, 5, 2, 6, 4),
    (320, 3, 1, 6, 1),
)


class MnasInvertedResidual(nn.Module):
    """1x1 expand -> kxk depthwise -> 1x1 linear projection; residual when shapes allow."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int, expansion: int) -> None:
        super().__init__()
        mid = in_ch * expansion
        self.apply_residual = in_ch == out_ch and stride == 1
        self.layers = nn.Sequential(
            nn.Conv2d(in_ch, mid, 1, bias=False),
            nn.BatchNorm2d(mid, momentum=BN_MOMENTUM),
            nn.ReLU(),
            nn.Conv2d(mid, mid, kernel, stride, kernel // 2, groups=mid, bias=False),
            nn.BatchNorm2d(mid, momentum=BN_MOMENTUM),
            nn.ReLU(),
            nn.Conv2d(mid, out_ch, 1, bias=False),
            nn.BatchNorm2d(out_ch, momentum=BN_MOMENTUM),
        )

    def forward(self, x: Tensor) -> Tensor:
        # apply_residual is fixed at construction: a static graph for export.
        if self.apply_residual:
            return self.layers(x) + x
        return self.layers(x)


def _stack(in_ch: int, out_ch: int, kernel: int, stride: int, expansion: int, repeats: int) -> nn.Sequential:
    blocks = [MnasInvertedResidual(in_ch, out_ch, kernel, stride, expansion)]
    blocks += [MnasInvertedResidual(out_ch, out_ch, kernel, 1, expansion) for _ in range(repeats - 1)]
    return nn.Sequential(*blocks)


class MnasNet(nn.Module):
    """MnasNet-B1 1.0.

    Args:
        num_classes: logits size.
        in_channels: input channels.
        small_input: stride 1 in the stem and the first stack, for 28-32 px inputs.
        dropout: dropout before the classifier (0.2, as torchvision).
    """

    def __init__(
        self,
        num_classes: int = 1000,
        in_channels: int = 3,
        small_input: bool = False,
        dropout: float = 0.2,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv2d(in_channels, 32, 3, stride=1 if small_input else 2, padding=1, bias=False),
            nn.BatchNorm2d(32, momentum=BN_MOMENTUM),
            nn.ReLU(),
            # "SepConv" first block: depthwise 3x3 then linear 1x1 to 16 channels.
            nn.Conv2d(32, 32, 3, padding=1, groups=32, bias=False),
            nn.BatchNorm2d(32, momentum=BN_MOMENTUM),
            nn.ReLU(),
            nn.Conv2d(32, 16, 1, bias=False),
            nn.BatchNorm2d(16, momentum=BN_MOMENTUM),
        ]
        in_ch = 16
        for index, (out_ch, kernel, stride, expansion, repeats) in enumerate(STACKS):
            if small_input and index == 0:
                stride = 1  # keep full resolution through the 24-channel stack
            layers.append(_stack(in_ch, out_ch, kernel, stride, expansion, repeats))
            in_ch = out_ch
        layers += [
            nn.Conv2d(in_ch, 1280, 1, bias=False),
            nn.BatchNorm2d(1280, momentum=BN_MOMENTUM),
            nn.ReLU(),
        ]
        self.layers = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(1280, num_classes))
        self._init_weights()

    def _init_weights(self) -> None:
        he_conv_identity_bn(self)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.kaiming_uniform_(module.weight, mode="fan_out", nonlinearity="sigmoid")

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.avgpool(self.layers(x)).flatten(1))


def mnasnet(num_classes: int = 1000, in_channels: int = 3, small_input: bool = False) -> MnasNet:
    """Build MnasNet-B1 1.0 (see :class:`MnasNet`)."""
    return MnasNet(num_classes, in_channels, small_input)
