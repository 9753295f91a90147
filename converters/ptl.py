"""PyTorch Mobile (``.ptl``): a traced TorchScript module saved for the lite interpreter.

The lite interpreter runs the saved graph as it is, so everything that makes it fast is done
here, as PyTorch Mobile's performance recipe does:

* channels-last: 4-D inputs and the convolution weights are made NHWC, the layout XNNPACK and
  oneDNN convolve in, so no layout conversion runs around each convolution;
* ``optimize_for_mobile``: freezes the module, folds BatchNorm into convolutions and replaces
  conv/linear (+ ReLU/hardtanh) by XNNPACK's prepacked ops (``prepacked::conv2d_clamp_run``).
  It needs a torch built with XNNPACK; the torch 2.13 CPU wheels are not (pytorch/pytorch
  #189532), and there the module is instead frozen with ``torch.jit.freeze`` (BatchNorm and
  constants folded) and runs aten's convolutions. The sidecar records which, and why.

The input shape travels inside the artifact (``extra/aiot_input.json``), because a
lite-interpreter module does not say what it takes and the agent must feed it without the host.
"""

from __future__ import annotations

import copy
import json
import logging
import warnings
from importlib.metadata import version
from pathlib import Path

from aiot.converters.base import Availability, Converter, modules_available
from aiot.converters.inputs import as_args, input_names
from aiot.core.errors import ConversionError, UsageError, first_line
from aiot.core.fileio import write_atomic

log = logging.getLogger(__name__)

INPUT_FILE = "aiot_input.json"  # read back by the agent's pytorch_mobile backend
CHOICES = ("auto", "yes", "no")
LAYOUTS = ("auto", "channels_last", "contiguous")
NO_XNNPACK = ("this torch is built without XNNPACK (torch 2.13 CPU wheels), which optimize_for_mobile "
              "needs: frozen with conv-BN folded instead, aten convolutions without XNNPACK prepacking")
#: Shown by ``aiot convert --list``.
LIMITS = ("XNNPACK-prepacked conv/linear (optimize_for_mobile) only with a torch built with XNNPACK; the "
          "torch 2.13 CPU wheels are not, so a .ptl made there is frozen and channels-last but runs "
          "aten's convolutions (the sidecar says which)")


class PtlConverter(Converter):
    """torch.jit.trace (channels-last) → optimize_for_mobile or freeze → _save_for_lite_interpreter."""

    name = "ptl"
    extension = ".ptl"
    backend = "pytorch_mobile"
    description = "PyTorch Mobile lite-interpreter module, run by PyTorch's lite interpreter"
    limits = LIMITS
    atol = 1e-4
    several_inputs = True
    options = {
        "optimize": ("auto", "optimize_for_mobile: auto (if this torch has XNNPACK, else freeze), yes or no"),
        "layout": ("auto", "auto (channels_last for 4-D inputs), channels_last or contiguous"),
    }

    def availability(self) -> Availability:
        return modules_available({"torch": "torch"}, "all")

    def toolchain_versions(self) -> dict[str, str]:
        return {"torch": version("torch")}

    def check_options(self, options: dict[str, str]) -> None:
        """Refuse unknown choices before any work."""
        if options["optimize"] not in CHOICES:
            raise UsageError(f"optimize must be one of {', '.join(CHOICES)}, got '{options['optimize']}'",
                             "e.g. --opt optimize=auto")
        if options["layout"] not in LAYOUTS:
            raise UsageError(f"layout must be one of {', '.join(LAYOUTS)}, got '{options['layout']}'",
                             "e.g. --opt layout=channels_last")

    def export(self, model, example, out_path: Path, options: dict[str, str]) -> dict:
        import torch
        from torch.jit.mobile import _export_operator_list, _load_for_lite_interpreter

        self.check_options(options)
        layout = options["layout"]
        args = as_args(example)
        image = len(args) == 1 and args[0].dim() == 4 and args[0].dtype.is_floating_point
        if layout == "auto":
            layout = "channels_last" if image else "contiguous"
        if layout == "channels_last" and not image:
            raise UsageError("layout channels_last needs one 4-D float input, this model takes "
                             + ", ".join(f"{t.dim()}-D {str(t.dtype).removeprefix('torch.')}"
                                         for t in args), "use --opt layout=contiguous")
        model = model.eval()
        names = input_names(model, len(args))
        if layout == "channels_last":
            model = channels_last(model)
        with torch.no_grad():
            traced = torch.jit.trace(model, args)
        module, how = _optimize(traced, options["optimize"])
        meta = _input_meta(names, args)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # "Lite Interpreter is deprecated"
            # To a buffer, then written by Python: torch's file writer aborts the process
            # (SIGABRT) when the disk is full, leaving its temporary file behind.
            data = module._save_to_buffer_for_lite_interpreter(
                _extra_files={INPUT_FILE: json.dumps(meta)})
            write_atomic(out_path, lambda tmp: tmp.write_bytes(data))
            ops = sorted(_export_operator_list(_load_for_lite_interpreter(str(out_path))))
        return {"ops": ops, "layout": layout, **how,
                "xnnpack_prepacked": sorted(op for op in ops if op.startswith("prepacked::"))}


def _input_meta(names: list[str], args) -> dict:
    """What ``aiot_input.json`` says of the inputs: one input's shape, dtype and name (the
    fields older agents read first), or each of several."""
    def dtype(tensor) -> str:
        return str(tensor.dtype).removeprefix("torch.")

    if len(args) == 1:
        return {"shape": list(args[0].shape), "dtype": dtype(args[0]), "name": names[0]}
    return {"inputs": [{"name": name, "shape": list(t.shape), "dtype": dtype(t)}
                       for name, t in zip(names, args)]}


def channels_last(model):
    """A copy of ``model`` with channels-last weights that makes its input channels-last once,
    at its entry (torch is imported lazily, so the class is made here)."""
    import torch

    class ChannelsLast(torch.nn.Module):
        def __init__(self, inner) -> None:
            super().__init__()
            self.model = inner

        def forward(self, x):
            return self.model(x.contiguous(memory_format=torch.channels_last))

    return ChannelsLast(copy.deepcopy(model).to(memory_format=torch.channels_last)).eval()


def _optimize(traced, choice: str) -> tuple[object, dict]:
    """The module to save and what was done to it (``optimize_for_mobile``, ``frozen``, and the
    reason optimize_for_mobile did not run, if it did not)."""
    import torch

    if choice == "no":
        return traced, {"optimize_for_mobile": False, "frozen": False, "why_not_optimized": "--opt optimize=no"}
    module, optimized = _maybe_optimize(traced, choice)
    if optimized:
        return module, {"optimize_for_mobile": True, "frozen": True}
    try:
        return torch.jit.freeze(traced), {"optimize_for_mobile": False, "frozen": True,
                                          "why_not_optimized": NO_XNNPACK}
    except RuntimeError as exc:  # a module freezing cannot handle: saved as traced
        reason = first_line(exc, 200)
        log.info("torch.jit.freeze failed (%s): saved unfrozen", reason)
        return traced, {"optimize_for_mobile": False, "frozen": False,
                        "why_not_optimized": f"{NO_XNNPACK}; freeze failed: {reason}"}


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
