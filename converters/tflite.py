"""TFLite (``.tflite``) via litert-torch, run by LiteRT (XNNPACK on CPU).

litert-torch keeps PyTorch's NCHW input (it inserts one TRANSPOSE), so the same
preprocessed tensors feed the PyTorch model and the artifact.

Why litert-torch and not onnx2tf's NHWC graph (the other public path, compared by
``bench/tflite_paths.py`` and ``bench/formats.py``): measured in one process on x86_64 (1 thread,
5 interleaved rounds, loaded machine), onnx2tf's ``.tflite`` was slower, not faster — 1.26x
litert-torch's on mobilenet_v2 and 1.15x on resnet18 — and onnx2tf 1.29 failed to convert
efficientnet_lite0 at all; the one TRANSPOSE at the input costs less than what onnx2tf's graph
adds. So litert-torch stays the default for every family.
"""

from __future__ import annotations

import logging
from importlib.metadata import version
from pathlib import Path

from aiot.converters.base import Availability, Converter, modules_available
from aiot.core.errors import ConversionError, UsageError
from aiot.core.fileio import write_atomic

log = logging.getLogger(__name__)


def tflite_ops(path: Path) -> list[str]:
    """Operator names used by a ``.tflite`` flatbuffer (custom ops as ``CUSTOM:<name>``)."""
    from ai_edge_litert import schema_py_generated as schema

    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    model = schema.Model.GetRootAsModel(path.read_bytes(), 0)
    ops = set()
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        name = names.get(builtin, str(builtin))
        if name == "CUSTOM":
            name = f"CUSTOM:{(code.CustomCode() or b'?').decode()}"
        ops.add(name)
    return sorted(ops)


QUANT_MODES = {
    "fp32": "float32 weights and activations",
    "fp16": "float16 weights (dequantized at load), float32 compute",
    "dynamic-int8": "int8 weights, activations quantized on the fly",
    "int8": "full integer: int8 weights and activations, calibrated on a dataset shard",
}
#: Parity rule per mode: float modes must match PyTorch's logits closely on any input; an
#: integer model cannot, so it must agree with PyTorch's top-1 on real images instead.
TOLERANCE = {
    "fp32": {"atol": 1e-4, "rtol": 1e-3, "min_top1": None},
    "fp16": {"atol": 1e-2, "rtol": 1e-2, "min_top1": None},
    "dynamic-int8": {"atol": None, "rtol": None, "min_top1": 0.9},
    "int8": {"atol": None, "rtol": None, "min_top1": 0.8},
}


class TfliteConverter(Converter):
    """TFLite via litert-torch; FP16 and INT8 variants by ai-edge-quantizer on the float file."""

    name = "tflite"
    extension = ".tflite"
    backend = "litert"
    description = "TFLite via litert-torch, run by LiteRT with XNNPACK (NNAPI/GPU on Android)"
    atol = 1e-4
    uses_spec = True  # int8 calibration preprocesses a dataset for the model's input
    options = {
        "quant": ("fp32", " | ".join(QUANT_MODES)),
        "calibration": ("fashion-mnist", "dataset whose train split calibrates quant=int8"),
        "calibration_samples": ("100", "images used to calibrate quant=int8"),
    }

    def availability(self) -> Availability:
        return modules_available({"litert_torch": "litert-torch", "ai_edge_litert": "ai-edge-litert"}, "tflite")

    def toolchain_versions(self) -> dict[str, str]:
        return {pkg: version(pkg) for pkg in ("torch", "litert-torch", "ai-edge-litert", "ai-edge-quantizer")}

    def check_options(self, options: dict[str, str]) -> None:
        """Refuse a bad quant mode, sample count or dataset name before any work."""
        if options["quant"] not in QUANT_MODES:
            raise UsageError(f"tflite quant must be one of {', '.join(QUANT_MODES)}, got "
                             f"'{options['quant']}'", "e.g. --opt quant=int8")
        samples = options["calibration_samples"]
        if not samples.isdigit() or int(samples) < 1:
            raise UsageError(f"calibration_samples must be a positive integer, got '{samples}'")
        if options["quant"] == "int8":
            from aiot.models.datasets.load import canonical_name

            canonical_name(options["calibration"])  # UnknownName with suggestions

    def parity_tolerance(self, options: dict[str, str]) -> dict:
        """How close the artifact must be to PyTorch for this quant mode."""
        return TOLERANCE[options["quant"]]

    def export(self, model, example, out_path: Path, options: dict[str, str], spec=None) -> dict:
        import litert_torch

        quant = options["quant"]
        calibration = None
        # The flatbuffer is written by Python, not by LiteRT's C++ writer: that one exits the
        # process with status 1 and no word when the disk is full, leaving its file behind.
        if quant == "fp32":
            data = litert_torch.convert(model, (example,)).model_content()
            write_atomic(out_path, lambda tmp: tmp.write_bytes(data))
        else:
            calibration = _calibration_batches(spec, options) if quant == "int8" else None
            float_model = out_path.with_name(out_path.name + ".fp32.tmp")
            try:
                data = litert_torch.convert(model, (example,)).model_content()
                out_path.parent.mkdir(parents=True, exist_ok=True)
                float_model.write_bytes(data)
                write_atomic(out_path, lambda tmp: tmp.write_bytes(
                    _quantize(float_model, quant, calibration)))
            finally:
                float_model.unlink(missing_ok=True)
        ops = tflite_ops(out_path)
        custom = [op for op in ops if op.startswith("CUSTOM")]
        if custom:
            out_path.unlink(missing_ok=True)
            raise ConversionError(self.name, "verify", f"artifact needs custom ops {custom} "
                                  "that stock LiteRT cannot run")
        facts = {"ops": ops, "quant": quant}
        if calibration is not None:
            facts["calibration"] = {"dataset": options["calibration"], "split": "train",
                                    "samples": len(calibration)}
        return facts


def _calibration_batches(spec, options: dict[str, str]):
    """Preprocessed train-split images (batch 1 each) that set int8 activation ranges."""
    from aiot.models.datasets import load_dataset

    if spec is None:  # a user's model: no image data set is known to fit its input
        raise UsageError("int8 calibration needs a zoo image model (its data set fits the "
                         "input)", "use --opt quant=dynamic-int8 or quant=fp16 for your model")
    x, _y = load_dataset(options["calibration"], spec.input, split="train",
                         limit=int(options["calibration_samples"]), seed=0)
    return [x[i : i + 1] for i in range(len(x))]


def _quantize(float_model: Path, quant: str, calibration) -> bytes:
    """The float model quantized by ai-edge-quantizer (recipes named as LiteRT documents them)."""
    from ai_edge_quantizer import qtyping, quantizer, recipe
    from ai_edge_quantizer.algorithm_manager import AlgorithmName

    qt = quantizer.Quantizer(str(float_model))
    if quant == "fp16":
        qt.add_weight_only_config(regex=".*", operation_name=qtyping.TFLOperationName.ALL_SUPPORTED,
                                  num_bits=16, algorithm_key=AlgorithmName.FLOAT_CASTING)
    elif quant == "dynamic-int8":
        qt.load_quantization_recipe(recipe.dynamic_wi8_afp32())
    else:
        qt.load_quantization_recipe(recipe.static_wi8_ai8())
    result = None
    if qt.need_calibration:
        signature, input_name = _signature_input(float_model)
        result = qt.calibrate({signature: [{input_name: x} for x in calibration]})
    return bytes(qt.quantize(result, enable_progress_report=False).quantized_model)


def _signature_input(path: Path) -> tuple[str, str]:
    """``(signature key, its first input name)`` of a litert-torch export."""
    from ai_edge_litert.interpreter import Interpreter

    signatures = Interpreter(model_path=str(path)).get_signature_list()
    key = next(iter(signatures))
    return key, signatures[key]["inputs"][0]
