"""TFLite ``benchmark_model``'s op profiling (``--enable_op_profiling=true``) as a profile.

With op profiling on, the tool prints, after its timings, a section headed ``Operator-wise
Profiling Info for Regular Benchmark Runs:`` (``tensorflow/lite/profiling/
profile_summarizer.cc``) holding tables, each under a ``==== Title ====`` line:

* ``Run Order``: one row per node, ``[node type] [start] [first] [avg ms] [%] [cdf%] [mem KB]
  [times called] [Name]`` (builds since about 2021 drop ``[start]``; rows are tab-separated in
  older builds, space-aligned in newer ones, where node types hold spaces: XNNPACK's
  ``Convolution (NHWC, QC8) GEMM``); ``avg ms`` is per call and ``times called`` per run,
  so a node's time per inference is their product;
* ``Top by Computation Time``: the same columns, the slowest nodes only;
* ``Summary by node type``: ``[Node type] [count] [avg ms] [avg %] [cdf %] [mem KB] [times
  called]``, ``avg ms`` per inference for all nodes of the type;
* ``Timings (microseconds): count=N ...``: N, the profiled runs.

The profile has the shape of the device agent's ``profile`` answer (see
``device_agent/profiling.py``). LCE's ``lce_benchmark_model`` prints the same section.
"""

from __future__ import annotations

import re

from aiot.host.native.record import NUMBER

SECTION = "Operator-wise Profiling Info for Regular Benchmark Runs:"
TOOL = "benchmark_model --enable_op_profiling"
MAX_OPS = 200  # as the agent's profiles: the slowest ones are kept, the rest summed

_TITLE = re.compile(r"^=+ (?P<title>.+?) =+\s*$")
_COLUMNS = re.compile(r"\[([^\]]+)\]")
_CELL = rf"{NUMBER}%?"


def _tables(section: str) -> dict[str, list[dict]]:
    """Each ``==== Title ====`` table of the section as rows of ``{column: text}``."""
    tables: dict[str, list[dict]] = {}
    lines = section.splitlines()
    i = 0
    while i < len(lines):
        title = _TITLE.match(lines[i].strip())
        if not title or i + 1 >= len(lines):
            i += 1
            continue
        columns = _COLUMNS.findall(lines[i + 1])
        rows, i = [], i + 2
        # Text columns: the first (node type) and, in node tables, the last (its name).
        named = columns[-1].lower() == "name"
        numeric = len(columns) - 1 - int(named)
        row_re = re.compile(rf"^\s*(?P<type>\S.*?)\s+(?P<cells>(?:{_CELL}\s+){{{numeric - 1}}}{_CELL})"
                            + (r"\s+(?P<name>.*?)\s*$" if named else r"\s*$"))
        while i < len(lines) and lines[i].strip():
            found = row_re.match(lines[i])
            if found:
                cells = found["cells"].split()
                row = dict(zip(columns[1 : 1 + numeric], cells))
                row[columns[0]] = found["type"].strip()
                if named:
                    row[columns[-1]] = found["name"]
                rows.append(row)
            i += 1
        tables.setdefault(title["title"], rows)
    return tables


def _number(text: str) -> float:
    return float(text.rstrip("%"))


def parse_op_profile(text: str) -> dict | None:
    """The profile in ``text`` (the tool's whole output), or None when it printed none."""
    at = text.find(SECTION)
    if at < 0:
        return None
    section = text[at + len(SECTION):]
    tables = _tables(section)
    nodes = tables.get("Run Order") or tables.get("Top by Computation Time") or []
    if not nodes:
        return None
    per_op: dict[str, dict] = {}
    for row in nodes:
        calls = _number(row.get("times called", "1"))
        op = per_op.setdefault(row["Name"], {"name": row["Name"], "type": row["node type"],
                                             "ms": 0.0, "calls": 0.0})
        op["ms"] += _number(row["avg ms"]) * calls
        op["calls"] += calls
    by_type = [{"type": r["Node type"], "ms": _number(r["avg ms"]), "count": int(_number(r["count"])),
                "pct": _number(r["avg %"])} for r in tables.get("Summary by node type", [])]
    # Without the Run Order table (a cut log) the node rows are the slowest only: the
    # summary by type still covers every node.
    total = (sum(t["ms"] for t in by_type) if by_type and "Run Order" not in tables
             else sum(op["ms"] for op in per_op.values()))
    ops = sorted(per_op.values(), key=lambda op: -op["ms"])
    for op in ops:
        op["pct"] = round(100.0 * op["ms"] / total, 3) if total else 0.0
    runs = re.search(r"Timings \(microseconds\): count=(\d+)", section)
    kept, cut = ops[:MAX_OPS], ops[MAX_OPS:]
    return {"available": True, "tool": TOOL, "runs": int(runs.group(1)) if runs else None,
            "unit": "ms per inference", "statistic": "the tool's mean per call x calls per inference",
            "total_ms": round(total, 6), "ops": kept, "ops_left_out": len(cut),
            "ms_left_out": round(sum(op["ms"] for op in cut), 6), "by_type": by_type,
            "complete": "Run Order" in tables}
