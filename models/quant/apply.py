"""``quantize(model, method, bits)``: swap a model's layers for a method's quantized ones.

RobustMQ's rule (as BiBench's for binarization): every ``Conv2d`` and ``Linear`` is quantized
except the first and the last in registration order, which for the zoo's models is execution
order: the stem conv and the classifier stay full precision. Weights are copied, so quantizing
a trained float model is the start of quantization-aware training. Activations are left as
they are: each quantized layer quantizes its own input.
"""

from __future__ import annotations

import importlib
import logging

from torch import nn

from aiot.core.errors import UsageError
from aiot.models.quant.base import QuantizedLayer
from aiot.models.quant.methods import METHODS, Quantization, quantization

log = logging.getLogger(__name__)


def quantizable_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """``(name, module)`` of every Conv2d/Linear that the first/last rule quantizes."""
    candidates = [(name, m) for name, m in model.named_modules()
                  if isinstance(m, (nn.Conv2d, nn.Linear)) and not isinstance(m, QuantizedLayer)]
    return candidates[1:-1]


def quantized_layers(model: nn.Module) -> list[tuple[str, QuantizedLayer]]:
    """The model's quantized layers, ``(name, module)`` in registration order."""
    return [(n, m) for n, m in model.named_modules() if isinstance(m, QuantizedLayer)]


def quantize(model: nn.Module, method: str, bits: int) -> nn.Module:
    """Quantize ``model`` in place with ``method`` at ``bits`` and return it.

    Args:
        model: a full-precision model (trained or not).
        method: ``dorefa``, ``pact`` or ``lsq``.
        bits: 2, 4, 6 or 8.

    Raises:
        UnknownName: unknown method (with close names).
        UsageError: bits outside RobustMQ's widths, an already binarized or quantized model,
            or a model with nothing to quantize.
    """
    chosen = quantization(method, bits)
    if getattr(model, "binarized_with", None) or getattr(model, "quantized_with", None):
        raise UsageError(f"{type(model).__name__} is already binarized or quantized",
                         "quantize the full-precision model")
    targets = quantizable_layers(model)
    if not targets:
        raise UsageError(f"{type(model).__name__} has no layer to quantize: the first and last "
                         "Conv2d/Linear stay full precision and it has no others",
                         "pick a model with at least three conv/linear layers")
    conv_cls, linear_cls = importlib.import_module(
        f"aiot.models.quant.{METHODS.get(chosen.method).module}").LAYERS
    from aiot.models.bibench.binarize import replace_module

    for name, module in targets:
        cls = conv_cls if isinstance(module, nn.Conv2d) else linear_cls
        replace_module(model, name, cls.from_float(module, chosen.bits))
    model.quantized_with = chosen
    log.debug("quantized %d layers with %s", len(targets), chosen.option)
    return model


def build_quantized(spec, chosen: Quantization | None, weights=None):
    """``spec.build()`` quantized with ``chosen`` (None: full precision), then ``weights``
    (a state dict of the quantized model: its learned steps and clips included), in eval mode."""
    from aiot.models.spec import load_weights

    model = spec.build()
    if chosen:
        quantize(model, chosen.method, chosen.bits)
    if weights is not None:
        load_weights(model, weights, spec.name)
    model.eval()
    return model
