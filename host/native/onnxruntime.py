"""ONNX Runtime's ``onnxruntime_perf_test`` (``onnxruntime/test/perftest``).

Units differ per line, and the spelling changed over releases:

* session creation and totals in **seconds**: ``Session creation time cost: 0.217932 s``
  (early 2020 builds: no space after the colon);
* ``First inference time cost: 196 ms`` (the tool's single warm-up run; newer builds);
* the mean in **milliseconds**: ``Average inference time cost total: 98.961997 ms`` (2025 on),
  ``Average inference time cost: 125.017 ms`` (2020–2024), ``Average time cost:58.8053 ms``
  (2019);
* percentiles in **seconds**: ``P50 Latency: 0.0995086 s`` (2019: ``P50 Latency is
  0.0587108sec``), printed with ``-s``;
* ``Total inference requests: 5`` (2019: ``Total iterations:1000``), ``Runs:5``.

The tool always runs exactly one warm-up inference and prints no version. ``-I`` makes it
generate inputs, so a bare ``model.onnx`` works without ``test_data_set_*`` folders (ORT ≥ 1.10).
"""

from __future__ import annotations

from aiot.core.errors import UsageError
from aiot.host.native.base import NativeAdapter
from aiot.host.native.errors import NativeOutputError
from aiot.host.native.record import NUMBER, make_record, number, search, to_ms

_MEAN = rf"Average (?:inference )?time cost(?: total)?: ?({NUMBER}) ?ms"
_PERCENTILES = {"min": "Min", "max": "Max", "median": "P50", "p90": "P90", "p95": "P95",
                "p99": "P99", "p999": "P999"}
_PROVIDERS = {"nnapi": "nnapi", "xnnpack": "xnnpack", "qnn": "qnn"}


def _latency_ms(label: str, text: str) -> float | None:
    found = search(rf"^{label} Latency(?::| is) ?({NUMBER}) ?(s|sec)$", text)
    return to_ms(found.group(1), found.group(2)) if found else None


def _count(text: str) -> int | None:
    value = number(r"Total inference requests: ?(\d+)", text)
    if value is None:
        value = number(r"^(?:Total iterations|Runs): ?(\d+)", text)
    return int(value) if value is not None else None


class PerfTestAdapter(NativeAdapter):
    """``onnxruntime_perf_test -m times -r <runs> -e <ep> [-x <threads>] -s -I <model>``."""

    tool = "onnxruntime_perf_test"
    formats = frozenset({"onnx", "ort"})
    delegates = frozenset(_PROVIDERS)

    def check(self, *, threads, warmup, runs, delegate) -> None:
        super().check(threads=threads, warmup=warmup, runs=runs, delegate=delegate)
        if warmup > 1:
            raise UsageError("onnxruntime_perf_test always runs exactly one warm-up inference",
                             "use warmup 0 or 1")

    def arguments(self, binary, artifact, *, threads, warmup, runs, delegate, extra, inputs,
                  companions):
        argv = [binary, "-m", "times", "-r", str(runs), "-e", _PROVIDERS.get(delegate, "cpu")]
        if threads is not None:
            argv += ["-x", str(threads)]
        # Options first: the model path is the one positional argument (getopt).
        return argv + ["-s", "-I", *extra, artifact]

    def parse(self, text: str, *, warmup_iterations: int = 0) -> dict:
        mean = number(_MEAN, text)
        if mean is None:
            raise NativeOutputError(self.tool, "no 'Average inference time cost' line", text)
        stats = {"count": _count(text), "mean": mean}
        stats.update({key: _latency_ms(label, text) for key, label in _PERCENTILES.items()})
        session_s = number(rf"Session creation time cost: ?({NUMBER}) ?s", text)
        first_ms = number(rf"First inference time cost: ?({NUMBER}) ?ms", text)
        threads = number(r"Setting intra_op_num_threads to (\d+)", text)
        return make_record(
            self.backend, stats_ms=stats,
            threads=int(threads) if threads else None,  # 0 means "ORT picks": unknown
            load_ms=session_s * 1e3 if session_s is not None else None,
            first_inference_ms=first_ms,
            warmup={"count": 1, "mean_ms": first_ms} if first_ms is not None else None,
            native={
                "raw_summary": search(_MEAN, text).group(0),
                "total_inference_s": number(rf"Total (?:inference )?time cost: ?({NUMBER})", text),
                "inferences_per_second": number(
                    rf"Number of inferences per second: ?({NUMBER})", text),
                "avg_cpu_usage_percent": number(r"Avg CPU usage: ?(\d+)", text),
                "peak_working_set_bytes": number(r"Peak working set size: ?(\d+)", text),
            },
        )
