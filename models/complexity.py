"""Count parameters and multiply-accumulates (MACs) of a PyTorch model from one forward pass.

Convention (the one torchvision, fvcore and the papers' "FLOPs" tables use):

* A MAC is one multiply plus one add. ``Conv2d`` costs ``out_elements * (C_in / groups) * kH * kW``
  (so depthwise and grouped convolutions are counted correctly); ``Linear`` costs
  ``in_features * out_features`` per input row.
* Bias additions, BatchNorm, activations, pooling, element-wise additions (residuals) and
  concatenations count as 0 MACs. For the zoo's networks they are well under 1 % of the total.
* ``params`` is every parameter of the model (BatchNorm affine included, buffers such as
  running statistics excluded), like ``sum(p.numel() for p in model.parameters())``.
* MACs are for one image: the count is divided by the batch size of the probe input.

AIoTBench and BiBench call this quantity "FLOPs"; it is the same number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported by the counting functions: the zoo's import needs none
    import torch
    from torch import nn


def _zero_mac_kinds() -> tuple:
    """Layer kinds that get their own row in Complexity.by_layer even though they cost 0 MACs."""
    from torch import nn

    return (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm)


@dataclass(frozen=True)
class Complexity:
    """Size and cost of a model.

    Args:
        params: number of parameters (all of ``model.parameters()``).
        macs: multiply-accumulates for one image (batch 1).
        by_layer: ``(layer_name, kind, params, macs)`` rows in execution order, one per
            Conv2d/Linear call and per normalisation layer; a module called twice gets two rows.
    """

    params: int
    macs: int
    by_layer: tuple[tuple[str, str, int, int], ...] = ()

    @property
    def params_m(self) -> float:
        """Parameters in millions."""
        return self.params / 1e6

    @property
    def macs_m(self) -> float:
        """MACs in millions (the unit of AIoTBench's Table II)."""
        return self.macs / 1e6

    def to_dict(self) -> dict[str, int]:
        """JSON-able totals (the per-layer rows are left out to keep sidecars small)."""
        return {"params": self.params, "macs": self.macs}


def conv2d_macs(module: nn.Conv2d, output: torch.Tensor) -> int:
    """MACs of one Conv2d call for the whole batch in ``output``."""
    kh, kw = module.kernel_size
    per_output = (module.in_channels // module.groups) * kh * kw
    return output.numel() * per_output


def linear_macs(module: nn.Linear, output: torch.Tensor) -> int:
    """MACs of one Linear call for the whole batch in ``output``."""
    return output.numel() * module.in_features


def _own_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters(recurse=False))


def count_complexity(model: nn.Module, input_shape: tuple[int, ...]) -> Complexity:
    """Count parameters and MACs by running one forward pass with hooks.

    The model is run under ``torch.no_grad()`` in eval mode on a zero tensor, and its
    training flag is restored afterwards. See the module docstring for the convention.

    Args:
        model: any ``nn.Module`` built from Conv2d/Linear and zero-cost layers.
        input_shape: full input shape including the batch dimension, e.g. ``(1, 3, 224, 224)``.

    Returns:
        The :class:`Complexity` for one image.
    """
    import torch
    from torch import nn

    rows: list[tuple[str, str, int, int]] = []
    names = {module: name for name, module in model.named_modules()}

    def hook(module: nn.Module, _inputs: tuple, output: torch.Tensor) -> None:
        if isinstance(module, nn.Conv2d):
            macs = conv2d_macs(module, output)
        elif isinstance(module, nn.Linear):
            macs = linear_macs(module, output)
        else:
            macs = 0
        rows.append((names.get(module, "?"), type(module).__name__, _own_params(module), macs))

    handles = [
        m.register_forward_hook(hook)
        for m in model.modules()
        if isinstance(m, (nn.Conv2d, nn.Linear, *_zero_mac_kinds()))
    ]
    was_training = model.training
    try:
        model.eval()
        device = next((p.device for p in model.parameters()), torch.device("cpu"))
        with torch.no_grad():
            model(torch.zeros(input_shape, device=device))
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)

    batch = max(int(input_shape[0]), 1)
    scaled = tuple((n, k, p, m // batch) for n, k, p, m in rows)
    params = sum(p.numel() for p in model.parameters())
    return Complexity(params=params, macs=sum(r[3] for r in scaled), by_layer=scaled)


def count_built(builder, input_shape: tuple[int, ...]) -> Complexity:
    """:func:`count_complexity` of the model ``builder()`` makes, built on PyTorch's ``meta``
    device where it can be: counting needs shapes only, and a meta model allocates no weights,
    initialises none and computes nothing (an ImageNet-size zoo model counts in a fraction of
    the time). A model that cannot be built or run there (a data-dependent forward, a builder
    that reads real tensors) is built and counted on the CPU instead."""
    import torch

    try:
        with torch.device("meta"):
            model = builder()
        return count_complexity(model, input_shape)
    except Exception:  # noqa: BLE001 - any meta failure: count the real model (it raises its own)
        return count_complexity(builder(), input_shape)

