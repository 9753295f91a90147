"""Printing ``aiot paper bibench``: the grid in the shape of BiBench's Tables 17–20, then
OM_infer per device (the numbers come from :func:`aiot.host.engine.bibench_hw.report`)."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from aiot.core.untrusted import visible
from aiot.host.cli._output import out, safe
from aiot.host.engine.bibench_hw import COLUMNS, column


def print_grid(result: dict) -> None:
    """One table per device (threads × architecture rows, the paper's columns), then the
    reasons for cells that did not run, then OM_infer."""
    for device, facts in result["devices"].items():
        rows = [r for r in result["rows"] if r["device"] == device]
        out.print(_device_table(device, facts, rows))
        for line in _reasons(rows):
            out.print(f"  [yellow]{safe(line)}[/]")
    out.print(_score_table(result))
    out.print(f"paper: {escape(result['paper']['source'])}")


def _device_table(device: str, facts: dict, rows: list[dict]) -> Table:
    hardware = facts.get("paper_hardware")
    title = f"BiBench hardware inference (ms) · {visible(device)}"
    if facts.get("emulated"):
        title += " · EMULATED: timings say nothing about real hardware"
    if hardware:
        title += f" · paper's {hardware} beside it (measured / paper)"
    table = Table("threads", "arch", *[f"{c.title}" for c in COLUMNS], title=escape(title))
    for row in rows:
        table.add_row(str(row["threads"]), row["arch"],
                      *[_cell(row["cells"].get(c.key), hardware) for c in COLUMNS])
    return table


def _cell(entry: dict | None, hardware: str | None) -> str:
    """``ms`` and, for a BNN, its speed-up ``×``; the paper's number and the ratio beside."""
    if entry is None or entry["status"] == "absent":
        return "–"
    if entry["ms"] is None:
        return {"skipped": "[yellow]skipped[/]", "failed": "[red]failed[/]"}.get(
            entry["status"], entry["status"])
    text = f"{entry['ms']:.3f}"
    if entry["speedup"] is not None:
        text += f" ([bold]{entry['speedup']:.2f}×[/])"
    if hardware and entry.get("paper_ms"):
        text += f"\npaper {entry['paper_ms']:.3f} · {entry['ratio']:.2f}"
    return text


def _reasons(rows: list[dict]) -> list[str]:
    """One line per distinct reason a run is missing (skipped or failed), with its cells."""
    found: dict[str, list[str]] = {}
    for row in rows:
        for key, entry in row["cells"].items():
            if entry["status"] in ("skipped", "failed", "missing"):
                label = f"{column(key).title} {row['arch']} {row['threads']}t"
                found.setdefault(f"{entry['status']}: {entry['reason'] or 'no record'}", []).append(label)
    return [f"{why} ({', '.join(labels[:4])}{', …' if len(labels) > 4 else ''})"
            for why, labels in found.items()]


def _score_table(result: dict) -> Table:
    table = Table("device", "algorithm", "library", "baseline", "pairs", "speed-up", "compression",
                  "OM_infer", "paper (Table 3)", title="OM_infer per device (from the stored runs)")
    for score in result["om_infer"]:
        paper = result["paper"]["table3"].get(score["algorithm"])
        table.add_row(safe(score["device"]), score["algorithm"], score["format"], score["baseline"],
                      str(score["pairs"]), f"{score['speedup']:.2f}×", f"{score['compression']:.2f}×",
                      f"{score['om_infer']:.2f}",
                      f"{paper['speedup']:.2f}× / {paper['compression']:.2f}× / {paper['om_infer']:.2f}"
                      if paper else "—")
    if not result["om_infer"]:
        table.add_row("—", "no binarized run with its FP32 baseline", "", "", "", "", "", "", "")
    return table
