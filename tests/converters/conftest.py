"""Converter tests that need a toolchain environment skip without it — except under
``make test`` (AIOT_REQUIRE_TOOLCHAINS=1), where bootstrap installed them and a missing one
is a failure."""

import os

import pytest


def need_toolchain(name: str) -> None:
    """Skip (or fail under AIOT_REQUIRE_TOOLCHAINS=1) when toolchain ``name`` is missing."""
    from aiot.core import toolchains

    if toolchains.installed(name) is None:
        if os.environ.get("AIOT_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail(f"the {name} toolchain is not installed: run aiot toolchains install {name}")
        pytest.skip(f"{name} toolchain not installed (aiot toolchains install {name})")


def randomize_bn(model, seed=0, *, signed_gamma=False, bias=0.1, mean=0.1, var=1.0):
    """Every BatchNorm moved away from identity (seeded), so an emitter's folding of its
    statistics really matters; ``signed_gamma`` makes scales of both signs. Returns the
    model in eval mode."""
    import torch
    from torch import nn

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                gamma = torch.randn(c, generator=gen) if signed_gamma else torch.rand(c, generator=gen) + 0.5
                m.weight.copy_(gamma)
                m.bias.copy_(torch.randn(c, generator=gen) * bias)
                m.running_mean.copy_(torch.randn(c, generator=gen) * mean)
                m.running_var.copy_(torch.rand(c, generator=gen) * var + 0.5)
    return model.eval()
