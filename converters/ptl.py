"""PyTorch Mobile (``.ptl``): a traced TorchScript module saved for the lite interpreter.

``optimize_for_mobile`` (conv/BN folding, XNNPACK prepacking) needs a torch built with
XNNPACK; with ``optimize=auto`` it is used where the installed torch has it and skipped,
with the fact recorded in the sidecar, where it does not. The input shape travels inside
the artifact (``extra/aiot_input.json``), because a lite-interpreter module does not say
what it takes and the agent must feed it without the host.
"""

from __future__ import annotations

import json
import logging
import warnings
from importlib.metadata import version
from pathlib import Path

from aiot.converters.base import CONVERTERS, Availability, modules_available
from aiot.host.errors import ConversionError, UsageError
from aiot.host.fileio import write_atomic

log = logging.getLogger(__name__)

INPUT_FILE = "aiot_input.json"  # read back by the agent's pytorch_mobile backend
CHOICES = ("auto", "yes", "no")


class PtlConverter:
    """torch.jit.trace → (optimize_for_mobile) → _save_for_lite_interpreter."""

    name = "ptl"
    extension = ".ptl"
    backend = "pytorch_mobile"
    description = "PyTorch Mobile lite-interpreter module, run by PyTorch's lite interpreter"
    atol = 1e-4
    options = {"optimize": ("auto", "optimize_for_mobile: auto (if this torch has XNNPACK), yes or no")}

    def availability(self) -> Availability:
        return modules_available({"torch": "torch"}, "all")

    def toolchain_versions(self) -> dict[str, str]:
        return {"torch": version("torch")}

    def export(self, model, example, out_path: Path, options: dict[str, str]) -> dict:
        import torch
        from torch.jit.mobile import _export_operator_list, _load_for_lite_interpreter

        choice = options["optimize"]
        if choice not in CHOICES:
            raise UsageError(f"optimize must be one of {', '.join(CHOICES)}, got '{choice}'",
                             "e.g. --opt optimize=auto")
        with torch.no_grad():
            traced = torch.jit.trace(model.eval(), example)
        traced, optimized = _maybe_optimize(traced, choice)
        meta = {"shape": list(example.shape), "dtype": "float32"}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # "Lite Interpreter is deprecated"
            # To a buffer, then written by Python: torch's file writer aborts the process
            # (SIGABRT) when the disk is full, leaving its temporary file behind.
            data = traced._save_to_buffer_for_lite_interpreter(
                _extra_files={INPUT_FILE: json.dumps(meta)})
            write_atomic(out_path, lambda tmp: tmp.write_bytes(data))
            ops = sorted(_export_operator_list(_load_for_lite_interpreter(str(out_path))))
        return {"ops": ops, "optimize_for_mobile": optimized}


def _maybe_optimize(traced, choice: str):
    """``(module, whether optimize_for_mobile ran)``; ``auto`` tolerates a torch without XNNPACK."""
    if choice == "no":
        return traced, False
    from torch.utils.mobile_optimizer import optimize_for_mobile

    try:
        return optimize_for_mobile(traced), True
    except RuntimeError as exc:
        if "XNNPACK" not in str(exc):
            raise
        if choice == "yes":
            raise ConversionError("ptl", "optimize", "this torch is built without XNNPACK, which "
                                  "optimize_for_mobile needs", "use --opt optimize=auto or no") from None
        log.info("optimize_for_mobile skipped: this torch has no XNNPACK")
        return traced, False


CONVERTERS.add("ptl", PtlConverter())
