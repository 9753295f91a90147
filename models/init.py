"""Weight initialisation shared by the zoo's architectures."""

from __future__ import annotations

from torch import nn


def he_conv_identity_bn(root: nn.Module) -> None:
    """He init (fan_out, as in the ResNet reference code) for convs; BN starts as identity."""
    for module in root.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(module, nn.BatchNorm2d):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
