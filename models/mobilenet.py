"""MobileNetV2 (Sandler et al., "MobileNetV2: Inverted Residuals and Linear Bottlenecks", CVPR 2018).

Width multiplier 1.0, Table 2 of the paper: a 32-channel 3x3/stride-2 stem, 17 inverted
residual blocks, a 1x1 conv to 1280 channels, global pooling and a linear classifier.
Module names match torchvision's ``mobilenet_v2`` so its ``state_dict`` loads unchanged.

The small-input variant removes the first 4x of downsampling, like the CIFAR ResNets: the stem
conv and the first stride-2 stage (24 channels) get stride 1, so a 32 px input ends in a 4x4
map (7x7 at 224 px for ImageNet). This is the common CIFAR MobileNetV2 (e.g. pytorch-cifar).
"""

from __future__ import annotations

from torch import Tensor, nn

# (expansion t, output channels c, repeats n, first stride s) from the paper's Table 2.
INVERTED_RESIDUAL_SETTING = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


class ConvBNReLU6(nn.Sequential):
    """Conv (no bias) -> BatchNorm -> ReLU6, indexed 0/1/2 like torchvision's Conv2dNormActivation."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int = 3, stride: int = 1, groups: int = 1) -> None:
        super().__init__(
            nn.Conv2d(in_ch, out_ch, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(out_ch),
            nn.ReLU6(),
        )


class InvertedResidual(nn.Module):
    """1x1 expand -> 3x3 depthwise -> 1x1 linear projection, residual when shapes allow."""

    def __init__(self, in_ch: int, out_ch: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden = in_ch * expand_ratio
        self.use_res_connect = stride == 1 and in_ch == out_ch
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(ConvBNReLU6(in_ch, hidden, kernel=1))
        layers += [
            ConvBNReLU6(hidden, hidden, stride=stride, groups=hidden),
            nn.Conv2d(hidden, out_ch, 1, bias=False),  # linear bottleneck: no activation
            nn.BatchNorm2d(out_ch),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        # use_res_connect is fixed at construction, so tracing/export sees a static graph.
        if self.use_res_connect:
            return x + self.conv(x)
        return self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 with width multiplier 1.0.

    Args:
        num_classes: logits size.
        in_channels: input channels.
        small_input: stride 1 in the stem and the first stride-2 stage, for 28-32 px inputs.
        dropout: dropout before the classifier (0.2 as in the paper's training recipe).
    """

    def __init__(
        self,
        num_classes: int = 1000,
        in_channels: int = 3,
        small_input: bool = False,
        dropout: float = 0.2,
    ) -> None:
        super().__init__()
        in_ch, last_ch = 32, 1280
        features: list[nn.Module] = [ConvBNReLU6(in_channels, in_ch, stride=1 if small_input else 2)]
        for stage, (t, c, n, s) in enumerate(INVERTED_RESIDUAL_SETTING):
            if small_input and stage == 1:
                s = 1  # keep full resolution through the 24-channel stage
            for index in range(n):
                features.append(InvertedResidual(in_ch, c, s if index == 0 else 1, t))
                in_ch = c
        features.append(ConvBNReLU6(in_ch, last_ch, kernel=1))
        self.features = nn.Sequential(*features)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(last_ch, num_classes))
        self._init_weights()

    def _init_weights(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, 0, 0.01)
                nn.init.zeros_(module.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.avgpool(self.features(x)).flatten(1))


def mobilenet_v2(num_classes: int = 1000, in_channels: int = 3, small_input: bool = False) -> MobileNetV2:
    """Build MobileNetV2 1.0 (see :class:`MobileNetV2`)."""
    return MobileNetV2(num_classes, in_channels, small_input)
