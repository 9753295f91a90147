"""Parity of an artifact with its PyTorch original, run through the device agent's backends.

The host checks with the very code the device runs (``aiot.device_agent.backends``), on
deterministic inputs, one image at a time (artifacts are exported at batch 1).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import math
import weakref
from collections.abc import Callable
from pathlib import Path

import aiot.device_agent
from aiot.converters.inputs import as_args, call, input_names, row, rows
from aiot.core import toolchains
from aiot.core.errors import AccuracyMismatch, AiotError, ArtifactError, first_line
from aiot.core.isolation import RuntimeCrash, isolated
from aiot.core.quiet import toolchain_output_to_log
from aiot.core.toolchains import backend_toolchain
from aiot.device_agent import agent, backends, protocol
from aiot.device_agent.signature import all_outputs, export_order  # as predict gives them
from aiot.device_agent.spec import RunSpec

log = logging.getLogger(__name__)


def compare_outputs(reference, actual, atol: float | None, rtol: float | None) -> dict:
    """Error statistics between two ``(N, classes)`` arrays; ``ok`` when within tolerance.

    The relative error is normalised by the largest reference magnitude per sample, so
    near-zero logits do not blow it up. NaN and ±Inf are compared as values: the artifact
    must have them where PyTorch has them (``nonfinite`` counts both sides and the places
    they disagree); the errors are measured on the places where both are finite.
    """
    import numpy as np

    ref = np.asarray(reference, dtype=np.float64).reshape(len(reference), -1)
    act = np.asarray(actual, dtype=np.float64).reshape(len(actual), -1)
    if ref.shape != act.shape:
        return {"ok": False, "reason": f"output shape {act.shape} != PyTorch {ref.shape}",
                "max_abs": float("inf"), "max_rel": float("inf"), "mean_abs": float("inf"),
                "top1_agreement": 0.0, "n": len(ref), "atol": atol, "rtol": rtol}
    finite = np.isfinite(ref) & np.isfinite(act)
    nonfinite = None
    if not finite.all():
        same = (np.isnan(ref) & np.isnan(act)) | (ref == act)  # NaN with NaN, Inf with Inf
        nonfinite = {"reference": int((~np.isfinite(ref)).sum()),
                     "artifact": int((~np.isfinite(act)).sum()),
                     "disagree": int((~finite & ~same).sum())}
    diff = np.where(finite, np.abs(np.where(finite, ref, 0.0) - np.where(finite, act, 0.0)), 0.0)
    scale = np.maximum(np.where(finite, np.abs(ref), 0.0).max(axis=1, keepdims=True), 1e-6)
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float((diff / scale).max()) if diff.size else 0.0
    agreement = float(np.mean(_top1(ref) == _top1(act)))
    within = (atol is not None and max_abs <= atol) or (rtol is not None and max_rel <= rtol)
    report = {
        "ok": bool((within or (atol is None and rtol is None))
                   and not (nonfinite and nonfinite["disagree"])),
        "max_abs": max_abs, "max_rel": max_rel,
        "mean_abs": float(diff[finite].mean()) if finite.any() else 0.0,
        "top1_agreement": agreement, "n": len(ref), "atol": atol, "rtol": rtol,
    }
    if nonfinite:
        report["nonfinite"] = nonfinite
    return report


def _top1(outputs):
    """Each row's top class; NaN ranks lowest (NumPy's argmax would pick it as the top)."""
    import numpy as np

    return np.where(np.isnan(outputs), -np.inf, outputs).argmax(1)


@contextlib.contextmanager
def _torch_threads_kept():
    """Keep the host's torch thread count: the PyTorch Mobile backend sets it process-wide,
    which is right in the agent's own process but not in this one, where training follows."""
    import sys

    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    try:
        yield
    finally:
        if before is not None:
            torch.set_num_threads(before)


def run_artifact(backend_name: str, artifact: Path, inputs, names: list[str] | None = None) -> object:
    """Outputs of ``artifact`` for each row of ``inputs`` (numpy, batch first), ``(N, -1)``:
    a model with several outputs has them side by side, in the order it returned them.

    ``inputs`` is one array, or a tuple of arrays (a model of several inputs) named ``names``;
    each is matched to the runtime's input of that name, else by position (a runtime that
    names its inputs ``input_0``, … by position: ExecuTorch), and fed in its own dtype.

    Raises:
        ArtifactError: the runtime cannot load the file (truncated, corrupt, unsupported).
    """
    import numpy as np

    several = isinstance(inputs, tuple)
    toolchain = backend_toolchain(backend_name)
    if toolchain is not None and several:
        return _outputs_side_by_side(run_artifact_outputs(backend_name, artifact, inputs, names))
    if toolchain is not None:
        return _run_in_toolchain(toolchain, backend_name, artifact, inputs)
    backend = backends.load(backend_name)
    with toolchain_output_to_log(log), _torch_threads_kept():
        try:
            session = backend.open(str(artifact), 1)
        except Exception as exc:
            detail = first_line(exc)
            raise ArtifactError(f"{backend_name} cannot load {artifact}: {detail}",
                                "the file is truncated or corrupt; re-convert it") from None
        if several:
            order = _runtime_order(session.inputs, names, len(inputs))
            rows = [all_outputs(session, [np.ascontiguousarray(inputs[k][i : i + 1],
                                                               dtype=session.inputs[j]["dtype"])
                                          .reshape(session.shapes[j])
                                          for j, k in enumerate(order)])
                    for i in range(len(inputs[0]))]
        else:
            rows = [all_outputs(session, np.ascontiguousarray(x[None], dtype=session.input_dtype
                                                              or np.float32)
                                .reshape(session.input_shape)) for x in inputs]
        # Release the runtime while its chatter still goes to the log. A session nothing
        # else holds dies at ``del``; only one kept alive by a reference cycle needs the
        # collector, which is expensive where torch and TensorFlow are loaded (0.3 s of CPU
        # per call in a plain `aiot convert`, more in a long-lived process).
        alive = _weak(session)
        del session
        if alive is None or alive() is not None:
            gc.collect()
    return np.stack(rows)


def _runtime_order(declared: list[dict], names: list[str] | None, count: int) -> list[int]:
    """For each input the runtime declares, the index of the array that feeds it: by name
    where the runtime kept the names, else by position.

    Raises:
        ArtifactError: the runtime declares another number of inputs than the model has.
    """
    if len(declared) != count:
        raise ArtifactError(f"the artifact declares {len(declared)} input(s), the model "
                            f"takes {count}", "re-convert it")
    runtime = [d["name"] for d in declared]
    if names and sorted(runtime) == sorted(names):
        return [names.index(name) for name in runtime]
    return list(range(count))


def _outputs_side_by_side(outputs: dict):
    """``run_artifact_outputs``' dict as ``(N, -1)``, in the order the model returned them."""
    import numpy as np

    entries = [{"name": name} for name in outputs]
    arrays = list(outputs.values())
    return np.concatenate([arrays[k].reshape(len(arrays[k]), -1)
                           for k in export_order(entries)], axis=1)


def _weak(obj):
    """A weak reference to ``obj``, or None where its type allows none."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return None


def _run_in_toolchain(toolchain: str, backend_name: str, artifact: Path, inputs):
    """Outputs from the agent's ``predict`` command run by a toolchain's interpreter.

    The agent package is run from aiot's installed folder (it is standard-library only),
    exactly as on a device, so the runtime that checks parity is the one that times.
    """
    import json
    import tempfile

    import numpy as np

    agent_parent = Path(aiot.device_agent.__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="aiot-predict-") as tmp:
        spec = RunSpec(backend=backend_name, artifact=str(Path(artifact).resolve()), threads=1,
                       inputs=str(Path(tmp) / "x.npy"), outputs=str(Path(tmp) / "y.npy")).to_wire()
        np.save(spec["inputs"], np.ascontiguousarray(inputs, dtype=np.float32))
        (Path(tmp) / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        stdout, stderr = toolchains.run_module_output(toolchain, "device_agent",
                                                      ["predict", str(Path(tmp) / "spec.json")],
                                                      cwd=agent_parent)
        _raise_agent_error(stdout, artifact, stderr)
        return np.load(spec["outputs"])


def _raise_agent_error(stdout: str, artifact: Path, stderr: str = "") -> None:
    for line in stdout.splitlines():
        msg = protocol.decode(line)
        if msg and msg["event"] == "error":
            reason = runtime_reason(stderr)
            raise ArtifactError(f"{artifact.name}: {msg['type']}: {msg['message']}"
                                + (f" (runtime log: {reason})" if reason else ""),
                                "the file is truncated or corrupt; re-convert it")


def runtime_reason(stderr: str) -> str | None:
    """The first failure a native runtime logged (ExecuTorch reports a delegate's refusal as
    ``error: 0x:1`` and logs why: ``Failed to define tensor 91 with code:
    xnn_status_invalid_parameter``), without its ``[file.cpp:NN]`` prefix; None if it logged
    none. cpuinfo's probes of optional system files (``Failed to open …``) are not failures."""
    for line in stderr.splitlines():
        text = line.split("] ", 1)[-1].strip() if line.startswith("[") else line.strip()
        if "fail" in text.lower() and not text.startswith("Failed to open"):
            return text[:200]
    return None


PASS, INCONCLUSIVE, FAIL = "pass", "inconclusive", "fail"

#: Real test images a parity check runs on where the logits are judged within a tolerance
#: (a float artifact: every image must match, so a few show a wrong export).
PARITY_IMAGES = 32
#: Where top-1 agreement is the rule (int8 artifacts, binarized models in a float runtime) it
#: counts disagreements, so it is judged on enough images to allow this many: a 99 % rule on
#: 300 images (an artifact that truly agrees on 99.5 % of them passes 93 % of the time,
#: binomially; one at 99.7 % 99 %, one at 98 % 15 %). On 32 one flipped image (96.9 %) failed it;
#: the looser rules (80 %, 90 %) already allow 3 on 32.
TOP1_RULE_DISAGREEMENTS = 3


def parity_image_count(requested: int | None, min_top1: float | None) -> int:
    """How many real images a parity check uses: ``requested`` when the caller chose, else
    :data:`PARITY_IMAGES`, or under a top-1 rule (``min_top1``) as many as let it allow
    :data:`TOP1_RULE_DISAGREEMENTS` disagreements, if that is more (99 %: 300)."""
    if requested is not None:
        return requested
    if min_top1 is None or min_top1 >= 1:
        return PARITY_IMAGES
    needed = math.ceil(round(TOP1_RULE_DISAGREEMENTS / (1 - min_top1), 6))  # 1 - 0.99 is inexact
    return max(PARITY_IMAGES, needed)

#: What makes an inconclusive check conclusive, said wherever the verdict is shown.
INCONCLUSIVE_FIX = ("convert trained weights (aiot train MODEL, or --weights FILE), or give the "
                    "model a seeded init whose outputs depend on its inputs")


def constant_baseline(reference) -> dict:
    """How well an artifact whose output ignores its input would match ``reference``.

    The constant is the midrange of PyTorch's outputs per element (the constant closest to
    all of them in max-abs terms); its top-1 is PyTorch's most frequent class. When such an
    artifact passes the same check, the check says nothing about the real one.
    """
    import numpy as np

    ref = np.asarray(reference, dtype=np.float64).reshape(len(reference), -1)
    constant = np.broadcast_to((ref.max(axis=0) + ref.min(axis=0)) / 2, ref.shape)
    classes = ref.argmax(1)
    counts = np.bincount(classes) if len(classes) else np.zeros(1, dtype=int)
    return {"outputs": constant, "spread": float((ref.max(axis=0) - ref.min(axis=0)).max()),
            "top_class": int(counts.argmax()), "top1_agreement": float(counts.max() / max(len(ref), 1))}


def _vacuous(reference, atol, rtol, min_top1, on_data: bool) -> str | None:
    """Why a constant-output artifact would pass this very check, or None when it would not."""
    import numpy as np

    n = len(reference)
    inputs = "images" if on_data else "noise inputs"
    reference = np.asarray(reference, dtype=np.float64)
    if reference.size and not np.isfinite(reference).any():
        return (f"PyTorch's outputs are all NaN/Inf on the {n} {inputs}: there is no number "
                "to compare the artifact's with")
    reference = np.nan_to_num(reference, nan=0.0, posinf=0.0, neginf=0.0)  # judged place by place
    base = constant_baseline(reference)
    if min_top1 is not None:
        if base["top1_agreement"] >= min_top1:
            return (f"PyTorch predicts class {base['top_class']} for "
                    f"{round(base['top1_agreement'] * n)} of {n} {inputs}, so an artifact with a "
                    f"constant output would agree on {base['top1_agreement']:.0%} ≥ {min_top1:.0%} too")
        return None
    if atol is None and rtol is None:
        return None  # the logits are not judged (a binarized model: its signs decide)
    if not compare_outputs(reference, base["outputs"], atol, rtol)["ok"]:
        return None
    tolerance = " or ".join(f"{name} {value:.0e}" for name, value in (("atol", atol), ("rtol", rtol))
                            if value is not None)
    return (f"PyTorch's outputs barely depend on the input: they spread by at most "
            f"{base['spread']:.1e} across {n} {inputs}, within the tolerance ({tolerance}), so "
            "an artifact with a constant output would pass too")


def check_parity(fmt: str, backend: str | Callable, artifact: Path, model, inputs, atol: float | None,
                 rtol: float | None = 1e-3, min_top1: float | None = None,
                 dataset: tuple[str, object] | None = None) -> dict:
    """Compare ``artifact`` with ``model`` on ``inputs`` (a seeded random torch batch) and on
    real images.

    Args:
        backend: the agent backend that runs the artifact, or, for emit-only formats, a
            reference executor ``(artifact, inputs as numpy) -> outputs`` of the format's
            semantics.
        atol, rtol: float formats must match PyTorch's outputs within these on every input.
        min_top1: quantized formats cannot match logits; they must instead agree with
            PyTorch's top-1 on at least this fraction of the real images.
        dataset: ``(name, torch batch)`` of preprocessed real images, or None.

    Returns:
        The parity report (max_abs, max_rel, mean_abs, top1_agreement, n, atol, rtol, ok), with
        a ``dataset`` entry (name, n, top1_agreement, max_abs) when real images were used, and
        a ``verdict``: "pass", or "inconclusive" (with ``inconclusive: {reason, fix}``) when the
        model's outputs do not depend on its inputs closely enough for the check to tell the
        artifact from one with a constant output (an untrained net whose logits collapsed).

    Raises:
        AccuracyMismatch: outside tolerance; the report is attached.
    """
    on_noise, on_images = _outputs_in_one_start(backend, artifact, inputs, dataset)
    report, reference = _compare_batch(backend, artifact, model, inputs, atol, rtol, on_noise)
    vacuous = _vacuous(reference, atol, rtol, None, on_data=False)
    if dataset is not None:
        name, images = dataset
        on_data, data_reference = _compare_batch(backend, artifact, model, images, atol, rtol,
                                                 on_images)
        report["dataset"] = {"name": name, "n": on_data["n"], "ok": on_data["ok"],
                             "top1_agreement": on_data["top1_agreement"],
                             "max_abs": on_data["max_abs"]}
        if vacuous is not None or min_top1 is not None:  # the images decide a top-1 rule
            vacuous = _vacuous(data_reference, atol, rtol, min_top1, on_data=True)
    elif min_top1 is not None:
        vacuous = _vacuous(reference, atol, rtol, min_top1, on_data=False)
    if min_top1 is not None:
        agreement = report.get("dataset", report)["top1_agreement"]
        report.update(ok=bool(agreement >= min_top1), min_top1=min_top1)
    elif dataset is not None:
        report["ok"] = bool(report["ok"] and report["dataset"]["ok"])
    report["verdict"] = FAIL if not report["ok"] else INCONCLUSIVE if vacuous else PASS
    if vacuous:
        report["inconclusive"] = {"reason": vacuous, "fix": INCONCLUSIVE_FIX}
    log.info("%s parity %s: max abs %.3g, max rel %.3g, top-1 %.0f%%%s", fmt, report["verdict"],
             report["max_abs"], report["max_rel"], 100 * report["top1_agreement"],
             f", on {report['dataset']['name']} {100 * report['dataset']['top1_agreement']:.0f}%"
             if "dataset" in report else "")
    if not report["ok"]:
        raise AccuracyMismatch(fmt, report)
    return report


def _outputs_in_one_start(backend, artifact: Path, inputs, dataset) -> tuple:
    """The artifact's outputs on the noise ``inputs`` and on the ``dataset``'s images from ONE
    run of its toolchain's interpreter, whose every start imports the runtime (ExecuTorch's:
    3.5 CPU seconds); ``(None, None)`` where the runtime runs in this process, or where the
    two batches cannot be stacked."""
    if callable(backend) or dataset is None or backend_toolchain(backend) is None \
            or isinstance(inputs, tuple):
        return None, None
    import numpy as np

    noise, images = inputs.numpy(), dataset[1].numpy()
    if noise.shape[1:] != images.shape[1:] or noise.dtype != images.dtype:
        return None, None
    both = run_artifact(backend, artifact, np.concatenate([noise, images]))
    return both[:len(noise)], both[len(noise):]


def _compare_batch(backend, artifact: Path, model, inputs, atol, rtol,
                   actual=None) -> tuple[dict, object]:
    """The error statistics of the artifact on ``inputs``, and PyTorch's outputs on them
    (``(N, -1)``, every output side by side); ``actual``: the artifact's outputs when they
    were already computed.

    A model with several outputs is judged on all of them together (the report's numbers),
    and each output's own numbers are listed under ``outputs`` by name.
    """
    import numpy as np
    import torch

    with torch.no_grad():
        reference = _reference_outputs(model, inputs)
    if actual is None and callable(backend):
        actual = backend(artifact, inputs.numpy())
    elif actual is None:
        actual = run_artifact(backend, artifact, _numpy(inputs), input_names(model, len(as_args(inputs))))
    joined = np.concatenate(reference, axis=1)
    report = compare_outputs(joined, actual, atol, rtol)  # a size mismatch: its own reason
    actual = _split_like(reference, actual)
    names = getattr(model, "aiot_output_names", None)
    if names and len(reference) > 1 and len(actual) == len(reference):
        report["outputs"] = [_output_report(name, ref, act, atol, rtol)
                             for name, ref, act in zip(names, reference, actual)]
        if not all(o["ok"] for o in report["outputs"]):
            report["ok"] = False
    return report, joined


def _output_report(name: str, reference, actual, atol, rtol) -> dict:
    """One output's line of a multi-output parity report."""
    found = compare_outputs(reference, actual, atol, rtol)
    return {"name": name, **{k: found[k] for k in ("ok", "max_abs", "max_rel", "mean_abs",
                                                    "top1_agreement")},
            **({"reason": found["reason"]} if "reason" in found else {})}


def _split_like(reference: list, actual) -> list:
    """The artifact's outputs as a list like ``reference``'s: its ``(N, total)`` array (all
    outputs side by side) is cut at the sizes of PyTorch's outputs."""
    import numpy as np

    actual = np.asarray(actual).reshape(len(actual), -1)
    sizes = [r.shape[1] for r in reference]
    if len(reference) == 1 or actual.shape[1] != sum(sizes):
        return [actual]
    return np.split(actual, np.cumsum(sizes)[:-1], axis=1)


def _numpy(inputs):
    """A torch batch (a tensor, or a tuple of them) as NumPy, in the same form."""
    if isinstance(inputs, tuple):
        return tuple(t.numpy() for t in inputs)
    return inputs.numpy()


def _reference_outputs(model, inputs) -> list:
    """PyTorch's outputs, one ``(N, -1)`` array per output: one batch, or row by row for a
    module captured at batch 1 (a user's ``torch.export`` program guards its batch size).
    ``inputs``: a tensor, or a tuple of them (one per input)."""
    import torch

    def flat(out, n: int) -> list:
        outs = out if isinstance(out, (tuple, list)) else (out,)
        return [o.reshape(n, -1) for o in outs]

    n = rows(inputs)
    if getattr(model, "aiot_fixed_batch", False):
        each = [flat(call(model, row(inputs, i, i + 1)), 1) for i in range(n)]
        return [_as_numpy(torch.cat([r[k] for r in each])) for k in range(len(each[0]))]
    return [_as_numpy(o) for o in flat(call(model, inputs), n)]


def _as_numpy(tensor):
    """A tensor as NumPy; bfloat16, which NumPy has no type for, as float32."""
    import torch

    return (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).numpy()


def agent_events(backend_name: str, command: str, spec: dict) -> list[dict]:
    """The protocol messages of the device agent's ``command`` on ``spec``, run where the
    backend's runtime is: by its toolchain's interpreter (LCE, ExecuTorch), exactly as on a
    device, or in a forked child of this process (:func:`~aiot.core.isolation.isolated`), so
    that a runtime crashing or hanging on a damaged file is one line naming it.

    Raises:
        RuntimeCrash: the runtime died, quit or hung reading the artifact.
    """
    import functools
    import json
    import tempfile

    toolchain = backend_toolchain(backend_name)
    spec = {"v": 1, "backend": backend_name, "threads": 1, **spec}
    file = Path(str(spec.get("artifact", "model"))).name
    if toolchain is None:
        with contextlib.suppress(Exception):  # imported here once, not again in each child
            backends.load(backend_name)
        text = isolated(functools.partial(_agent_text, command, spec), file=file,
                        runtime=backend_name)
    else:
        toolchains.require_python(toolchain)  # not installed: its own error, not the file's
        agent_parent = Path(aiot.device_agent.__file__).resolve().parent.parent
        with tempfile.TemporaryDirectory(prefix=f"aiot-{command}-") as tmp:
            (Path(tmp) / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
            try:
                text = toolchains.run_module(toolchain, "device_agent",
                                             [command, str(Path(tmp) / "spec.json")],
                                             cwd=agent_parent)
            except toolchains.ToolchainError as exc:  # died or hung with nothing said
                raise RuntimeCrash(f"{file}: the {backend_name} runtime failed reading it "
                                   f"({exc.message})", exc.hint) from None
    return [m for m in map(protocol.decode, text.splitlines()) if m]


def _agent_text(command: str, spec: dict) -> str:
    """What the agent prints for ``command`` run in this process (its protocol lines); the
    runtime's own chatter goes to the debug log."""
    import io

    buffer = io.StringIO()
    with toolchain_output_to_log(log), contextlib.redirect_stdout(buffer):
        agent.execute(command, spec)
    return buffer.getvalue()


def run_artifact_outputs(backend_name: str, artifact: Path, inputs,
                         names: list[str] | None = None) -> dict:
    """Every output of ``artifact`` by name, ``(N, ...)``, one inference per row of
    ``inputs`` (numpy, batch first: one array, or a tuple named ``names`` matched to the
    runtime's inputs as :func:`run_artifact` does), through the agent's ``predict`` of an
    ``.npz``.

    Raises:
        ArtifactError: the runtime refuses the file or the inputs.
    """
    import tempfile

    import numpy as np

    with tempfile.TemporaryDirectory(prefix="aiot-outputs-") as tmp:
        (found,) = [e for e in agent_events(backend_name, "inspect",
                                            {"artifact": str(Path(artifact).resolve())})
                    if e["event"] in ("signature", "error")]
        _raise_error_event(found, artifact)
        arrays = inputs if isinstance(inputs, tuple) else (inputs,)
        order = _runtime_order(found["inputs"], names, len(arrays))
        batch = {spec["name"]: np.ascontiguousarray(arrays[k], dtype=spec["dtype"])
                 .reshape(len(arrays[k]), *spec["shape"])
                 for spec, k in zip(found["inputs"], order)}
        x_file, y_file = Path(tmp) / "x.npz", Path(tmp) / "y.npz"
        np.savez(x_file, **batch)
        events = agent_events(backend_name, "predict", {"artifact": str(Path(artifact).resolve()),
                                                        "inputs": str(x_file),
                                                        "outputs": str(y_file)})
        for event in events:
            _raise_error_event(event, artifact)
        count = len(arrays[0])
        with np.load(y_file) as outputs:
            return {name: outputs[name].reshape(count, *outputs[name].shape[2:])
                    for name in outputs.files}


def _raise_error_event(event: dict, artifact: Path) -> None:
    if event["event"] == "error":
        raise ArtifactError(f"{Path(artifact).name}: {event['type']}: {event['message']}",
                            "the file is truncated or corrupt; re-convert it")


#: The real images parity is also checked on (:func:`parity_images`).
PARITY_DATASET = "fashion-mnist"


def parity_images(spec, count: int):
    """``(dataset name, torch batch)`` of real test images for parity, or None without data.

    Fashion-MNIST is preprocessed to any model's input (resized, replicated to RGB): not the
    model's own domain for ImageNet models, but real image statistics, which is what
    quantized formats must be judged on (random noise saturates their calibrated ranges).
    """
    if count <= 0:
        return None
    import torch

    from aiot.models.datasets import load_dataset

    try:
        x, _y = load_dataset(PARITY_DATASET, spec.input, split="test", limit=count, seed=1)
    except AiotError as exc:
        log.info("parity without real images: %s", exc.message)
        return None
    return PARITY_DATASET, torch.from_numpy(x)
