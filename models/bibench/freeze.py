"""Freeze a trained binarized model into the inference form the converters emit.

Every binarized convolution becomes an :class:`aiot.models.binary.BinaryConv2d` holding
``sign(effective weight)``, its scale as a fixed per-channel ``alpha`` and, for ReActNet,
its threshold; training-only parts (FDA's noise adaptation, ReCU's schedule) disappear.
The frozen model computes exactly what the binarized one computes in eval mode, which
:func:`freeze` checks on a probe input before returning.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from aiot.core.errors import ConversionError
from aiot.models.bibench.algorithms import get_algorithm
from aiot.models.bibench.base import BinarizedConv2d, BinarizedLinear, hard_sign
from aiot.models.bibench.binarize import binarized_layers, replace_module
from aiot.models.binary import BinaryConv2d


def freeze(model: nn.Module, fmt: str, example: torch.Tensor | None = None) -> nn.Module:
    """A deployable copy of the binarized ``model`` (the original is left untouched).

    Args:
        model: a model returned by :func:`aiot.models.bibench.binarize` (weights loaded).
        fmt: the target format, for error messages.
        example: an input to check the frozen copy against the original on.

    Raises:
        ConversionError: a layer has no deployable form (input-dependent or spatial scales,
            a binarized linear layer, grouped or dilated binary convs).
    """
    algorithm = getattr(model, "binarized_with", None)
    frozen = copy.deepcopy(model).eval()
    for name, layer in binarized_layers(frozen):
        replace_module(frozen, name, _frozen_layer(name, layer, algorithm, fmt))
    if example is not None:
        _check_same(model, frozen, example, fmt)
    return frozen


def _frozen_layer(name: str, layer, algorithm: str | None, fmt: str) -> nn.Module:
    title = get_algorithm(algorithm).title if algorithm else layer.algorithm
    if isinstance(layer, BinarizedLinear):
        raise ConversionError(fmt, "freeze", f"layer '{name}' is a binarized linear layer, which "
                              f"aiot's {fmt} export has no binary op for",
                              "keep linear layers in full precision (BiBench binarizes convs)")
    assert isinstance(layer, BinarizedConv2d)
    problems = []
    if layer.groups != 1 or tuple(layer.dilation) != (1, 1):
        problems.append("grouped or dilated binary convs are not supported")
    if type(layer).output_scale is not BinarizedConv2d.output_scale:
        problems.append(f"{title} rescales the output by an input- or position-dependent factor")
    if problems:
        raise ConversionError(fmt, "freeze", f"layer '{name}' ({title}) is not deployable: "
                              f"{'; '.join(problems)}", "pick a deployable algorithm, e.g. bnn or reactnet")
    with torch.no_grad():
        weight = layer.effective_weight()
        scale = layer.weight_scale(weight)
        threshold = getattr(layer, "threshold", None)
        if layer.stride[0] != layer.stride[1]:
            raise ConversionError(fmt, "freeze", f"layer '{name}' has a stride that differs between "
                                  "height and width", "use one stride for both axes in binarized layers")
        # A non-square kernel (Inception's 1x7) stays so: LCE binarizes it as it is, and
        # daBNN's emitter refuses it by name.
        out = BinaryConv2d(layer.in_channels, layer.out_channels, tuple(layer.kernel_size),
                           layer.stride[0], layer.binary_padding, pad_value=-1.0, scale=False)
        out.weight.copy_(hard_sign(weight))
        if scale is not None:
            out.fixed_alpha = scale.detach().expand(layer.out_channels).clone().float()
        if threshold is not None:
            out.threshold = threshold.detach().clone().float()
    if layer.bias is not None:  # SqueezeNet's convs keep their bias
        return nn.Sequential(out, bias_as_batchnorm(layer.bias)).to(layer.weight.device)
    return out.to(layer.weight.device)


def bias_as_batchnorm(bias: torch.Tensor) -> nn.BatchNorm2d:
    """A conv's bias as an eval BatchNorm that computes exactly ``x + bias`` (unit weight and
    variance, zero mean, eps 0): the affine form every binary emitter folds into a binary
    conv's output (LCE's output bias, daBNN's Affine), where a bare add has no place."""
    norm = nn.BatchNorm2d(len(bias), eps=0.0)
    with torch.no_grad():
        norm.bias.copy_(bias.detach().float())
    return norm.eval()


def _check_same(model: nn.Module, frozen: nn.Module, example: torch.Tensor, fmt: str) -> None:
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            expected, got = model(example), frozen(example)
    finally:
        model.train(was_training)
    error = float((expected - got).abs().max())
    scale = float(expected.abs().max()) or 1.0
    if error > 1e-4 * max(scale, 1.0):
        raise ConversionError(fmt, "freeze", f"the frozen model differs from the binarized one by "
                              f"{error:.3g}", "please report it")
