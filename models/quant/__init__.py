"""aiot.models.quant: RobustMQ's quantizers (DoReFa, PACT, LSQ) at 2, 4, 6 and 8 bits.

One module per method (:mod:`~aiot.models.quant.dorefa`, ``pact``, ``lsq``), each a drop-in
``Conv2d`` and ``Linear`` written from its paper on the skeleton of
:mod:`~aiot.models.quant.base`; :func:`quantize` swaps a model's layers, keeping the first
and the last in full precision as RobustMQ does. Usage::

    from aiot.models import get_model_spec
    from aiot.models.quant import quantize

    spec = get_model_spec("tiny_cnn")
    model = quantize(spec.build(weights=fp_weights), "lsq", 4)
    ...  # quantization-aware training

The names (:data:`METHODS`, :data:`BITS`, :func:`parse_quantize`) need no torch; the layers
are imported on first use, so the CLI can parse ``--quantize`` before loading torch.
"""

from typing import TYPE_CHECKING

from aiot.core.lazy import lazy_attributes

_PUBLIC = {
    "BITS": "methods", "METHODS": "methods", "Method": "methods", "Quantization": "methods",
    "parse_quantize": "methods", "quantization": "methods", "split_suffix": "methods",
    "QuantizedLayer": "base", "QuantizedConv2d": "base", "QuantizedLinear": "base",
    "quantize": "apply", "quantizable_layers": "apply", "quantized_layers": "apply",
    "build_quantized": "apply",
}

if TYPE_CHECKING:
    from aiot.models.quant.base import QuantizedConv2d, QuantizedLayer, QuantizedLinear
    from aiot.models.quant.methods import (
        BITS,
        METHODS,
        Method,
        Quantization,
        parse_quantize,
        quantization,
        split_suffix,
    )
    from aiot.models.quant.apply import (
        build_quantized,
        quantizable_layers,
        quantize,
        quantized_layers,
    )


__getattr__ = lazy_attributes(__name__, _PUBLIC)


__all__ = sorted(_PUBLIC)
