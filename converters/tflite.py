"""TFLite (``.tflite``) via litert-torch, run by LiteRT (XNNPACK on CPU).

litert-torch keeps PyTorch's NCHW input (it inserts one TRANSPOSE), so the same
preprocessed tensors feed the PyTorch model and the artifact.

Why litert-torch and not onnx2tf's NHWC graph (the other public path, compared by
``bench/tflite_paths.py`` and ``bench/formats.py``): measured in one process on x86_64 (1 thread,
5 interleaved rounds, loaded machine), onnx2tf's ``.tflite`` was slower, not faster — 1.26x
litert-torch's on mobilenet_v2 and 1.15x on resnet18 — and onnx2tf 1.29 failed to convert
efficientnet_lite0 at all; the one TRANSPOSE at the input costs less than what onnx2tf's graph
adds. So litert-torch stays the default for every family.

An 8-bit LSQ model (``tiny_cnn_lsq8``) arrives as :mod:`aiot.converters.qdq`'s ``tflite`` style:
PT2E's Q/DQ operators with its learned scales. litert-torch converts it in its static Q/DQ mode
(``qdq_conversion_mode="STATIC"``, switched on by a PT2E ``QuantConfig`` whose quantizer never
runs: nothing is calibrated), which folds each DQ→Conv→Q into an int8 CONV_2D whose tensors
carry those scales; ai-edge-quantizer (``quant=int8``) would calibrate scales of its own.
"""

from __future__ import annotations

import logging
from importlib.metadata import version
from pathlib import Path

from aiot.converters.base import Availability, Converter, modules_available
from aiot.converters.inputs import as_args, by_keyword, input_names
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


def conv_types(path: Path) -> dict[str, int]:
    """Convolutions (CONV_2D, DEPTHWISE_CONV_2D) of a ``.tflite`` file by their tensors:
    ``int8`` where the input and the weight are int8 (an integer kernel), ``float`` otherwise."""
    from ai_edge_litert import schema_py_generated as schema

    model = schema.Model.GetRootAsModel(path.read_bytes(), 0)
    convs = {schema.BuiltinOperator.CONV_2D, schema.BuiltinOperator.DEPTHWISE_CONV_2D}
    counts = {"int8": 0, "float": 0}
    for g in range(model.SubgraphsLength()):
        graph = model.Subgraphs(g)
        for i in range(graph.OperatorsLength()):
            op = graph.Operators(i)
            code = model.OperatorCodes(op.OpcodeIndex())
            if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) not in convs:
                continue
            types = {graph.Tensors(op.Inputs(k)).Type() for k in (0, 1)}
            counts["int8" if types == {schema.TensorType.INT8} else "float"] += 1
    return counts


def _learned_scales():
    """litert-torch's switch to its static Q/DQ conversion (see the module); the symmetric
    per-channel quantizer only names the mode: litert-torch runs no quantizer itself."""
    from litert_torch.quantize import pt2e_quantizer
    from litert_torch.quantize.quant_config import QuantConfig

    return QuantConfig(pt2e_quantizer=pt2e_quantizer.PT2EQuantizer().set_global(
        pt2e_quantizer.get_symmetric_quantization_config(is_per_channel=True)))


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
    several_inputs = True
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
        learned = getattr(model, "quantized_with", None) is not None
        if learned and quant != "fp32":
            raise UsageError(f"{model.quantized_with.title()} carries its own learned int8 "
                             f"scales; quant={quant} would requantize it with scales of its own",
                             "drop --opt quant: its convolutions become int8 with the learned "
                             "scales")
        # The flatbuffer is written by Python, not by LiteRT's C++ writer: that one exits the
        # process with status 1 and no word when the disk is full, leaving its file behind.
        module, args, kwargs = _signature_inputs(model, example)
        if quant == "fp32":
            data = litert_torch.convert(module, args, kwargs, quant_config=_learned_scales()
                                        if learned else None).model_content()
            write_atomic(out_path, lambda tmp: tmp.write_bytes(data))
        else:
            calibration = _calibration_batches(spec, options) if quant == "int8" else None
            float_model = out_path.with_name(out_path.name + ".fp32.tmp")
            try:
                data = litert_torch.convert(module, args, kwargs).model_content()
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
        if learned:
            facts.update(quant="int8-learned", convs=conv_types(out_path))
        if calibration is not None:
            facts["calibration"] = {"dataset": options["calibration"], "split": "train",
                                    "samples": len(calibration)}
        return facts


def _signature_inputs(model, example) -> tuple[object, tuple, dict | None]:
    """``(module, args, kwargs)`` for ``litert_torch.convert``: a model whose inputs have
    names (a user's: :mod:`aiot.converters.inputs`) is given them as keywords, so that the
    signature keeps them (positional ones become ``args_0``, ``args_1``); a zoo model's one
    input stays positional, as its artifacts always had it."""
    args = as_args(example)
    if getattr(model, "aiot_input_names", None) is None:
        return model, args, None
    names = input_names(model, len(args))
    return by_keyword(model, names), (), dict(zip(names, args))


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
