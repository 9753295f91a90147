"""Shared helpers for the benchmarks: a results folder, a table printer, JSON output."""

from __future__ import annotations

import json
import platform
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parent / "out"


def write_json(name: str, payload: dict) -> Path:
    """Write ``bench/out/<name>.json`` with machine facts added; returns the path."""
    OUT_DIR.mkdir(exist_ok=True)
    payload = {
        "benchmark": name,
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "executable": Path(sys.executable).name},
        **payload,
    }
    path = OUT_DIR / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def print_table(headers: list[str], rows: list[list]) -> None:
    """A plain fixed-width table on stdout (no Rich: benchmarks stay dependency-free)."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))


def median(values: list[float]) -> float:
    return statistics.median(values)
