"""Each aiot artifact against its runtime's best public path, timed in one process.

For every model, the artifacts and the references below are loaded side by side (artifacts
through the device agent's own backends, so with the session settings the agent uses) and
timed at 1 thread in interleaved rounds (the order rotates each round), each round taking the
median of a burst of ``invoke`` calls; a cell is the median over rounds.

=============== ======================= =============================================================
runtime         aiot artifact           best public path (reference)
=============== ======================= =============================================================
ONNX Runtime    ``.ort`` (runtime style) the ``.onnx`` loaded with every optimization (ORT_ENABLE_ALL);
                                        beside it, the same with NchwcTransformer disabled: the x86-only
                                        blocked layout no ORT-format model gets, absent on ARM
PyTorch Mobile  ``.ptl``                the same module by TorchScript: ``torch.jit.trace`` +
                                        ``torch.jit.optimize_for_inference`` (on x86: oneDNN layouts and
                                        prepacked weights, not serializable); beside it, ``torch.jit.freeze``
                                        alone
TFLite          ``.tflite`` (litert-torch) onnx2tf's NHWC ``.tflite`` of aiot's ``.onnx``, when the onnx2tf
                                        toolchain is installed (skipped with the reason otherwise)
ExecuTorch      ``.pte``                the XNNPACK-delegated program, which aiot's ``.pte`` already is
                                        (ratio 1 by construction; its runtime lives in another
                                        environment, so it is timed by the agent in part 2 only)
=============== ======================= =============================================================
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

#: Seconds each candidate runs per round (a burst of invokes; its median is the round's value).
BURST_S = 0.4


class _TorchScript:
    """A TorchScript module behind the agent backends' ``set_input``/``invoke`` interface."""

    def __init__(self, module, torch, input_shape) -> None:
        self._module, self._torch, self._x = module, torch, None
        self.input_shape = tuple(input_shape)

    def set_input(self, x) -> None:
        self._x = self._torch.from_numpy(x)

    def invoke(self) -> None:
        with self._torch.no_grad():
            self._module(self._x)


def _torchscript_references(model: str) -> dict:
    """``{"torchscript_ofi": ..., "torchscript_frozen": ...}`` sessions for zoo ``model``."""
    import torch

    from aiot.converters.api import build_source_model

    spec, net = build_source_model(model)
    example = spec.example_input(batch=1, seed=0)
    with torch.no_grad():
        traced = torch.jit.trace(net.eval(), example)
        frozen = torch.jit.freeze(traced)
        ofi = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.trace(net.eval(), example)))
        for module in (frozen, ofi):  # let the profiling executor settle before timing
            for _ in range(3):
                module(example)
    return {"torchscript_ofi": _TorchScript(ofi, torch, example.shape),
            "torchscript_frozen": _TorchScript(frozen, torch, example.shape)}


class _OrtNoNchwc:
    """The agent's ONNX Runtime session settings, with the x86-only NCHWc layout disabled."""

    def __init__(self, onnx_path: Path) -> None:
        import onnxruntime as ort

        from aiot.device_agent.backends import onnxruntime_backend

        agent = onnxruntime_backend.open(str(onnx_path), 1)  # the options the agent uses
        self.input_shape, self._name = agent.input_shape, agent.inputs[0]["name"]
        self._sess = ort.InferenceSession(str(onnx_path), agent._sess.get_session_options(),
                                          providers=["CPUExecutionProvider"],
                                          disabled_optimizers=["NchwcTransformer"])
        self._feed = None

    def set_input(self, x) -> None:
        self._feed = {self._name: x}

    def invoke(self) -> None:
        self._sess.run(None, self._feed)


def onnx2tf_status() -> str | None:
    """None when the onnx2tf toolchain is installed, else why the TFLite reference is skipped."""
    from aiot.core import toolchains

    if toolchains.installed("onnx2tf") is None:
        return "onnx2tf toolchain not installed (aiot toolchains install onnx2tf)"
    return None


def candidates(model: str, artifacts: dict[str, Path], work: Path) -> tuple[dict, dict]:
    """``({name: session}, {name: why skipped})`` for one model; ``artifacts``: format → path
    of the converted artifacts (ort, onnx, ptl, tflite)."""
    from aiot.device_agent.backends import (
        litert_backend,
        onnxruntime_backend,
        pytorch_mobile_backend,
    )

    sessions, skipped = {}, {}
    if "ort" in artifacts and "onnx" in artifacts:
        sessions["ort"] = onnxruntime_backend.open(str(artifacts["ort"]), 1)
        sessions["onnx_all"] = onnxruntime_backend.open(str(artifacts["onnx"]), 1)
        sessions["onnx_all_no_nchwc"] = _OrtNoNchwc(artifacts["onnx"])
    if "ptl" in artifacts:
        sessions["ptl"] = pytorch_mobile_backend.open(str(artifacts["ptl"]), 1)
        sessions.update(_torchscript_references(model))
    if "tflite" in artifacts:
        sessions["tflite"] = litert_backend.open(str(artifacts["tflite"]), 1)
        why = onnx2tf_status()
        if why is None and "onnx" in artifacts:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from tflite_paths import onnx2tf_tflite

            work.mkdir(parents=True, exist_ok=True)
            try:
                sessions["tflite_onnx2tf"] = litert_backend.open(str(onnx2tf_tflite(artifacts["onnx"], work)), 1)
            except Exception as exc:  # noqa: BLE001 - a failed reference is a row, not a crash
                skipped["tflite_onnx2tf"] = f"onnx2tf failed: {str(exc).splitlines()[0][:120]}"
        else:
            skipped["tflite_onnx2tf"] = why or "no .onnx artifact"
    return sessions, skipped


def _input_for(session):
    import numpy as np

    return np.random.default_rng(0).random(session.input_shape, dtype=np.float32)


def _nhwc_if_needed(session, x):
    import numpy as np

    shape = tuple(session.input_shape)
    if shape != x.shape and len(shape) == 4 and shape == (x.shape[0], x.shape[2], x.shape[3], x.shape[1]):
        return np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    return x


def _burst_ms(session, seconds: float) -> float:
    samples, deadline = [], time.perf_counter() + seconds
    while len(samples) < 5 or time.perf_counter() < deadline:
        t0 = time.perf_counter_ns()
        session.invoke()
        samples.append((time.perf_counter_ns() - t0) / 1e6)
    return statistics.median(samples)


def time_interleaved(sessions: dict, rounds: int, x) -> dict[str, dict]:
    """``{name: {"median_ms", "rounds"}}``: each round runs every session once (a burst), the
    order rotated each round so no session always runs first or after the same neighbour."""
    names = list(sessions)
    for name in names:
        sessions[name].set_input(_nhwc_if_needed(sessions[name], x))
        for _ in range(3):  # warm-up: first-run allocations and lazy initialisation
            sessions[name].invoke()
    values: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            values[name].append(_burst_ms(sessions[name], BURST_S))
    return {n: {"median_ms": statistics.median(v), "rounds": len(v)} for n, v in values.items()}


#: (runtime, aiot artifact, reference, portable reference or None).
PAIRS = (("ONNX Runtime", "ort", "onnx_all", "onnx_all_no_nchwc"),
         ("PyTorch Mobile", "ptl", "torchscript_ofi", "torchscript_frozen"),
         ("TFLite", "tflite", "tflite_onnx2tf", None))


def best_path_rows(model: str, artifacts: dict[str, Path], work: Path, rounds: int,
                   agent_speed: list[dict]) -> list[dict]:
    """One row per runtime: the aiot artifact's median, its reference's, and the ratio."""
    sessions, skipped = candidates(model, artifacts, work)
    x = _input_for(next(iter(sessions.values()))) if sessions else None
    timed = time_interleaved(sessions, rounds, x) if sessions else {}
    rows = []
    for runtime, ours, ref, portable in PAIRS:
        if ours not in timed:
            continue
        row = {"model": model, "runtime": runtime, "artifact": ours, "reference": ref,
               "artifact_ms": timed[ours]["median_ms"], "rounds": timed[ours]["rounds"]}
        if ref in timed:
            row["reference_ms"] = timed[ref]["median_ms"]
            row["ratio"] = row["artifact_ms"] / row["reference_ms"]
        else:
            row["skipped"] = skipped.get(ref, "not measured")
        if portable and portable in timed:
            row["portable_reference"] = portable
            row["portable_ms"] = timed[portable]["median_ms"]
            row["portable_ratio"] = row["artifact_ms"] / row["portable_ms"]
        rows.append(row)
    pte = next((s for s in agent_speed if s["model"] == model and s["format"] == "executorch"), None)
    if pte is not None:
        rows.append({"model": model, "runtime": "ExecuTorch", "artifact": "executorch",
                     "reference": "executorch (itself: XNNPACK-delegated)",
                     "artifact_ms": pte["median_ms"], "reference_ms": pte["median_ms"], "ratio": 1.0,
                     "rounds": pte["rounds"], "note": "timed by the agent (part 2); ratio 1 by construction"})
    return rows
