"""daBNN (``.dab``): binarized networks for ARM phones, written directly as daBNN's flatbuffer.

daBNN's own converter (onnx2bnn) has no Linux wheel and wants binary convolutions as a
Sign→Pad(-1)→Conv ONNX pattern that today's PyTorch exporters no longer produce, so aiot
emits the file itself (:mod:`aiot.converters.dabnn.schema`) from its layer list
(:mod:`aiot.converters.graph`) and checks it with a NumPy executor of the runtime's
semantics (:mod:`aiot.converters.dabnn.reference`). Timing happens on devices with daBNN's
``benchmark_single_model``.

Mapping (as onnx2bnn writes it, NHWC):

* conv → ``FpConv2D`` (OHWI weights); linear → ``FpConv2D`` whose kernel covers the whole
  input (its weights permuted from PyTorch's CHW flattening to HWC), because the runtime
  has no case for the schema's ``FC`` layer; flatten → nothing (the data is already flat);
* binary conv → ``BinConv2D`` (weights bit-packed, 128-bit aligned unless C == 64). It
  outputs ``popcount(x XOR w)`` = (K - dot) / 2 over K = C*kh*kw taps, so the BatchNorm that
  must follow it becomes onnx2bnn's rewritten ``Affine``: with ``s = gamma/sqrt(var+eps)``,
  ``t = beta - mean*s`` and the layer's alpha folded in, ``a = -2*s*alpha`` and
  ``b = t + K*s*alpha``; other BatchNorms become ``Affine(s, t)``;
* relu → ``Relu``; max/average pooling → ``MaxPool``/``AvePool``; global average pooling →
  ``AvePool`` with the map's size as kernel (onnx2bnn's kernel -1 "global" form reaches the
  generic kernel with stride 0 and a kernel of 2**64-1); add → ``Add``; concat of two
  equal-channel tensors → ``Concat`` on axis 3.

sign(0): PyTorch's binary layers map 0 to +1, daBNN's bit packing maps it to -1 (bit 1 iff
x > 0). Two places make zeros common, and both are made exact: a binary conv reading a
ReLU-derived (non-negative) tensor gets an ``Affine(1, 2**-126)`` "sign shift" before it
(every input becomes > 0, as PyTorch's signs are all +1); an ``Affine`` feeding a binary
conv has ``b`` nudged, per channel and only where needed, by a few float32 ulps so that
every reachable popcount lands on PyTorch's side of zero even with FMA rounding.

Frozen BiBench models (:func:`aiot.models.bibench.freeze`) bring two things daBNN lacks:

* ``Hardtanh`` (clamp to [lo, hi]; binarize() puts it before binary convs). daBNN has no
  clamp, so it is dropped where only binary convs read it, directly or through max-pools
  (which commute with a monotone clamp): sign(clamp(v) - t) == sign(v - t) for
  ``lo < t <= hi`` (t = 0 without a threshold). Outside that band the clamp alone decides:
  +1 for every v when ``t <= lo``, -1 when ``t > hi``; those channels of the BatchNorm
  that starts the chain become the constant ``Affine(0, ±1)`` (refused if no such
  BatchNorm). A clamp that a float layer (or the model's output) also reads is refused;
* ReActNet's per-input-channel threshold ``t`` (binarize ``x - t``): daBNN cannot shift
  activations before binarizing (BiBench Table 4), so ``t`` is subtracted from the ``b`` of
  the BatchNorm's Affine that produces the input, looking through dropped clamps and
  max-pools (both commute with a per-channel shift), when that BatchNorm feeds binary convs
  needing the same thresholds and nothing else; otherwise the binary conv is refused. The
  sign-of-zero nudges below are computed on the shifted values. All-zero thresholds need
  nothing.

Affine, Relu and Add run in place on daBNN; an emitted graph in which one would overwrite a
tensor that a later layer still reads is refused (Add swaps its operands first).
"""

from __future__ import annotations

import logging
import math
from importlib.metadata import version
from pathlib import Path

from aiot.converters.base import Availability, Converter, modules_available
from aiot.converters.dabnn.emit import FORMAT, emit
from aiot.converters.dabnn.reference import load_model, run_model
from aiot.converters.dabnn.schema import build_model
from aiot.converters.graph import lower
from aiot.core.errors import ArtifactError, ConversionError, UsageError
from aiot.core.fileio import write_atomic

log = logging.getLogger(__name__)
PRECISIONS = ("bnn", "fp32")


class DabnnConverter(Converter):
    """Graph lowering → daBNN flatbuffer, checked by aiot's NumPy executor of daBNN."""

    name = FORMAT
    extension = ".dab"
    backend = None
    description = ("daBNN flatbuffer for binarized models (NHWC, bit-packed binary convs), timed "
                   "on devices with daBNN's own benchmark_single_model; verified by aiot's "
                   "NumPy reference executor")
    # Logits pass through float convs, popcount rescaling and pooling in float32 with a
    # different summation order than PyTorch; 1e-3 leaves room for that (and for the few-ulp
    # sign nudges) while any flipped binary activation moves logits far more.
    atol = 1e-3
    binary_native = True  # sign shifts and nudges make it binarize as PyTorch: parity on logits
    options = {  # noqa: RUF012 - the base class's attribute
        "precision": ("bnn", "bnn (binarized models) | fp32 (daBNN's float form of a "
                             "full-precision model: BiBench's daBNN FP32 column)"),
    }

    def check_options(self, options: dict[str, str]) -> None:
        """Refuse an unknown precision before any work."""
        if options["precision"] not in PRECISIONS:
            raise UsageError(f"dabnn precision must be one of {', '.join(PRECISIONS)}, got "
                             f"'{options['precision']}'", "e.g. --opt precision=fp32")

    def availability(self) -> Availability:
        """Needs only the flatbuffers runtime package (and NumPy, a core dependency)."""
        return modules_available({"flatbuffers": "flatbuffers"}, FORMAT)

    def toolchain_versions(self) -> dict[str, str]:
        """Versions of the packages that shaped the file."""
        return {pkg: version(pkg) for pkg in ("torch", "flatbuffers", "numpy")}

    def export(self, model, example, out_path: Path, options: dict[str, str]) -> dict:
        """Lower, emit, write atomically, then re-read and run the file once."""
        out_path = Path(out_path)
        graph = lower(model, example, FORMAT)
        dab, facts = emit(graph, options.get("precision", "bnn"))
        data = build_model(dab)
        write_atomic(out_path, lambda tmp: tmp.write_bytes(data))
        try:
            _verify(out_path, graph, example)
        except BaseException:
            out_path.unlink(missing_ok=True)
            raise
        for warning in facts["device_warnings"]:
            log.warning("%s", warning)
        return facts

    def describe(self, artifact: Path) -> dict:
        """The signature of a ``.dab`` file as daBNN reads it (no runtime here runs it): its
        one NHWC float input and the last layer's output, whose shape the file does not say.

        Raises:
            ArtifactError: the file is not a well-formed daBNN model.
        """
        loaded = load_model(Path(artifact))
        return {"inputs": [{"name": loaded.input.name, "shape": list(loaded.input.shape),
                            "dtype": "float32", "quantization": None}],
                "outputs": [{"name": loaded.output, "shape": [-1], "dtype": "float32",
                             "quantization": None}],
                "note": f"read by aiot's daBNN reader: {len(loaded.model.layers)} layers"}

    def deployed_form(self, model, example):
        """``(model daBNN runs, facts or None)``: clamps that float layers read are dropped
        (see :mod:`aiot.converters.dabnn.form`); parity is then measured against it."""
        from aiot.converters.dabnn.form import deployed_form  # imports torch (bibench)

        return deployed_form(model, example)

    def reference_outputs(self, artifact: Path, inputs):
        """Logits ``(N, classes)`` of the artifact on ``inputs`` (N, C, H, W), by NumPy.

        Raises:
            ArtifactError: the file is missing, truncated, corrupt or not runnable by daBNN.
        """
        return run_model(load_model(artifact), inputs)


    #: daBNN's bit packing sets a 1 bit where x > 0: zero binarizes to -1 (PyTorch: +1).
    positive_at_zero = False
    #: Its BinConv2D inputs are sign-shifted or carry folded thresholds: equal in sign to
    #: PyTorch's, not in value.
    stem_by_value = False

    def binary_inputs(self, model, artifact: Path, inputs, names: list[str]) -> dict:
        """What each BinConv2D of the file binarizes, NCHW, by PyTorch layer name, for
        ``inputs``: read from aiot's executor of this very ``.dab``."""
        import numpy as np

        loaded = load_model(artifact)
        sources = {layer.params["output"]: layer.params["input"]
                   for layer in loaded.model.layers if layer.type == "BinConv2D"}
        by_node = {n.replace(".", "_"): n for n in names}  # fx names its nodes with "_"
        if sorted(sources) != sorted(by_node):
            raise ConversionError(FORMAT, "parity", f"the file has {len(sources)} binary convs, "
                                  f"PyTorch {len(names)}", "please report it")
        found: dict[str, list] = {}
        for start in range(0, len(inputs), 16):  # the executor keeps tensors of 16 at a time
            tensors = run_model(loaded, inputs[start : start + 16], keep_tensors=True)
            for node, source in sources.items():
                found.setdefault(by_node[node], []).append(tensors[source].transpose(0, 3, 1, 2))
        return {name: np.concatenate(chunks) for name, chunks in found.items()}


def _verify(path: Path, graph, example) -> None:
    """Re-read the file and run the example: the output must have PyTorch's size."""
    try:
        out = run_model(load_model(path), example.detach().cpu().numpy())
    except ArtifactError as exc:  # just written by this process: the emitter is at fault
        raise ConversionError(FORMAT, "verify", exc.message,
                              "aiot emitted a model it cannot run; please report it") from None
    expected = math.prod(graph.by_name()[graph.output].shape[1:])
    if out.shape[1] != expected:
        raise ConversionError(FORMAT, "verify", f"the model gives {out.shape[1]} outputs, "
                              f"PyTorch {expected}", "please report it")
