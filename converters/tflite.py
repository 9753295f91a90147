"""TFLite (``.tflite``) via litert-torch, run by LiteRT (XNNPACK on CPU).

litert-torch keeps PyTorch's NCHW input (it inserts one TRANSPOSE), so the same
preprocessed tensors feed the PyTorch model and the artifact.
"""

from __future__ import annotations

import logging
from importlib.metadata import version
from pathlib import Path

from aiot.converters.base import CONVERTERS, Availability, modules_available
from aiot.host.errors import ConversionError, UsageError
from aiot.host.fileio import write_atomic

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


class TfliteConverter:
    """FP32 TFLite. FP16 and INT8 quantization are options for a later issue."""

    name = "tflite"
    extension = ".tflite"
    backend = "litert"
    description = "TFLite via litert-torch, run by LiteRT with XNNPACK (NNAPI/GPU on Android)"
    atol = 1e-4
    options = {"quant": ("fp32", "weights and activations: fp32 (fp16/int8 not implemented yet)")}

    def availability(self) -> Availability:
        return modules_available({"litert_torch": "litert-torch", "ai_edge_litert": "ai-edge-litert"}, "tflite")

    def toolchain_versions(self) -> dict[str, str]:
        return {pkg: version(pkg) for pkg in ("torch", "litert-torch", "ai-edge-litert")}

    def export(self, model, example, out_path: Path, options: dict[str, str]) -> dict:
        if options["quant"] != "fp32":
            raise UsageError(f"tflite quant={options['quant']} is not implemented yet", "use quant=fp32")
        import litert_torch

        write_atomic(out_path, lambda tmp: litert_torch.convert(model, (example,)).export(str(tmp)))
        ops = tflite_ops(out_path)
        custom = [op for op in ops if op.startswith("CUSTOM")]
        if custom:
            out_path.unlink(missing_ok=True)
            raise ConversionError(self.name, "verify", f"artifact needs custom ops {custom} "
                                  "that stock LiteRT cannot run")
        return {"ops": ops, "quant": "fp32"}


CONVERTERS.add("tflite", TfliteConverter())
