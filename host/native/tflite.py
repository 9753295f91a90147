"""TFLite's ``benchmark_model`` (``tensorflow/lite/tools/benchmark``), any vintage.

Output (stderr, through TFLITE_LOG), all times in microseconds unless said otherwise:

* parameter echo ``Num threads: [4]`` (older builds echo every parameter, newer only set ones);
* ``Initialized session in 0.855ms.`` (milliseconds; 2019 builds omit the final dot);
* per phase, ``Running benchmark for at least N iterations ...`` then a stat line
  ``count=50 first=.. curr=.. min=.. max=.. avg=.. std=..`` (``count=N curr=X(all same)`` when
  every run took the same time); the first phase is the warm-up, the second the measurement;
  ``std`` is the *population* standard deviation truncated to an integer (``tsl::Stat``);
* the summary, ``Inference timings in us: Init: .., First inference: .., Warmup (avg): ..,
  Inference (avg): ..`` — 2019 builds print ``Average inference timings in us: Warmup: ..,
  Init: .., no stats: ..`` where ``no stats`` is the inference average;
* memory: ``Peak memory footprint (MB): init=.. overall=..`` (2020) or ``Memory footprint delta
  from the start of the tool (MB): init=.. overall=..`` (2021 on).

No build prints its TensorFlow version, so ``runtime_version`` stays None. What the delegates
took is read from their lines (:mod:`aiot.host.native.delegation`) into ``placement``.
"""

from __future__ import annotations

import re

from aiot.device_agent.backends.tflite_io import operator_codes
from aiot.host.native.base import NativeAdapter
from aiot.host.native.delegation import delegations, native_placement
from aiot.host.native.errors import NativeOutputError
from aiot.host.native.op_profile import parse_op_profile
from aiot.host.native.record import NUMBER, make_record, number, search

_STAT = re.compile(
    rf"count=(?P<count>\d+)(?: first=(?P<first>{NUMBER}) curr=(?P<curr>{NUMBER})"
    rf" min=(?P<min>{NUMBER}) max=(?P<max>{NUMBER}) avg=(?P<avg>{NUMBER})"
    rf" std=(?P<std>{NUMBER})| curr=(?P<same>{NUMBER})(?:\(all same\))?)?"
)
_PHASE = "Running benchmark for at least"
# Profiling summaries reuse the stat format; they are not the run's timings.
_NOT_RUN_STATS = ("Timings (microseconds)", "Memory (bytes)")
_PARAM = re.compile(r"^(?:.*\] )?([#A-Za-z][^:\[\]]*?) ?: \[(.*)\]\s*$", re.MULTILINE)
_DELEGATES = {"xnnpack": "--use_xnnpack=true", "nnapi": "--use_nnapi=true",
              "gpu": "--use_gpu=true"}


def _stat(match: re.Match) -> dict:
    """A stat line as microsecond numbers; an all-same line has min = max = avg = curr."""
    stat = {"count": int(match["count"])}
    if match["avg"] is not None:
        stat.update({k: float(match[k]) for k in ("first", "curr", "min", "max", "avg", "std")})
    elif match["same"] is not None:
        value = float(match["same"])
        stat.update(first=value, curr=value, min=value, max=value, avg=value, std=0.0)
    return stat


def phase_stats(text: str) -> list[dict]:
    """The stat line of each ``Running benchmark`` phase, in order (warm-up, measurement)."""
    phases: list[dict] = []
    waiting = False
    for line in text.splitlines():
        if _PHASE in line:
            waiting = True
            continue
        found = _STAT.search(line)
        if waiting and found and not any(tag in line for tag in _NOT_RUN_STATS):
            phases.append(_stat(found))
            waiting = False
    return phases


def summary_timings(text: str) -> dict:
    """The ``Inference timings in us`` fields (both spellings), in microseconds."""
    found = search(r"(?:Average )?[Ii]nference timings in us: (.*)$", text)
    if not found:
        return {}
    fields = {}
    for part in found.group(1).split(","):
        key, _, value = part.partition(":")
        if re.fullmatch(NUMBER, value.strip() or "x"):
            fields[key.strip()] = float(value)
    return fields


def params(text: str) -> dict[str, str]:
    """The ``Name: [value]`` parameter echo lines."""
    return {m.group(1).strip(): m.group(2) for m in _PARAM.finditer(text)}


def _memory(text: str) -> dict:
    memory = {}
    for kind, label in (("delta", r"Memory footprint delta from the start of the tool"),
                        ("peak", r"Peak memory footprint")):
        found = search(rf"{label} \(MB\): init=({NUMBER}) overall=({NUMBER})", text)
        if found:
            memory = {"kind": kind, "init": float(found.group(1)),
                      "overall": float(found.group(2))}
    peak = number(rf"Overall peak memory footprint \(MB\) via periodic monitoring: ({NUMBER})",
                  text)
    if peak is not None:
        memory["peak_monitored"] = peak
    return memory


def _threads(echo: dict[str, str]) -> int | None:
    for key in ("#threads used for CPU inference", "Num threads"):
        value = echo.get(key, "")
        if value.lstrip("-").isdigit() and int(value) > 0:
            return int(value)
    return None


class BenchmarkModelAdapter(NativeAdapter):
    """TFLite ``benchmark_model``: flags ``--graph --num_threads --warmup_runs --num_runs``.

    ``--num_runs`` and ``--warmup_runs`` are minimums: the tool also runs for at least
    ``--min_secs`` (1 s) and ``--warmup_min_secs`` (0.5 s); pass ``--min_secs=0`` in ``extra``
    for exact counts. The record's ``stats_ms.count`` says how many ran.
    """

    tool = "benchmark_model"
    source = ("TensorFlow's own: its prebuilt android_aarch64_benchmark_model, or built from "
              "tensorflow/tensorflow with Bazel (//tensorflow/lite/tools/benchmark:benchmark_model, "
              "--config=android_arm64)")
    formats = frozenset({"tflite"})
    delegates = frozenset(_DELEGATES)
    profile_flags = ("--enable_op_profiling=true",)

    def parse_profile(self, text: str) -> dict | None:
        return parse_op_profile(text)

    def arguments(self, binary, artifact, *, threads, warmup, runs, delegate, extra, inputs,
                  companions):
        argv = [binary, f"--graph={artifact}", f"--warmup_runs={warmup}", f"--num_runs={runs}"]
        if threads is not None:
            argv.append(f"--num_threads={threads}")
        if delegate is not None:
            argv.append(_DELEGATES[delegate])
        return argv + extra

    def parse(self, text: str, *, warmup_iterations: int = 0) -> dict:
        if "Benchmarking failed" in text:
            raise NativeOutputError(self.tool, "the tool reported 'Benchmarking failed'", text)
        phases = phase_stats(text)
        summary = summary_timings(text)
        warm = phases[0] if phases else None
        main = phases[1] if len(phases) > 1 else None
        mean_us = (main or {}).get("avg", summary.get("Inference (avg)", summary.get("no stats")))
        if mean_us is None:
            raise NativeOutputError(self.tool, "no measurement stat line and no 'Inference "
                                    "timings in us' summary (truncated output?)", text)
        record = make_record(
            self.backend,
            stats_ms=_stats_ms(main, mean_us),
            threads=_threads(params(text)),
            load_ms=_load_ms(text, summary),
            first_inference_ms=_first_ms(summary, warm),
            warmup=_warmup(warm, summary),
            native=self._native(text, summary, warm, main),
        )
        placement = native_placement(record["native"]["delegations"])
        if placement is not None:
            record["placement"] = placement
        return record

    def placement(self, record: dict, artifact, delegate: str | None) -> dict | None:
        """The requested delegate's line (the first applied without ``--delegate``), counted
        against the artifact's own operators where the line leaves them out."""
        lines = (record.get("native") or {}).get("delegations") or []
        return native_placement(lines, delegate, total=_operators(artifact))

    def _native(self, text: str, summary: dict, warm: dict | None, main: dict | None) -> dict:
        delegate_lines = [line.strip() for line in text.splitlines()
                          if "delegate" in line.lower() and ": [" not in line]
        return {
            "raw_summary": summary or None,
            "params": params(text),
            "warmup_stat_us": warm,
            "measure_stat_us": main,
            "std": "population standard deviation, truncated to whole microseconds",
            "memory_mb": _memory(text) or None,
            "model_size_mb": number(rf"The input model file size \(MB\): ({NUMBER})", text),
            "delegate_messages": delegate_lines,
            "delegations": delegations(text),
        }


def _operators(artifact) -> int | None:
    """How many operators the first subgraph of the ``.tflite`` the tool ran has (None for a
    file aiot cannot read)."""
    try:
        with open(artifact, "rb") as fh:
            return len(operator_codes(fh.read()))
    except (OSError, ValueError, TypeError):
        return None


def _stats_ms(main: dict | None, mean_us: float) -> dict:
    if main is None or "avg" not in main:
        return {"mean": mean_us / 1e3, "count": (main or {}).get("count")}
    return {"count": main["count"], "mean": main["avg"] / 1e3, "min": main["min"] / 1e3,
            "max": main["max"] / 1e3, "std": main["std"] / 1e3}


def _load_ms(text: str, summary: dict) -> float | None:
    if "Init" in summary:
        return summary["Init"] / 1e3
    return number(rf"Initialized session in ({NUMBER}) ?ms", text)


def _first_ms(summary: dict, warm: dict | None) -> float | None:
    # The tool defines "First inference" as the first warm-up run; old builds print only the
    # warm-up stat line, whose first= is that same run.
    if "First inference" in summary:
        return summary["First inference"] / 1e3
    return warm["first"] / 1e3 if warm and "first" in warm else None


def _warmup(warm: dict | None, summary: dict) -> dict | None:
    mean_us = (warm or {}).get("avg", summary.get("Warmup (avg)", summary.get("Warmup")))
    if warm is None and mean_us is None:
        return None
    return {"count": (warm or {}).get("count"),
            "mean_ms": mean_us / 1e3 if mean_us is not None else None}
