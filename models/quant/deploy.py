"""Which quantized models deploy as real integer artifacts, decided in one place (no torch).

A fake-quantized model deploys when every quantizer of it is an affine int8 grid
``x = s (q - z)`` with an integer zero point ``z``, which is what QuantizeLinear and
DequantizeLinear (ONNX), TFLite's int8 tensors and XNNPACK's QS8 kernels hold:

* **LSQ at 8 bits** deploys exactly: weights ``s q`` with ``q`` in [-128, 127] are int8 with
  scale ``s`` and zero point 0; activations ``s q`` with ``q`` in [0, 255] (after a ReLU) are
  uint8, or int8 on LSQ's signed grid, with zero point 0.
* **DoReFa and PACT at 8 bits** do not: their weights (DoReFa's, which PACT keeps) are the 256
  levels ``(2i - 255) / 255`` on [-1, 1], symmetric about 0 without 0 itself, i.e. zero
  point 127.5; an integer zero point cannot hold it and 9-bit integers would (their
  activations, ``[0, 1]`` and ``[0, alpha]`` on 255 steps, would be exact uint8).
* **2, 4 and 6 bits** are refused: int8 is the narrowest integer type these runtimes execute
  (ONNX Runtime's QLinearConv/ConvInteger, TFLite's and XNNPACK's int8 kernels); a narrower
  model would run as int8 with its grid padded out, measuring nothing of its own. They stay
  measurable in PyTorch (``aiot train --quantize``).

Formats: ``onnx`` (QDQ, run by ONNX Runtime), ``executorch`` (the same Q/DQ plan as
``quantized_decomposed`` operators, lowered to XNNPACK's QS8 kernels: ``delegate=xnnpack``) and
``tflite`` (the same operators converted by litert-torch's static Q/DQ mode into int8 CONV_2D
kernels with the learned scales; not aiot's ``quant=int8``, ai-edge-quantizer's, which calibrates
scales of its own). Each runs the convolutions the plan makes integer as int8 and the others
(the first layer, one feeding float layers or a residual addition) in float. ``ort`` has no
export of the learned scales yet: it shares the ONNX export, but ONNX Runtime's mobile-format
writer (1.32) saves the QDQ graph's fused int32-bias DequantizeLinear with a missing input and
then refuses its own file (``Conv_bias_dq``: input arg count), so it is refused until it can be
saved at a lower optimization level and checked.
"""

from __future__ import annotations

from aiot.models.quant.methods import Quantization

#: The bit-width integer runtimes execute.
DEPLOY_BITS = 8
#: The methods whose 8-bit grids are int8 grids (see the module).
DEPLOY_METHODS = ("lsq",)
#: Parity rule of a deployed model: at least this top-1 agreement with the fake-quantized
#: model on real images; the logits are reported, not judged: the int8 kernels add the folded
#: BatchNorm's bias as int32 on the grid ``s_x s_w``, and the folding's float sums differ, which
#: put a value within rounding of a level boundary one level over now and then (the issue's
#: bar for deployed quantized models is 99 %).
QDQ_MIN_TOP1 = 0.99
#: The formats that export the learned scales.
DEPLOY_FORMATS = ("onnx", "executorch", "tflite")


def deployment_refusal(chosen: Quantization, fmt: str | None = None) -> str | None:
    """Why ``chosen`` cannot deploy (in format ``fmt`` when given), in one clause; None if it can."""
    if chosen.bits != DEPLOY_BITS:
        return (f"{chosen.title()} is not deployable: int8 is the narrowest integer type "
                f"ONNX Runtime, TFLite and XNNPACK execute ({chosen.bits}-bit models stay "
                "measurable in PyTorch)")
    if chosen.method not in DEPLOY_METHODS:
        return (f"{chosen.title()} is not deployable: its weight grid (DoReFa's 256 levels on "
                "[-1, 1] without 0) needs zero point 127.5, which int8 cannot hold")
    if fmt is not None and fmt not in DEPLOY_FORMATS:
        return (f"{chosen.title()} has no {fmt} export of its learned scales yet "
                f"(deployed: {', '.join(DEPLOY_FORMATS)})")
    return None


def deployment_hint(chosen: Quantization) -> str:
    """What to do instead, for the refusal's hint."""
    return (f"deploy lsq:8 as -f {'|'.join(DEPLOY_FORMATS)}; measure {chosen.option} in PyTorch "
            "(aiot train --quantize)")
