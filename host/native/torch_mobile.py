"""PyTorch Mobile's ``speed_benchmark_torch`` (``binaries/speed_benchmark_torch.cc``).

Output (stdout): ``Starting benchmark.``, ``Running warmup runs.``, ``Main runs.``, then
``Main run finished. Microseconds per iter: X. Iters per second: Y`` — the loop's wall time per
iteration, overhead included. With ``--report_pep=true`` each timed iteration also prints
``PyTorchObserver {"type": "NET", "unit": "us", "metric": "latency", "value": "12034"}``; those
become ``samples_ns``. Builds before pytorch/pytorch#37953 (May 2020) labelled ms values "us",
so the labelled unit is cross-checked against the per-iteration line (see ``_pep_unit``).
No thread-count flag exists: PyTorch Mobile sizes its own thread pool.
"""

from __future__ import annotations

import json
import re

from aiot.host.native.base import InputSpec, NativeAdapter, check_dtype, require_inputs
from aiot.host.native.errors import NativeOutputError
from aiot.host.native.record import (
    NUMBER,
    make_record,
    samples_from_ms,
    search,
    stats_from_samples,
    to_ms,
)

_DTYPES = {"float32": "float", "uint8": "uint8_t", "int64": "int64"}
_MAIN = (rf"Main run finished\. (Micro|Milli)seconds per iter: ({NUMBER})\."
         rf" Iters per second: ({NUMBER})")
_PEP = re.compile(r"PyTorchObserver (\{.*\})")


def _pep_latencies(text: str) -> list[tuple[float, str]]:
    """(value, unit) of each NET latency record the observer printed."""
    found = []
    for match in _PEP.finditer(text):
        try:
            entry = json.loads(match.group(1))
        except json.JSONDecodeError:
            continue
        if entry.get("type") == "NET" and entry.get("metric") == "latency":
            found.append((float(entry["value"]), str(entry.get("unit", "us"))))
    return found


def _pep_unit(values: list[float], unit: str, per_iter_ms: float | None) -> tuple[str, str | None]:
    """The unit the observer values are really in, and a note when the label was wrong.

    The per-iteration line includes loop overhead, so it is close to, never a thousandth of, the
    samples' mean; a ~1000x gap means the pre-2020 mislabelling (ms printed as "us").
    """
    if per_iter_ms is None or unit != "us" or not values:
        return unit, None
    ratio = per_iter_ms / to_ms(sum(values) / len(values), unit)
    if 300 < ratio < 3000:
        return "ms", "observer values are labelled 'us' but are milliseconds (pre-2020 build)"
    return unit, None


class SpeedBenchmarkTorchAdapter(NativeAdapter):
    """``speed_benchmark_torch --model --input_dims --input_type --warmup --iter --report_pep``."""

    tool = "speed_benchmark_torch"
    formats = frozenset({"ptl"})
    delegates = frozenset({"vulkan"})
    supports_threads = False

    def arguments(self, binary, artifact, *, threads, warmup, runs, delegate, extra, inputs,
                  companions):
        require_inputs(self.tool, inputs, extra, ("--use_bundled_input", "--no_inputs"))
        argv = [binary, f"--model={artifact}"]
        if inputs:
            argv += [f"--input_dims={';'.join(spec.dims() for spec in inputs)}",
                     f"--input_type={';'.join(self._dtype(spec) for spec in inputs)}"]
        argv += [f"--warmup={warmup}", f"--iter={runs}", "--report_pep=true"]
        if delegate == "vulkan":
            argv.append("--vulkan=true")
        return argv + extra

    def _dtype(self, spec: InputSpec) -> str:
        return check_dtype(self.tool, spec, _DTYPES)

    def parse(self, text: str, *, warmup_iterations: int = 0) -> dict:
        main = search(_MAIN, text)
        per_iter_ms = None
        if main:
            per_iter_ms = float(main.group(2)) / (1e3 if main.group(1) == "Micro" else 1.0)
        latencies = _pep_latencies(text)
        if per_iter_ms is None and not latencies:
            raise NativeOutputError(self.tool, "no 'Main run finished' line and no "
                                    "PyTorchObserver latencies", text)
        native = {"raw_summary": main.group(0) if main else None,
                  "per_iter_ms_with_overhead": per_iter_ms,
                  "iters_per_second": float(main.group(3)) if main else None}
        if not latencies:
            return make_record(self.backend, stats_ms={"mean": per_iter_ms}, native=native)
        values = [value for value, _ in latencies]
        unit, note = _pep_unit(values, latencies[0][1], per_iter_ms)
        samples = samples_from_ms([to_ms(v, unit) for v in values])
        native["pep_unit_note"] = note
        return make_record(self.backend, stats_ms=stats_from_samples(samples),
                           samples_ns=samples, native=native)
