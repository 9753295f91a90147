"""ORT format (``.ort``): ONNX Runtime's flatbuffer format for mobile and minimal builds.

The model is exported to ONNX first (the ``onnx`` converter), then ONNX Runtime itself
optimizes it and saves the result in ORT format, as its ``convert_onnx_models_to_ort`` tool
does. Only optimization levels that do not depend on the converting machine's CPU are
offered: ``all`` would add x86 layout transforms (NCHWc) that an ARM phone cannot run.
"""

from __future__ import annotations

import shutil
import tempfile
from importlib.metadata import version
from pathlib import Path

from aiot.converters.base import CONVERTERS, Availability, modules_available
from aiot.converters.onnx import OnnxConverter
from aiot.host.errors import UsageError
from aiot.host.fileio import write_atomic

#: Portable optimization levels. ``basic`` keeps every op an NNAPI/CoreML EP can take over.
LEVELS = ("basic", "extended")


class OrtConverter:
    """ONNX export, then ONNX Runtime's own optimizer writing the ORT flatbuffer."""

    name = "ort"
    extension = ".ort"
    backend = "onnxruntime"
    description = "ONNX Runtime's mobile format (.ort), optimized offline, run by ONNX Runtime (CPU)"
    atol = 1e-4
    options = {
        "opset": OnnxConverter.options["opset"],
        "optimization": ("basic", "offline graph optimization: basic (portable, delegate-friendly) or extended"),
    }

    def availability(self) -> Availability:
        return modules_available({"onnx": "onnx", "onnxruntime": "onnxruntime"}, "onnx")

    def toolchain_versions(self) -> dict[str, str]:
        return {pkg: version(pkg) for pkg in ("torch", "onnx", "onnxruntime")}

    def export(self, model, example, out_path: Path, options: dict[str, str]) -> dict:
        level = options["optimization"]
        if level not in LEVELS:
            why = (": 'all' adds layouts specific to this machine's CPU, which other devices cannot run"
                   if level == "all" else "")
            raise UsageError(f"optimization must be one of {', '.join(LEVELS)}, got '{level}'{why}",
                             "e.g. --opt optimization=basic")
        with tempfile.TemporaryDirectory(prefix="aiot-ort-") as scratch:
            source, optimized = Path(scratch) / "model.onnx", Path(scratch) / "optimized.onnx"
            facts = OnnxConverter().export(model, example, source, {"opset": options["opset"]})
            # Optimize once into ONNX (so the ops that will run can be read back), then save that
            # graph unchanged in ORT format.
            _save(source, optimized, level, "ONNX")
            # Saved in the scratch folder, then copied into place by Python: ONNX Runtime's
            # "Failed to save" names no errno when the artifacts' disk is full.
            saved = Path(scratch) / "model.ort"
            _save(optimized, saved, "none", "ORT")
            write_atomic(out_path, lambda tmp: shutil.copyfile(saved, tmp))
            import onnx

            ops = sorted({node.op_type for node in onnx.load(str(optimized)).graph.node})
        _check_ort_file(out_path)
        return {"ops": ops, "source_ops": facts["ops"], "opset": facts["opset"], "optimization": level}


def _save(source: Path, target: Path, level: str, file_format: str) -> None:
    """Let ONNX Runtime optimize ``source`` at ``level`` and write it to ``target`` as ONNX or ORT."""
    import onnxruntime as ort

    levels = {"none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
              "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED}
    so = ort.SessionOptions()
    so.graph_optimization_level = levels[level]
    so.optimized_model_filepath = str(target)
    so.add_session_config_entry("session.save_model_format", file_format)
    # Creating the session is what optimizes the graph and writes the file.
    ort.InferenceSession(str(source), so, providers=["CPUExecutionProvider"])


def _check_ort_file(path: Path) -> None:
    """An ORT-format file is a flatbuffer with the file identifier ``ORTM`` at bytes 4..8."""
    from aiot.host.errors import ConversionError

    head = path.read_bytes()[:8]
    if head[4:8] != b"ORTM":
        path.unlink(missing_ok=True)
        raise ConversionError("ort", "verify", f"{path.name} is not an ORT-format file (identifier {head[4:8]!r})")


CONVERTERS.add("ort", OrtConverter())
