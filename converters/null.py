"""Null (``.null.json``): a TEST format for benchmarking aiot itself, not a model.

The artifact only describes a fake model (input shape, output size, ``sleep_ms``) for the
agent's null backend, which sleeps that long per inference. Campaigns over many emulated
devices can then run without the host's CPUs being the bottleneck. Its numbers measure aiot,
never a network; there is no parity check, since there is nothing to compare with PyTorch.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import aiot
from aiot.converters.base import Availability, Converter
from aiot.core.errors import UsageError
from aiot.core.fileio import write_atomic

FORMAT = "aiot-null"  # the agent's null backend checks this marker


class NullConverter(Converter):
    """Writes the JSON the null backend loads; no toolchain, always available."""

    name = "null"
    extension = ".json"
    backend = "null"
    description = "TEST backend for benchmarking aiot itself: sleeps sleep_ms per inference"
    atol = 0.0  # unused: parity_check is False
    options = {"sleep_ms": ("5", "milliseconds each inference sleeps (>= 0)")}
    parity_check = False
    uses_spec = True
    internal = True  # aiot's own test format: named by -f null only, never listed or in "all"

    def availability(self) -> Availability:
        return Availability(True)

    def toolchain_versions(self) -> dict[str, str]:
        return {"aiot": aiot.__version__}

    def check_options(self, options: dict[str, str]) -> None:
        _sleep_ms(options["sleep_ms"])

    def export(self, model, example, out_path: Path, options: dict[str, str], spec=None) -> dict:
        doc = {"format": FORMAT, "sleep_ms": _sleep_ms(options["sleep_ms"]),
               "input_shape": [int(d) for d in example.shape],
               "outputs": int(spec.num_classes) if spec is not None else 1}
        write_atomic(out_path, lambda tmp: tmp.write_text(json.dumps(doc, indent=2) + "\n",
                                                          encoding="utf-8"))
        return {"sleep_ms": doc["sleep_ms"]}


def _sleep_ms(value: str) -> float:
    try:
        sleep = float(value)
    except ValueError:
        sleep = -1.0
    if not 0 <= sleep < math.inf:
        raise UsageError(f"sleep_ms must be a non-negative number of milliseconds, got '{value}'",
                         "e.g. --opt sleep_ms=5")
    return sleep
