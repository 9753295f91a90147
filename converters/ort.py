"""ORT format (``.ort``): ONNX Runtime's flatbuffer format for mobile and minimal builds.

The model is exported to ONNX first (the ``onnx`` converter), then ONNX Runtime itself
optimizes it and saves the result in ORT format, as its ``convert_onnx_models_to_ort`` tool
does. An ORT-format model is not optimized again when it is loaded, so the style decides
what the device runs:

* ``runtime`` (default; the tool's ``--optimization_style Runtime``): the graph is saved at
  the portable basic level and the optimizations ONNX Runtime can replay (Conv+activation
  fusion, QDQ node groups) are recorded in the file; the device's session replays them for
  its own CPU (``session.enable_saved_runtime_optimizations``), while an NNAPI/CoreML
  execution provider can still take the unfused nodes.
* ``basic`` / ``extended``: a fixed level, everything baked in when the file is written.

Only portable levels are offered: ``all`` (and a runtime style recording it) would add x86's
NCHWc layout, which ONNX Runtime sizes for the converting CPU's vector width and an ARM phone
cannot run. That layout is ONNX Runtime's fastest x86 convolution path and is never applied to
an ORT-format model, so on x86_64 a ``.ort`` stays slower than the ``.onnx`` it was made from
(bench/formats.py measures by how much); ARM has no such layout.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from importlib.metadata import version
from pathlib import Path

from aiot.converters.base import Availability, Converter, modules_available
from aiot.converters.onnx import OnnxConverter
from aiot.core.errors import ConversionError, UsageError
from aiot.core.fileio import write_atomic
from aiot.device_agent.backends.onnxruntime_backend import REPLAY_KEY  # set by the agent for .ort

#: ``--opt optimization=`` values: the runtime style, or a fixed portable level.
STYLES = ("runtime", "basic", "extended")
#: The level a runtime-style file is saved at (what every device runs before replay).
RUNTIME_SAVED_LEVEL = "basic"
#: x86-only, CPU-specific layout transform excluded from anything written (see the docstring).
NOT_PORTABLE = ["NchwcTransformer"]
#: Shown by ``aiot convert --list``.
LIMITS = ("x86_64: ONNX Runtime's NCHWc layout (its fastest x86 convolutions) is CPU-specific and never "
          "applied to an ORT-format model, so a .ort runs slower there than the .onnx it came from; "
          "ARM has no such layout")


class OrtConverter(Converter):
    """ONNX export, then ONNX Runtime's own optimizer writing the ORT flatbuffer."""

    name = "ort"
    extension = ".ort"
    backend = "onnxruntime"
    description = ("ONNX Runtime's mobile format (.ort), saved with runtime optimizations replayed on "
                   "the device, run by ONNX Runtime (CPU)")
    limits = LIMITS
    atol = 1e-4
    several_inputs = True
    options = {
        "opset": OnnxConverter.options["opset"],
        "exporter": OnnxConverter.options["exporter"],
        "optimization": ("runtime", "runtime (saved at basic level plus optimizations replayed on the "
                                    "device's CPU) or a fixed level: basic (portable, delegate-friendly) "
                                    "or extended"),
    }

    def availability(self) -> Availability:
        return modules_available({"onnx": "onnx", "onnxruntime": "onnxruntime"}, "onnx")

    def toolchain_versions(self) -> dict[str, str]:
        return {pkg: version(pkg) for pkg in ("torch", "onnx", "onnxruntime")}

    def check_options(self, options: dict[str, str]) -> None:
        """Refuse a non-portable or unknown optimization, or a bad exporter, before any work."""
        OnnxConverter().check_options(options)
        style = options["optimization"]
        if style not in STYLES:
            why = (": 'all' adds layouts specific to this machine's CPU, which other devices cannot run"
                   if style == "all" else "")
            raise UsageError(f"optimization must be one of {', '.join(STYLES)}, got '{style}'{why}",
                             "e.g. --opt optimization=runtime")

    def export(self, model, example, out_path: Path, options: dict[str, str]) -> dict:
        self.check_options(options)
        style = options["optimization"]
        with tempfile.TemporaryDirectory(prefix="aiot-ort-") as scratch:
            source = Path(scratch) / "model.onnx"
            facts = OnnxConverter().export(model, example, source, {
                "opset": options["opset"], "exporter": options["exporter"]})
            # Saved in the scratch folder, then copied into place by Python: ONNX Runtime's
            # "Failed to save" names no errno when the artifacts' disk is full.
            saved = Path(scratch) / "model.ort"
            if style == "runtime":
                _save(source, saved, "all", record=True)
            else:
                _save(source, saved, style)
            write_atomic(out_path, lambda tmp: shutil.copyfile(saved, tmp))
        _check_ort_file(out_path)
        saved_ops, records = ort_contents(out_path)
        result = {"ops": saved_ops, "source_ops": facts["ops"], "opset": facts["opset"],
                  "exporter": facts["exporter"],
                  "optimization": style, "optimization_style": "runtime" if style == "runtime" else "fixed",
                  "optimization_level": RUNTIME_SAVED_LEVEL if style == "runtime" else style,
                  "runtime_optimizations": records}
        if style == "runtime":
            result["replay_config"] = {REPLAY_KEY: "1"}
        return result


def _save(source: Path, target: Path, level: str, record: bool = False) -> None:
    """Let ONNX Runtime optimize ``source`` at ``level`` and write ``target`` in ORT format.

    ``record``: ONNX Runtime's runtime style: optimizations that can be replayed are recorded
    rather than applied (``optimization.minimal_build_optimizations=save``), the rest of
    ``level`` beyond basic is not saved."""
    import onnxruntime as ort

    levels = {"basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
              "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
    so = ort.SessionOptions()
    so.graph_optimization_level = levels[level]
    so.optimized_model_filepath = str(target)
    so.add_session_config_entry("session.save_model_format", "ORT")
    # As convert_onnx_models_to_ort without --target_platform arm: no int8-for-ARM QDQ rewrite.
    so.add_session_config_entry("session.qdqisint8allowed", "0")
    if record:
        so.add_session_config_entry("optimization.minimal_build_optimizations", "save")
    # Creating the session is what optimizes the graph and writes the file.
    ort.InferenceSession(str(source), so, providers=["CPUExecutionProvider"],
                         disabled_optimizers=NOT_PORTABLE)


def ort_contents(path: Path) -> tuple[list[str], dict[str, int]]:
    """``(op types stored in the main graph, {optimizer: recorded runtime optimizations})`` of
    an ORT-format file, read with the flatbuffer bindings ONNX Runtime ships."""
    from onnxruntime.tools.ort_format_model.ort_flatbuffers_py.fbs.InferenceSession import (
        InferenceSession,
    )

    graph = InferenceSession.GetRootAs(path.read_bytes(), 0).Model().Graph()
    ops = sorted({graph.Nodes(i).OpType().decode() for i in range(graph.NodesLength())
                  if graph.Nodes(i) is not None})
    records: Counter[str] = Counter()
    runtime = graph.RuntimeOptimizations()
    for i in range(runtime.RecordsLength() if runtime is not None else 0):
        entry = runtime.Records(i)
        records[entry.OptimizerName().decode()] += entry.RuntimeOptimizationRecordsLength()
    return ops, dict(records)


def _check_ort_file(path: Path) -> None:
    """An ORT-format file is a flatbuffer with the file identifier ``ORTM`` at bytes 4..8."""
    head = path.read_bytes()[:8]
    if head[4:8] != b"ORTM":
        path.unlink(missing_ok=True)
        raise ConversionError("ort", "verify", f"{path.name} is not an ORT-format file (identifier {head[4:8]!r})")
