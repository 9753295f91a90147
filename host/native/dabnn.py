"""daBNN's ``benchmark_single_model`` (``benchmark/benchmark_single_model.cpp``).

A Google Benchmark binary: the model path must be ``argv[1]`` (the program reads it before
Google Benchmark parses its flags). Its pinned Google Benchmark (``f0901417``, v1.4.1+36, 2018)
chooses the iteration count itself to fill ``--benchmark_min_time`` (0.5 s), has no warm-up
flag (its sizing runs warm up) and reports each repetition's per-iteration *average*, never
single iterations, so there are no ``samples_ns``. ``runs`` maps to
``--benchmark_repetitions``. daBNN has no threading at all: threads must be 1 or unset.

Output: ``--benchmark_format=json`` (what the adapter asks for) gives ``benchmarks[]`` entries
with ``real_time``/``cpu_time`` in ``time_unit`` (ns, us, ms or s) and, with repetitions,
``<name>_mean``/``_median``/``_stddev`` aggregates (newer versions: ``aggregate_name``). The
console table (``name  61920154 ns  61339185 ns  10``) is read as well, also when it carries
the terminal colour codes that this Google Benchmark writes even into a pipe or a file.
"""

from __future__ import annotations

import json
import re

from aiot.core.errors import UsageError
from aiot.host.native.base import NativeAdapter
from aiot.host.native.errors import NativeOutputError
from aiot.host.native.record import NUMBER, make_record, to_ms

BENCHMARK_NAME = "single_model"
_ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
_ROW = re.compile(rf"^(\S+)\s+({NUMBER}) (ns|us|ms|s)\s+({NUMBER}) (ns|us|ms|s)\s+(\d+)\b",
                  re.MULTILINE)


def _json_document(text: str) -> dict | None:
    """The Google Benchmark JSON document in ``text`` (other log lines may surround it)."""
    decoder = json.JSONDecoder()
    for start in (m.start() for m in re.finditer(r"^\{", text, re.MULTILINE)):
        try:
            doc, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("benchmarks"), list):
            return doc
    return None


def _entries_from_json(doc: dict) -> list[dict]:
    """Every entry as {name, aggregate, real_ms, cpu_ms, iterations, error}."""
    entries = []
    for bench in doc["benchmarks"]:
        name = str(bench.get("run_name") or bench.get("name", ""))
        aggregate = bench.get("aggregate_name")
        if bench.get("run_type") == "aggregate" and not aggregate:
            name, _, aggregate = name.rpartition("_")  # v1.4: "<name>_mean"
        unit = bench.get("time_unit", "ns")
        timed = "real_time" in bench and unit in ("ns", "us", "ms", "s")
        entries.append({
            "name": name, "aggregate": aggregate or None,
            "real_ms": to_ms(bench["real_time"], unit) if timed else None,
            "cpu_ms": to_ms(bench["cpu_time"], unit) if timed and "cpu_time" in bench else None,
            "iterations": bench.get("iterations"),
            "error": bench.get("error_message") if bench.get("error_occurred") else None,
            "raw": bench,
        })
    return entries


def _entries_from_table(text: str) -> list[dict]:
    """Console rows; ``<name>_mean``/``_median``/``_stddev`` next to ``<name>`` are aggregates."""
    rows = [{"name": m.group(1), "aggregate": None, "real_ms": to_ms(m.group(2), m.group(3)),
             "cpu_ms": to_ms(m.group(4), m.group(5)), "iterations": int(m.group(6)),
             "error": None, "raw": m.group(0)} for m in _ROW.finditer(text)]
    names = {row["name"] for row in rows}
    for row in rows:
        base, _, suffix = row["name"].rpartition("_")
        if suffix in ("mean", "median", "stddev", "cv") and base in names:
            row["name"], row["aggregate"] = base, suffix
    return rows


def _pick(entries: list[dict], name: str | None, text: str) -> str:
    names = list(dict.fromkeys(e["name"] for e in entries if e["aggregate"] is None))
    if name is None:
        name = BENCHMARK_NAME if BENCHMARK_NAME in names or len(names) != 1 else names[0]
    if name not in names:
        raise NativeOutputError("benchmark_single_model", f"no benchmark named '{name}' "
                                f"(found: {', '.join(names) or 'none'})", text)
    return name


def parse_google_benchmark(text: str, name: str | None = None) -> dict:
    """The per-iteration timing of benchmark ``name`` from Google Benchmark output.

    Args:
        name: which benchmark; default ``single_model``, or the only one printed.

    Returns:
        {"name", "mean_ms", "cpu_mean_ms", "iterations", "repetitions", "aggregates", "context",
        "raw_summary"} with times in milliseconds; ``aggregates`` holds Google Benchmark's own
        mean, median and stddev *across repetitions* (each repetition is an average of many
        iterations).

    Raises:
        NativeOutputError: no parsable result, or the benchmark reported an error.
    """
    doc = _json_document(text)
    entries = _entries_from_json(doc) if doc else _entries_from_table(_ANSI_COLOUR.sub("", text))
    if not entries:
        raise NativeOutputError("benchmark_single_model",
                                "no Google Benchmark JSON document and no result table", text)
    name = _pick(entries, name, text)
    reps = [e for e in entries if e["name"] == name and e["aggregate"] is None]
    failed = [e["error"] for e in reps if e["error"]]
    timed = [e for e in reps if e["real_ms"] is not None and e["iterations"]]
    if failed or not timed:
        raise NativeOutputError("benchmark_single_model",
                                f"benchmark '{name}' failed: {failed[0] if failed else 'no time'}",
                                text)
    iterations = sum(e["iterations"] for e in timed)
    return {
        "name": name,
        # Iteration-weighted, so it is the mean over every timed iteration.
        "mean_ms": sum(e["real_ms"] * e["iterations"] for e in timed) / iterations,
        "cpu_mean_ms": sum(e["cpu_ms"] * e["iterations"] for e in timed) / iterations,
        "iterations": iterations,
        "repetitions": [{k: e[k] for k in ("real_ms", "cpu_ms", "iterations")} for e in timed],
        "aggregates": {e["aggregate"]: e["real_ms"] for e in entries
                       if e["name"] == name and e["aggregate"]},
        "context": (doc or {}).get("context"),
        "raw_summary": [e["raw"] for e in entries if e["name"] == name],
    }


class BenchmarkSingleModelAdapter(NativeAdapter):
    """``benchmark_single_model <model.dab> --benchmark_format=json
    --benchmark_repetitions=<runs>``."""

    tool = "benchmark_single_model"
    formats = frozenset({"dabnn"})

    def check(self, *, threads, warmup, runs, delegate) -> None:
        super().check(threads=threads, warmup=warmup, runs=runs, delegate=delegate)
        if threads not in (None, 1):
            raise UsageError("daBNN has no threading: it always runs on one thread",
                             "use threads=1")

    def arguments(self, binary, artifact, *, threads, warmup, runs, delegate, extra, inputs,
                  companions):
        # The model path must stay argv[1]: the binary reads it before Google Benchmark
        # parses (and removes) its own flags.
        return [binary, artifact, "--benchmark_format=json",
                f"--benchmark_repetitions={runs}"] + extra

    def parse(self, text: str, *, warmup_iterations: int = 0) -> dict:
        result = parse_google_benchmark(text)
        context = result.pop("context") or {}
        stats = {"mean": result["mean_ms"], "count": result["iterations"]}
        return make_record(self.backend, stats_ms=stats, threads=1, native={
            **result,
            "google_benchmark_version": context.get("library_version"),
            "context": {k: v for k, v in context.items() if k != "caches"} or None,
            "note": "Google Benchmark sized the iteration count and warm-up itself",
        })
