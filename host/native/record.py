"""Shared pieces of the parsers: numbers, units, and the result record's shape.

The record mirrors the device agent's ``result`` event (``aiot.device_agent.agent.run``) so
stored runs compare across the agent and native tools: ``backend``, ``runtime_version``,
``threads``, ``input_shape``, ``load_ms``, ``first_inference_ms``, ``warmup``, ``stats_ms`` and,
only when the tool printed per-iteration times, ``samples_ns``. What a tool does not print stays
absent or None; the tool-specific rest goes under ``native``. One difference: ``warmup`` is
``{"count", "mean_ms"}`` (tools print an average) where the agent stores ``{"count", "seconds"}``.
"""

from __future__ import annotations

import re

from aiot.device_agent.stats import summarize_ms

NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
TO_MS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3, "sec": 1e3}


def to_ms(value: float, unit: str) -> float:
    """``value`` in ``unit`` (ns, us, ms, s) as milliseconds."""
    return float(value) * TO_MS[unit]


def search(pattern: str, text: str, flags: int = 0) -> re.Match | None:
    """The last match of ``pattern`` in ``text``: a tool that logs twice reports last."""
    matches = list(re.finditer(pattern, text, flags | re.MULTILINE))
    return matches[-1] if matches else None


def number(pattern: str, text: str, group: int = 1) -> float | None:
    """The float in ``group`` of the last match, or None."""
    found = search(pattern, text)
    return float(found.group(group)) if found else None


def samples_from_ms(values_ms: list[float]) -> list[int]:
    """Per-iteration milliseconds as the agent's integer nanoseconds."""
    return [round(v * 1e6) for v in values_ms]


def make_record(backend: str, *, stats_ms: dict, threads: int | None = None,
                load_ms: float | None = None, first_inference_ms: float | None = None,
                warmup: dict | None = None, samples_ns: list[int] | None = None,
                runtime_version: str | None = None, native: dict | None = None) -> dict:
    """A result record in the agent's shape; ``samples_ns`` only when printed per iteration."""
    record = {
        "backend": backend,
        "runtime_version": runtime_version,
        "threads": threads,
        "input_shape": None,
        "load_ms": load_ms,
        "first_inference_ms": first_inference_ms,
        "warmup": warmup,
        "stats_ms": {k: v for k, v in stats_ms.items() if v is not None},
        "native": {"tool": backend.split(":", 1)[-1], "version": runtime_version,
                   **(native or {})},
    }
    if samples_ns is not None:
        record["samples_ns"] = samples_ns
    return record


def stats_from_samples(samples_ns: list[int]) -> dict:
    """The agent's statistics over per-iteration samples the tool printed."""
    return summarize_ms(samples_ns)
