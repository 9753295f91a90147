"""The per-operator tables of profiled runs (``aiot run/sweep --profile``), for a terminal."""

from __future__ import annotations

from rich.table import Table

from aiot.host.cli._output import fmt_ms, out, safe
from aiot.host.engine.profiles import TOP_N, profile_of, summary, top_ops
from aiot.host.store.identity import label

NAME_WIDTH = 56  # long node names (a detector's fused nodes) are cut in the middle


def _short(name: str, width: int = NAME_WIDTH) -> str:
    if len(name) <= width:
        return name
    half = (width - 1) // 2
    return name[:half] + "…" + name[-(width - 1 - half):]


def print_profiles(records, top: int = TOP_N) -> None:
    """For each profiled record: a line naming the profiler, then its ``top`` slowest ops
    (or, where the runtime has no profiler, the line saying so)."""
    for record in records:
        profile = profile_of(record)
        if profile is None:
            continue
        out.print(f"\n[bold]slowest operators[/], {safe(label(record))}: {safe(summary(profile))}")
        ops = top_ops(profile, top)
        if not ops:
            continue
        table = Table("op", "type", "ms / inference", "%", "calls")
        for op in ops:
            calls = op.get("calls")
            table.add_row(safe(_short(str(op.get("name")))), safe(op.get("type") or "—"),
                          fmt_ms(op.get("ms")), f"{op.get('pct', 0):.1f}",
                          "—" if calls is None else f"{calls:g}")
        out.print(table)
