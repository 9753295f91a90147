"""SqueezeNet 1.0 and 1.1 (Iandola et al., "SqueezeNet: AlexNet-level accuracy with 50x fewer
parameters and <0.5MB model size", 2016).

Which version: the zoo's ``squeezenet`` is **1.0**, because AIoTBench's Table II gives
1.25 M params and 833 M FLOPs, which is version 1.0 (1.1 has 1.24 M params but only ~350 M
MACs). ``squeezenet1_1`` is registered too for comparison. Module names and layer indices
match torchvision's ``squeezenet1_0`` / ``squeezenet1_1``.

Max-pools use ``ceil_mode=True`` as in the original Caffe model and torchvision; SysNoise
lists ceil-vs-floor pooling as a deployment inconsistency, so keep it when converting.

The small-input variant replaces the first conv with a 3x3/stride-1 conv (same width) and
the first max-pool with an identity, keeping the indices so state-dict keys stay aligned.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class Fire(nn.Module):
    """Squeeze 1x1 then two parallel expand convs (1x1 and 3x3), concatenated."""

    def __init__(self, in_ch: int, squeeze: int, expand1x1: int, expand3x3: int) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(in_ch, squeeze, 1)
        self.squeeze_activation = nn.ReLU()
        self.expand1x1 = nn.Conv2d(squeeze, expand1x1, 1)
        self.expand1x1_activation = nn.ReLU()
        self.expand3x3 = nn.Conv2d(squeeze, expand3x3, 3, padding=1)
        self.expand3x3_activation = nn.ReLU()

    def forward(self, x: Tensor) -> Tensor:
        x = self.squeeze_activation(self.squeeze(x))
        return torch.cat(
            [self.expand1x1_activation(self.expand1x1(x)), self.expand3x3_activation(self.expand3x3(x))], 1
        )


def _pool() -> nn.MaxPool2d:
    return nn.MaxPool2d(3, stride=2, ceil_mode=True)


class SqueezeNet(nn.Module):
    """SqueezeNet 1.0 or 1.1 with the fully convolutional classifier of the paper.

    Args:
        version: ``"1_0"`` or ``"1_1"``.
        num_classes: logits size.
        in_channels: input channels.
        small_input: 3x3/stride-1 first conv and no first max-pool, for 28-32 px inputs.
        dropout: dropout before the final conv (0.5, as in the paper).
    """

    def __init__(
        self,
        version: str = "1_0",
        num_classes: int = 1000,
        in_channels: int = 3,
        small_input: bool = False,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        first_pool: nn.Module = nn.Identity() if small_input else _pool()
        if version == "1_0":
            stem = (
                nn.Conv2d(in_channels, 96, 3, padding=1)
                if small_input
                else nn.Conv2d(in_channels, 96, 7, stride=2)
            )
            self.features = nn.Sequential(
                stem, nn.ReLU(), first_pool,
                Fire(96, 16, 64, 64), Fire(128, 16, 64, 64), Fire(128, 32, 128, 128),
                _pool(),
                Fire(256, 32, 128, 128), Fire(256, 48, 192, 192), Fire(384, 48, 192, 192),
                Fire(384, 64, 256, 256),
                _pool(),
                Fire(512, 64, 256, 256),
            )  # fmt: skip
        elif version == "1_1":
            stem = (
                nn.Conv2d(in_channels, 64, 3, padding=1)
                if small_input
                else nn.Conv2d(in_channels, 64, 3, stride=2)
            )
            self.features = nn.Sequential(
                stem, nn.ReLU(), first_pool,
                Fire(64, 16, 64, 64), Fire(128, 16, 64, 64),
                _pool(),
                Fire(128, 32, 128, 128), Fire(256, 32, 128, 128),
                _pool(),
                Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256),
                Fire(512, 64, 256, 256),
            )  # fmt: skip
        else:
            raise ValueError(f"SqueezeNet version must be '1_0' or '1_1', got {version!r}")
        final_conv = nn.Conv2d(512, num_classes, 1)
        self.classifier = nn.Sequential(
            nn.Dropout(dropout), final_conv, nn.ReLU(), nn.AdaptiveAvgPool2d((1, 1))
        )
        self._init_weights(final_conv)

    def _init_weights(self, final_conv: nn.Conv2d) -> None:
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                # The classifier conv starts small so initial logits are near uniform.
                if module is final_conv:
                    nn.init.normal_(module.weight, mean=0.0, std=0.01)
                else:
                    nn.init.kaiming_uniform_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x)).flatten(1)


def squeezenet(
    version: str = "1_0", num_classes: int = 1000, in_channels: int = 3, small_input: bool = False
) -> SqueezeNet:
    """Build SqueezeNet ``version`` ("1_0" or "1_1")."""
    return SqueezeNet(version, num_classes, in_channels, small_input)
