"""ExecuTorch (``.pte``): ``torch.export`` here, XNNPACK lowering in the ``executorch`` toolchain.

ExecuTorch requires NumPy 2 and brings a large dependency set (coremltools, pandas, …), so
it lives in its own toolchain environment with the same torch as aiot's; the exported
program crosses over as a ``.pt2`` file. With ``delegate=xnnpack`` (the default) the whole
graph should land in XNNPACK partitions; operators left outside run on ExecuTorch's
portable kernels, which are ~100x slower, so they are listed in the sidecar.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path

from aiot.converters.base import (
    Availability,
    Converter,
    toolchain_available,
    toolchain_versions,
)
from aiot.converters.inputs import as_args
from aiot.core import toolchains
from aiot.core.errors import UsageError
from aiot.core.fileio import write_atomic

log = logging.getLogger(__name__)

TOOLCHAIN = "executorch"
DELEGATES = ("xnnpack", "portable")
#: Lowers the exported program to a ``.pte``, inside the ``executorch`` toolchain.
LOWER_SCRIPT = Path(__file__).with_name("lower.py")


class ExecutorchConverter(Converter):
    """torch.export → to_edge_transform_and_lower(XnnpackPartitioner) → .pte."""

    name = "executorch"
    extension = ".pte"
    backend = "executorch"
    description = "ExecuTorch program lowered to XNNPACK, run by the ExecuTorch runtime"
    atol = 1e-4
    several_inputs = True
    keeps_input_names = False  # a .pte's inputs are positional: input_0, input_1, …
    options = {"delegate": ("xnnpack", "xnnpack (lower to XNNPACK) or portable (no delegate)")}

    def availability(self) -> Availability:
        return toolchain_available(TOOLCHAIN)

    def toolchain_versions(self) -> dict[str, str]:
        return toolchain_versions(TOOLCHAIN)

    def check_options(self, options: dict[str, str]) -> None:
        """Refuse an unknown delegate before any work."""
        if options["delegate"] not in DELEGATES:
            raise UsageError(f"executorch delegate must be one of {', '.join(DELEGATES)}, "
                             f"got '{options['delegate']}'", "e.g. --opt delegate=xnnpack")

    def export(self, model, example, out_path: Path, options: dict[str, str]) -> dict:
        import torch

        if getattr(model, "quantized_with", None) is not None and options["delegate"] != "xnnpack":
            raise UsageError("an int8 model runs in ExecuTorch through XNNPACK's QS8 kernels; the "
                             "portable kernels have no quantized operators", "drop --opt delegate=portable")

        with tempfile.TemporaryDirectory(prefix="aiot-et-") as tmp:
            program = Path(tmp) / "program.pt2"
            with torch.no_grad():
                torch.export.save(torch.export.export(model.eval(), as_args(example)), program)
            report: dict = {}

            def lower(dst: Path) -> None:
                stdout = toolchains.run_script(TOOLCHAIN, LOWER_SCRIPT,
                                               [str(program), str(dst), options["delegate"]])
                report.update(json.loads(stdout.strip().splitlines()[-1]))

            write_atomic(out_path, lower)
        ops = report.get("ops", {})
        delegated = ops.get("executorch_call_delegate", 0)
        portable = sorted(op for op in ops if op != "executorch_call_delegate")
        if options["delegate"] == "xnnpack" and portable:
            log.warning("%s: %d operator kinds stay on portable kernels: %s", out_path.name,
                        len(portable), ", ".join(portable))
        return {"ops": sorted(ops), "xnnpack_partitions": delegated, "portable_ops": portable,
                "delegated_convs": report.get("delegated_convs")}
