"""Larq Compute Engine (binarized TFLite with ``LceQuantize``/``LceBconv2d``).

The PyTorch BNN is lowered to aiot's layer list (:mod:`aiot.converters.graph`), written as
JSON + NPZ, and rebuilt as a TensorFlow graph by :mod:`aiot.converters.lce.build` *inside*
the ``lce`` toolchain environment, where LCE's MLIR converter turns it into a flatbuffer.
No Larq, no Keras, nothing of TensorFlow in aiot's own process.

A converter that "succeeds" must have really binarized: LCE silently keeps a float
``CONV_2D`` when a pattern does not match (larq/compute-engine#631), so the op list must
hold one ``LceBconv2d`` per binary convolution of the source model, or the artifact is
refused. Parity runs in the LCE interpreter (same toolchain: it needs NumPy < 2).

One toolchain process per conversion: starting it imports TensorFlow (7-8 CPU seconds), so
the export builds the sign-parity probe (:meth:`LceConverter.binary_inputs`) in the same run
as the artifact and keeps it for the parity check that follows.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

from aiot.converters.base import (
    Availability,
    Converter,
    toolchain_available,
    toolchain_versions,
)
from aiot.converters.graph import bn_scale_shift, lower
from aiot.converters.parity import run_artifact, run_artifact_outputs
from aiot.converters.tflite import tflite_ops
from aiot.core import toolchains
from aiot.core.errors import ConversionError
from aiot.core.fileio import write_atomic

log = logging.getLogger(__name__)

TOOLCHAIN = "lce"
#: Rebuilds the graph in TensorFlow and runs LCE's converter, inside the ``lce`` toolchain.
BUILD_SCRIPT = Path(__file__).with_name("build.py")


def _layer_record(layer) -> tuple[dict, dict]:
    """JSON description and NumPy parameters of one lowered layer."""
    import torch

    record = {"name": layer.name, "kind": layer.kind, "inputs": layer.inputs,
              "attrs": dict(layer.attrs)}
    params: dict = {}
    module = layer.module
    with torch.no_grad():
        if layer.kind == "conv":
            if tuple(module.dilation) != (1, 1):
                raise ConversionError("lce", "lower", f"layer '{layer.name}' is dilated",
                                      "dilated convolutions are not supported by this emitter")
            record["attrs"].update(stride=list(module.stride), padding=list(module.padding),
                                   groups=module.groups)
            params["weight"] = module.weight.numpy()
            if module.bias is not None:
                params["bias"] = module.bias.numpy()
        elif layer.kind == "bconv":
            record["attrs"].update(stride=list(module.stride), pad=module.binary_padding,
                                   pad_value=module.pad_value)
            params["weight_sign"] = module.binary_weight().numpy()
            if module.threshold is not None:  # ReActNet's learned activation threshold
                params["threshold"] = module.threshold.numpy()
            alpha = module.alpha()
            if alpha is not None:
                params["alpha"] = alpha.numpy()
        elif layer.kind == "bn":
            params["scale"], params["shift"] = bn_scale_shift(module)
        elif layer.kind == "linear":
            params["weight"] = module.weight.numpy()
            if module.bias is not None:
                params["bias"] = module.bias.numpy()
        elif layer.kind == "pad":
            raise ConversionError("lce", "lower",
                                  f"layer '{layer.name}' is a separate zero padding",
                                  "give the convolution its padding (padding=...) instead")
        elif layer.kind in ("maxpool", "avgpool"):
            if layer.attrs.get("ceil_mode") and layer.kind == "avgpool":  # its divisor changes at the edge
                raise ConversionError("lce", "lower", f"average pooling layer '{layer.name}' uses ceil_mode",
                                      "use ceil_mode=False in average pooling")
            record["attrs"] = {k: list(v) if isinstance(v, tuple) else v for k, v in layer.attrs.items()}
    return record, {f"{layer.name}/{key}": value for key, value in params.items()}


def write_graph(graph, example, folder: Path) -> tuple[Path, Path, int]:
    """``graph.json`` and ``weights.npz`` for :mod:`aiot.converters.lce.build`; returns them and #bconvs."""
    import numpy as np

    records, arrays = [], {}
    for layer in graph.layers:
        record, params = _layer_record(layer)
        records.append(record)
        arrays.update({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in params.items()})
    binary = sum(1 for layer in graph.layers if layer.kind == "bconv")
    spec = {"layers": records, "output": graph.output, "input_shape": list(example.shape)}
    graph_file, weights_file = folder / "graph.json", folder / "weights.npz"
    graph_file.write_text(json.dumps(spec), encoding="utf-8")
    np.savez(weights_file, **arrays)
    return graph_file, weights_file, binary


def graph_digest(graph_file: Path, weights_file: Path) -> str:
    """What :mod:`~aiot.converters.lce.build` builds from, as one hash: the graph's JSON and
    every parameter by name, dtype, shape and value (not the ``.npz`` bytes, which hold the
    time they were written)."""
    import numpy as np

    digest = hashlib.sha256(graph_file.read_bytes())
    with np.load(weights_file) as weights:
        for key in sorted(weights.files):
            array = np.ascontiguousarray(weights[key])
            digest.update(f"\0{key}\0{array.dtype.str}\0{array.shape}\0".encode())
            digest.update(array.tobytes())
    return digest.hexdigest()


class _KeptProbes:
    """Probes built beside their artifacts, by :func:`graph_digest`, until parity takes them.

    Bounded: a probe whose parity check never came (a conversion stopped in between) is
    dropped once :data:`LIMIT` newer ones are kept. Locked: conversions may run in threads.
    """

    LIMIT = 4

    def __init__(self) -> None:
        self._probes: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def keep(self, digest: str, probe: bytes) -> None:
        with self._lock:
            self._probes[digest] = probe
            while len(self._probes) > self.LIMIT:
                self._probes.popitem(last=False)

    def take(self, digest: str) -> bytes | None:
        with self._lock:
            return self._probes.pop(digest, None)


class LceConverter(Converter):
    """PyTorch BNN → TensorFlow graph → LCE converter, in the ``lce`` toolchain."""

    name = "lce"
    extension = ".tflite"
    backend = "lce"
    description = ("Larq Compute Engine binarized TFLite (LceBconv2d), run by the LCE "
                   "interpreter; lce_benchmark_model on ARM devices")
    atol = 1e-3  # the float stem before the first binary conv, compared by value
    # Binary convs run as such: a binarized model's parity is judged by the signs each
    # binary layer sees (converters/sign_parity.py), not by its logits, which one sign a
    # hair from 0 flipped by float re-ordering moves by whole units (README, BiBench).
    binary_native = True
    options: dict[str, tuple[str, str]] = {}

    def __init__(self) -> None:
        self._probes = _KeptProbes()

    def availability(self) -> Availability:
        return toolchain_available(TOOLCHAIN)

    def toolchain_versions(self) -> dict[str, str]:
        from importlib.metadata import version

        return {"torch": version("torch"), **toolchain_versions(TOOLCHAIN)}

    def export(self, model, example, out_path: Path, options: dict[str, str]) -> dict:
        graph = lower(model, example, self.name)
        if not any(layer.kind == "bconv" for layer in graph.layers):  # before per-layer refusals
            raise ConversionError(self.name, "lower", "this model has no binary convolutions",
                                  "LCE is for binarized models: use tiny_bnn or a binarized model")
        with tempfile.TemporaryDirectory(prefix="aiot-lce-") as tmp:
            graph_file, weights_file, binary = write_graph(graph, example, Path(tmp))
            probe = Path(tmp) / "probe.tflite"  # for binary_inputs, from the same process
            write_atomic(out_path, lambda dst: toolchains.run_script(
                TOOLCHAIN, BUILD_SCRIPT, [str(graph_file), str(weights_file), str(dst),
                                          "--probe-out", str(probe)]))
            self._probes.keep(graph_digest(graph_file, weights_file), probe.read_bytes())
        ops = tflite_ops(out_path)
        found = _count_op(out_path, "LceBconv2d")
        if found != binary:
            out_path.unlink(missing_ok=True)
            raise ConversionError(self.name, "verify", f"LCE binarized {found} of {binary} binary "
                                  "convolutions; the rest stayed float",
                                  "the graph did not match LCE's patterns; report it with the model")
        return {"ops": ops, "binary_convs": binary}

    def binary_inputs(self, model, artifact: Path, inputs, names: list[str]) -> dict:
        """What each binary conv binarizes in LCE, NCHW, by PyTorch layer name, for ``inputs``.

        A probe of the artifact: the same lowered graph through the same LCE converter, with
        each binary conv's input as an extra output, run by LCE's interpreter. The export
        built it with the artifact when the model lowers to the very same graph (one
        toolchain run); otherwise it is built here.
        """
        import numpy as np
        import torch

        example = torch.from_numpy(np.ascontiguousarray(inputs[:1]))
        graph = lower(model, example, self.name)
        # By module, not by name: fx renames nodes (dots to "_", CamelCase to snake_case).
        module_names = {id(module): name for name, module in model.named_modules()}
        lowered = [module_names.get(id(layer.module)) for layer in graph.layers if layer.kind == "bconv"]
        if sorted(map(str, lowered)) != sorted(names):
            raise ConversionError(self.name, "parity", f"the lowered graph's {len(lowered)} binary "
                                  f"convs are not PyTorch's {len(names)}", "please report it")
        with tempfile.TemporaryDirectory(prefix="aiot-lce-probe-") as tmp:
            graph_file, weights_file, _ = write_graph(graph, example, Path(tmp))
            probe = Path(tmp) / "probe.tflite"
            kept = self._probes.take(graph_digest(graph_file, weights_file))
            if kept is not None:
                probe.write_bytes(kept)
            else:
                toolchains.run_script(TOOLCHAIN, BUILD_SCRIPT,
                                      [str(graph_file), str(weights_file), str(probe), "--probe"])
            outputs = run_artifact_outputs(self.backend, probe, inputs)
        # The probe is made from the model, not read from the file: it speaks for the file
        # only if it computes what the file computes.
        deployed = run_artifact(self.backend, artifact, inputs)  # (N, -1): one start, no inspect
        probed = outputs["output_0"].reshape(len(inputs), -1)
        if deployed.shape != probed.shape or not np.array_equal(deployed, probed):
            same_shape = deployed.shape == probed.shape
            worst = float(np.abs(deployed - probed).max()) if same_shape else float("inf")
            raise ConversionError(self.name, "parity", f"the sign probe's outputs differ from "
                                  f"{artifact.name}'s by up to {worst:.3g}: it does not show "
                                  "that file's activations", "re-convert; if it stays, report it")
        return {name: outputs[f"probe_{i:03d}"] for i, name in enumerate(lowered)}


def _count_op(path: Path, custom: str) -> int:
    """How many operators of the custom code ``custom`` the flatbuffer holds."""
    from ai_edge_litert import schema_py_generated as schema

    model = schema.Model.GetRootAsModel(path.read_bytes(), 0)
    codes = [(model.OperatorCodes(i).CustomCode() or b"").decode() for i in range(model.OperatorCodesLength())]
    graph = model.Subgraphs(0)
    return sum(1 for i in range(graph.OperatorsLength()) if codes[graph.Operators(i).OpcodeIndex()] == custom)
