"""Model-inference variants: the same weights, run with an operator a deployment implements differently.

SysNoise's model-side noise (``../shared/spec.md`` §5): a max-pool trained with ``ceil_mode``
off and deployed with it on (or the reverse), and upsampling trained nearest and deployed
bilinear (or the reverse). Each variant is a modified *copy* of the PyTorch model, evaluated on
the reference pipeline's inputs against the unmodified model.

A variant that cannot matter for this model is :class:`NotApplicable` with the reason: no such
layer, or (ceil_mode) every pooled map divides evenly, so floor and ceil give the same shape
and therefore the same values.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np


class NotApplicable(Exception):
    """The variant does not change this model; the message says why."""


#: Option name -> what it changes.
VARIANTS = {
    "maxpool-ceil": "max-pool ceil_mode flipped",
    "upsample-mode": "upsampling nearest <-> bilinear",
}


def _pools(model) -> list[tuple[str, object]]:
    from torch import nn

    return [(name, m) for name, m in model.named_modules()
            if isinstance(m, nn.MaxPool1d | nn.MaxPool2d | nn.MaxPool3d)]


def _pool_shapes(model, example) -> dict[str, tuple]:
    """Output shape of every max-pool on ``example`` (forward hooks; the forward may fail later)."""
    import torch

    shapes: dict[str, tuple] = {}

    def record(name: str):
        def hook(_module, _inputs, output) -> None:  # returning a value would replace the output
            shapes.setdefault(name, tuple(output.shape))

        return hook

    hooks = [m.register_forward_hook(record(name)) for name, m in _pools(model)]
    try:
        with torch.inference_mode():
            model(example)
    except RuntimeError:
        pass  # a changed shape may break a later layer; the shapes seen so far are what counts
    finally:
        for hook in hooks:
            hook.remove()
    return shapes


def ceil_mode_variant(model, example):
    """A copy of ``model`` with every max-pool's ``ceil_mode`` flipped.

    Args:
        model: the eval-mode PyTorch model.
        example: one input batch (a tensor) to see which pooled shapes change.

    Returns:
        ``(variant, changes)``: the modified copy and one ``name: shape -> shape`` per changed pool.

    Raises:
        NotApplicable: no max-pool, or no pooled shape changes on this input size.
    """
    pools = _pools(model)
    if not pools:
        raise NotApplicable("the model has no max-pool layer")
    variant = copy.deepcopy(model).eval()
    for _name, pool in _pools(variant):
        pool.ceil_mode = not pool.ceil_mode
    before, after = _pool_shapes(model, example), _pool_shapes(variant, example)
    changes = [f"{name}: {list(before[name][2:])} -> {list(after[name][2:])}"
               for name in before if name in after and before[name] != after[name]]
    if not changes:
        sizes = ", ".join(f"{name} {list(before[name][2:])}" for name in before)
        raise NotApplicable(f"ceil_mode changes no max-pool output on this input ({sizes}): "
                            "every pooled map divides evenly")
    return variant, changes


_SWAP = {"nearest": "bilinear", "bilinear": "nearest"}


class UpsampleSwapped:
    """Calls a model with every 2-D nearest/bilinear interpolation swapped to the other mode.

    ``nn.Upsample`` and functional ``F.interpolate`` calls both go through
    ``torch.nn.functional.interpolate``, so swapping that function for the duration of the
    forward pass covers both. ``swapped`` counts the calls that were changed.
    """

    def __init__(self, model) -> None:
        self.model = model
        self.swapped = 0

    def __call__(self, x):
        from unittest import mock

        import torch.nn.functional as F

        original = F.interpolate

        def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, **kw):
            if mode in _SWAP and input.dim() == 4:
                self.swapped += 1
                mode = _SWAP[mode]
                align_corners = False if mode == "bilinear" else None
            return original(input, size, scale_factor, mode, align_corners, **kw)

        with mock.patch.object(F, "interpolate", interpolate):
            return self.model(x)


def upsample_variant(model, example):
    """``model`` with nearest and bilinear upsampling swapped (a copy, run through :class:`UpsampleSwapped`).

    Returns:
        ``(variant, changes)``: a callable model and a one-line description of the change.

    Raises:
        NotApplicable: the forward pass does no nearest or bilinear 2-D upsampling.
    """
    import torch

    variant = UpsampleSwapped(copy.deepcopy(model).eval())
    with torch.inference_mode():
        variant(example)
    if not variant.swapped:
        raise NotApplicable("the model does no nearest or bilinear upsampling")
    return variant, [f"{variant.swapped} upsampling call(s) swapped per forward pass"]


#: Option name -> builder ``(model, example) -> (variant, changes)``.
BUILDERS: dict[str, Callable] = {"maxpool-ceil": ceil_mode_variant, "upsample-mode": upsample_variant}


def variant_logits(variant, x: np.ndarray, batch: int = 64) -> np.ndarray:
    """Scores of a variant (module or callable) for float32 inputs ``x``, ``batch`` rows at a time."""
    import torch

    outs = []
    with torch.inference_mode():
        for start in range(0, len(x), batch):
            out = variant(torch.from_numpy(np.ascontiguousarray(x[start:start + batch])))
            outs.append(out.detach().float().numpy().reshape(len(out), -1))
    return np.concatenate(outs) if outs else np.zeros((0, 0), np.float32)
