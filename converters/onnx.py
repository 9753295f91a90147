"""ONNX (``.onnx``) via ``torch.onnx.export``, run by ONNX Runtime."""

from __future__ import annotations

import warnings
from importlib.metadata import version
from pathlib import Path

from aiot.converters.base import Availability, Converter, modules_available
from aiot.converters.inputs import as_args, input_names
from aiot.core.companions import onnx_external_data
from aiot.core.errors import ConversionError, UsageError
from aiot.core.fileio import write_atomic


#: ``--opt exporter=`` values (see :func:`choose_exporter`).
EXPORTERS = ("auto", "torchscript", "dynamo")


class OnnxConverter(Converter):
    """TorchScript-based exporter at opset 17 by default: the most portable to mobile ORT
    builds; torch.export's (``dynamo``) for models of token inputs (see :func:`choose_exporter`)."""

    name = "onnx"
    extension = ".onnx"
    backend = "onnxruntime"
    description = "ONNX via torch.onnx.export, run by ONNX Runtime (CPU)"
    atol = 1e-4
    several_inputs = True
    options = {"opset": ("auto", "ONNX opset version (11–20), or auto: 17 from the TorchScript "
                                 "exporter, 18 from dynamo (the lowest it writes)"),
               "exporter": ("auto", "torchscript, dynamo (torch.export), or auto: dynamo for a model "
                                    "with several or integer inputs, else torchscript")}

    def availability(self) -> Availability:
        return modules_available({"onnx": "onnx", "onnxruntime": "onnxruntime"}, "onnx")

    def artifact_files(self, artifact: Path) -> list[Path]:
        """The model and the external data files it names (a user's ``.onnx`` + ``.data``):
        all are pushed, side by side, and hashed into its identity."""
        return [Path(artifact), *onnx_external_data(artifact)]

    def toolchain_versions(self) -> dict[str, str]:
        return {pkg: version(pkg) for pkg in ("torch", "onnx", "onnxruntime")}

    def check_options(self, options: dict[str, str]) -> None:
        """Refuse a bad opset or exporter before any work."""
        if options["opset"] != "auto":
            _parse_opset(options["opset"])
        if options.get("exporter", "auto") not in EXPORTERS:
            raise UsageError(f"onnx exporter must be one of {', '.join(EXPORTERS)}, got "
                             f"'{options['exporter']}'", "e.g. --opt exporter=dynamo")

    def export(self, model, example, out_path: Path, options: dict[str, str]) -> dict:
        import onnx
        import torch

        args = as_args(example)
        exporter = choose_exporter(options.get("exporter", "auto"), args)
        opset = _opset(options["opset"], exporter)

        def write(tmp: Path) -> None:
            with warnings.catch_warnings():
                # The legacy exporter announces its own deprecation on every call.
                warnings.simplefilter("ignore")
                torch.onnx.export(model, args, str(tmp), dynamo=exporter == "dynamo",
                                  opset_version=opset, input_names=input_names(model, len(args)),
                                  output_names=getattr(model, "aiot_output_names", None) or ["logits"],
                                  **({"external_data": False} if exporter == "dynamo" else {}))
            if getattr(model, "quantized_with", None) is not None:  # QDQ: int8 weights in the file
                proto = onnx.load(str(tmp))
                fold_weight_quantization(proto)
                onnx.save(proto, str(tmp))
            try:
                onnx.checker.check_model(str(tmp), full_check=True)
            except onnx.checker.ValidationError as exc:
                raise ConversionError(self.name, "verify", f"onnx checker: {exc}") from None

        write_atomic(out_path, write)
        graph = onnx.load(str(out_path)).graph
        return {"ops": sorted({node.op_type for node in graph.node}), "opset": opset,
                "exporter": exporter}


def choose_exporter(choice: str, args) -> str:
    """The exporter ``--opt exporter=auto`` stands for: torch.export's (``dynamo``) for a
    model with several inputs or an integer one (token models), whose TorchScript trace of
    Hugging Face's attention masks does not reproduce the model (a BERT's outputs off by 2–3
    on inputs other than the example: measured with transformers 5.24, torch 2.13), else the
    TorchScript exporter, the most portable to mobile ONNX Runtime builds."""
    if choice != "auto":
        return choice
    tokens = len(args) > 1 or any(not t.dtype.is_floating_point for t in args)
    return "dynamo" if tokens else "torchscript"


#: The opset each exporter writes by itself (``--opt opset=auto``); dynamo writes no lower
#: one (a lower one is converted down by ONNX's version converter, which writes opset 18's
#: Split attributes into opset 17 files that the checker refuses).
OWN_OPSET = {"torchscript": 17, "dynamo": 18}


def _opset(value: str, exporter: str) -> int:
    """The opset to write: ``auto`` is the exporter's own (:data:`OWN_OPSET`).

    Raises:
        UsageError: not an opset from 11 to 20, or one below what the exporter writes.
    """
    if value == "auto":
        return OWN_OPSET[exporter]
    opset = _parse_opset(value)
    if opset < OWN_OPSET[exporter]:
        raise UsageError(f"the {exporter} exporter writes opset {OWN_OPSET[exporter]} and up, "
                         f"not {opset}", f"give --opt opset={OWN_OPSET[exporter]}, or "
                         "--opt exporter=torchscript for opsets below 18")
    return opset


def _parse_opset(value: str) -> int:
    try:
        opset = int(value)
    except ValueError:
        opset = -1
    if not 11 <= opset <= 20:
        raise UsageError(f"opset must be an integer from 11 to 20, got '{value}'", "e.g. --opt opset=17")
    return opset


def fold_weight_quantization(proto) -> int:
    """Store each QuantizeLinear of a constant (the weights) as its integer result, so the
    file holds int8 weights behind DequantizeLinear rather than float ones quantized at load;
    returns how many were folded. Rounds half to even and saturates, as QuantizeLinear does."""
    import numpy as np
    from onnx import numpy_helper

    graph = proto.graph
    constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    constant_nodes = {}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
            constant_nodes[node.output[0]] = node
    folded = []
    for node in graph.node:
        if node.op_type != "QuantizeLinear" or len(node.input) < 3 or not all(
                name in constants for name in node.input):
            continue
        x, scale, zero = (constants[name] for name in node.input)
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        if scale.ndim == 1 and x.ndim > 1:
            shape = [1] * x.ndim
            shape[axis] = -1
            scale, zero_b = scale.reshape(shape), zero.reshape(shape)
        else:
            zero_b = zero
        info = np.iinfo(zero.dtype)
        q = np.clip(np.rint(x / scale) + zero_b.astype(np.int32), info.min, info.max)
        graph.initializer.append(numpy_helper.from_array(q.astype(zero.dtype), node.output[0]))
        folded.append(node)
    for node in folded:
        graph.node.remove(node)
    used = {name for node in graph.node for name in node.input}
    for name, node in constant_nodes.items():
        if name not in used:
            graph.node.remove(node)
    for tensor in [t for t in graph.initializer if t.name not in used]:  # the float weights
        graph.initializer.remove(tensor)
    return len(folded)
