"""Keras model files (``.keras``, ``.h5``/``.hdf5``) to TFLite, with TensorFlow's own converter.

No runtime aiot drives reads a Keras file; TensorFlow converts it, so it runs as a ``.tflite``.
The conversion runs in the ``lce`` toolchain (TensorFlow 2.16, Keras 3: the environment aiot
already installs for Larq Compute Engine) by :data:`SCRIPT`, which also checks parity: the Keras
model and the ``.tflite`` on the same inputs. The result is kept in aiot's cache per file
content, so a second ``run`` of the same file converts nothing. Not a registered format (it
converts from a Keras file, not from PyTorch): :func:`tflite_of` is called where a model
reference names a Keras file (run, sweep, push, convert).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from aiot.core import toolchains
from aiot.core.errors import AiotError, ConversionError
from aiot.core.fileio import sha256_file, write_text_atomic
from aiot.core.paths import cache_dir
from aiot.models.model_ref import HDF5_SIGNATURE, KERAS, detect_format

log = logging.getLogger(__name__)

SCRIPT = Path(__file__).with_name("to_tflite.py")
TOOLCHAIN = "lce"
#: Largest difference allowed between an output of the Keras model and of its ``.tflite``,
#: relative to the output's scale (float32 kernels of two runtimes, not a changed model).
TOLERANCE = 1e-4


@dataclass(frozen=True)
class KerasTflite:
    """A Keras file's ``.tflite`` and how it was checked."""

    artifact: Path
    parity: dict
    seconds: float
    cached: bool


def is_keras_file(text: str) -> bool:
    """Whether ``text`` (a ``--model`` value) names an existing Keras model file."""
    path = Path(text).expanduser()
    try:
        if not path.is_file():
            return False
        with open(path, "rb") as fh:
            head = fh.read(8)
        # only a zip is read further (not an ONNX file, which detect_format would parse)
        zipped = head[:4] == b"PK\x03\x04"
        return head == HDF5_SIGNATURE or (zipped and detect_format(path) == KERAS)
    except (OSError, ValueError, AiotError):  # a file detect_format refuses is not Keras
        return False


def tflite_of(path: Path) -> KerasTflite:
    """The ``.tflite`` of the Keras file at ``path`` (``NAME.tflite``, e.g. ``small.keras.tflite``),
    converted once per file content in the ``lce`` toolchain and parity-checked there.

    Raises:
        ToolchainError: the ``lce`` toolchain is not installed, or TensorFlow failed on the file.
        ConversionError: the ``.tflite`` computes other values than the Keras model.
    """
    folder = cache_dir() / "keras" / sha256_file(path)[:16]
    artifact, facts = folder / f"{path.name}.tflite", folder / "parity.json"
    if artifact.is_file() and facts.is_file():
        return KerasTflite(artifact, json.loads(facts.read_text()), 0.0, True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="aiot-keras-") as tmp:
        out = Path(tmp) / artifact.name
        toolchains.require_python(TOOLCHAIN)  # not installed: its own error says how to
        try:
            lines = toolchains.run_script(TOOLCHAIN, SCRIPT, [str(path.resolve()), str(out)],
                                          timeout=900).strip().splitlines()
        except toolchains.ToolchainError as exc:  # Keras could not load it, or TF convert it
            why = exc.message.split(" failed: ", 1)[-1]
            hint = ("a model saved whole by Keras 2 or 3 (model.save, not save_weights) "
                    "converts; --verbose shows TensorFlow's output")
            if "safe_mode" in why:  # a Lambda layer's code: aiot reads files, never runs them
                why = why.split(". ", 1)[0]
                hint = ("aiot does not run code stored in a model file: make the Lambda a "
                        "registered Layer subclass, or convert the file yourself if you trust it")
            raise ConversionError("tflite", "export", f"{path.name}: TensorFlow could not "
                                  f"convert it: {why}", hint) from None
        parity = _judge(path.name, json.loads(lines[-1]))
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out, artifact)
    write_text_atomic(facts, json.dumps(parity))
    return KerasTflite(artifact, parity, time.monotonic() - started, False)


def _judge(name: str, found: dict) -> dict:
    """The script's comparison as aiot's parity facts; raises where an output differs."""
    worst = 0.0
    for i, output in enumerate(found["outputs"]):
        diff = output["max_abs_diff"]
        if diff is None or not found["compared"]:
            raise ConversionError("tflite", "parity", f"{name}: the .tflite's outputs are not "
                                  "the Keras model's (another count or shape)")
        relative = diff / max(output["scale"], 1.0)
        if relative > TOLERANCE:
            raise ConversionError("tflite", "parity", f"{name}: output {i} of the .tflite "
                                  f"differs from Keras' by {diff:.3g} (scale "
                                  f"{output['scale']:.3g})", "report the model: TFLiteConverter "
                                  "changed what it computes")
        worst = max(worst, diff)
    return {"checked": True, "reference": "keras", "max_abs_diff": worst,
            "tolerance": TOLERANCE, "inputs": found["inputs"], "passed": True}
