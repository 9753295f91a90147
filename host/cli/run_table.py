"""The run table a person reads after ``run``, ``sweep``, ``demo`` and ``results list``."""

from __future__ import annotations

from aiot.host.cli import sweep_view
from aiot.host.cli._output import fmt_bytes, fmt_ms, fmt_pct, name_column, out, safe
from aiot.host.engine.input_values import made_up_ints, values_detail
from aiot.host.store.identity import host_name_of, shape_label, this_host
from aiot.host.store.placement import partly_delegated, short_text
from aiot.models.model_ref import model_label

#: Columns said once above the table when every row has the same value (one device, one
#: input shape, one thread count, no accuracy): a 12-column sweep table then fits 100 columns.
FOLDED = ("device", "host", "input", "threads", "speed-up", "accuracy")
#: Marks an input cell whose run fed made-up integer values (the line under the table says how).
MADE_UP = "†"
#: Marks a format cell whose run's engine took fewer than all operators (the line under the
#: table names those left outside; ``results show ID`` says more).
PARTLY = "‡"


def print_run_table(records, compact: bool = False, sweep: bool = False) -> None:
    """The run table a person reads: format, threads, latency, load time, accuracy, size.

    An INVALID run says why in its status; an emulated device is labelled so; a run whose
    integer inputs were made up is marked, and the line under the table says how they were.

    Args:
        compact: leave out id, device and model (for one model on one device, as in the demo).
        sweep: sort by device, model, format and threads, and add each run's speed-up over
            1 thread and its throughput (see :mod:`aiot.host.cli.sweep_view`).
    """
    from rich.table import Table

    if sweep:
        records = sorted(records, key=sweep_view.sort_key)
    columns = _columns(records, compact, sweep)
    same = {name: cells[0] for name, (_column, cells) in columns.items()
            if name in FOLDED and len(records) > 1 and len(set(cells)) == 1}
    shown = {name: v for name, v in columns.items() if name not in same}
    notes = [n for n in (sweep_view.limits_note(records), _made_up_note(records),
                         _partly_note(records)) if n]
    caption = "\n".join([*(["speed-up: the same run's median at 1 thread over this one; inf/s: "
                             "inferences per second, one after another"]
                           if sweep and "speed-up" in shown else []),
                          *(["int8 ×: the float run's median (same model, runtime, device and threads) "
                             "over this int8 run's"] if "int8 ×" in shown else []),
                          *notes]) or None
    # No box (columns one space apart, headers underlined, units under their names): a column
    # costs 1 character instead of Rich's boxed 3, so a 12-column sweep table fits 100 columns.
    status = _status_width(shown)
    table = Table(*(_rich_column(column, status) for column, _cells in shown.values()), caption=caption,
                  box=None, padding=(0, 1, 0, 0), pad_edge=False, header_style="bold underline",
                  title=("every run: " + ", ".join(f"{k} {v}" for k, v in same.items())
                         if same else None), title_justify="left")
    for row in zip(*(cells for _column, cells in shown.values())):
        table.add_row(*row)
    out.print(table)
    busy = sweep_view.busy_note(records)
    if busy:  # the cells name it; the way out is said once, in full
        out.print(f"[yellow]{safe(busy)}[/]")


def _rich_column(column, status_width: int):
    """A header as a column that keeps its width (numbers, formats): the status column, the
    one that wraps, takes what is left. A name column (already a Column) folds, never cut."""
    from rich.table import Column

    if not isinstance(column, str):
        return column
    if column == "status":
        return Column(column, width=status_width)
    return Column(column, no_wrap=True)


def _status_width(shown: dict) -> int:
    """What the console leaves the status column once every other column has its width (a
    name column at most its fold width), at least 12 characters; its longest cell at most."""
    from rich.text import Text

    def widest(header, cells, cap=None) -> int:
        title = header if isinstance(header, str) else header.header
        longest = max([len(line) for line in str(title).split("\n")]
                      + [Text.from_markup(c).cell_len for c in cells])
        return min(longest, cap) if cap else longest

    others = sum(widest(h, cells, getattr(h, "min_width", None)) + 1
                 for name, (h, cells) in shown.items() if name != "status")
    header, cells = shown["status"]
    return max(12, min(out.width - others - 1, widest(header, cells)))


def host_cells(records) -> list[str] | None:
    """Each record's host (:func:`aiot.host.store.identity.host_name_of`), or None where every
    record is this machine's own: a table says where its runs come from once they come from
    anywhere else."""
    hosts = [host_name_of(r) or "—" for r in records]
    return hosts if set(hosts) - {this_host()} else None


def _columns(records, compact: bool, sweep: bool) -> dict[str, tuple]:
    """Each column's header (or Rich column) and its cells, by name, in the table's order."""
    models = [model_label(r.model, (r.spec or {}).get("binarize")) or "—" for r in records]
    ids = [r.id[:8] for r in records]
    devices = [sweep_view.device_cell(r) for r in records]
    columns: dict[str, tuple] = {}
    if not compact:  # names whole: the other columns give way first
        # Names come from the user's files and the device: no escape sequence or markup acts.
        columns["id"] = (name_column("id", ids), [safe(i) for i in ids])
        columns["device"] = (name_column("device", devices), [safe(d) for d in devices])
        hosts = host_cells(records)
        if hosts:
            columns["host"] = (name_column("host", hosts), [safe(h) for h in hosts])
        columns["model"] = (name_column("model", models), [safe(m) for m in models])
    columns["format"] = ("format", [safe(sweep_view.format_cell(r))
                                    + (PARTLY if partly_delegated(r.result) else "") for r in records])
    columns["input"] = ("input", [safe(shape_label(r)) + (MADE_UP if made_up_ints(r.result) else "")
                                  for r in records])
    columns["threads"] = ("threads", [str(r.threads or "—") for r in records])
    columns["median ms"] = ("median\nms", [fmt_ms(r.median_ms) for r in records])
    columns["p90 ms"] = ("p90\nms", [fmt_ms(r.p90_ms) for r in records])
    if sweep:
        gains = sweep_view.speedups(records)
        columns["speed-up"] = ("speed-\nup", ["—" if gains.get(r.id) is None else f"{gains[r.id]:.2f}×"
                                            for r in records])
        int8 = sweep_view.int8_speedups(records)
        if any(v is not None for v in int8.values()):  # only where a float twin ran
            columns["int8 ×"] = ("int8\n×", [_int8_cell(int8, r.id) for r in records])
        columns["inf/s"] = ("inf/s", ["—" if (rate := sweep_view.throughput(r)) is None
                                      else f"{rate:,.1f}" for r in records])
    columns["load ms"] = ("load\nms", [fmt_ms(r.load_ms) for r in records])
    columns["accuracy"] = ("accuracy", [fmt_pct(r.accuracy) for r in records])
    columns["size"] = ("size", [fmt_bytes(r.size_bytes) for r in records])
    columns["status"] = ("status", [sweep_view.status_cell(r) for r in records])
    return columns


def _int8_cell(gains: dict, record_id: str) -> str:
    """The int8 speed-up of an int8 run; blank for a float run, — without its float twin."""
    if record_id not in gains:
        return ""
    gain = gains[record_id]
    return "—" if gain is None else f"{gain:.2f}×"


def _made_up_note(records) -> str | None:
    """``† made-up values: state int64 uniform in [0, 10) (…)``: how the marked runs' integer
    inputs were filled, once per different way; None when no run made any up."""
    seen = dict.fromkeys(values_detail({"inputs": made_up_ints(r.result)}) for r in records
                         if made_up_ints(r.result))
    if not seen:
        return None
    return (f"{MADE_UP} " + "; ".join(safe(s) for s in seen if s)
            + " (a control input may take a path real data never takes: --input-value NAME=NUMBER)")


def _partly_note(records) -> str | None:
    """``‡ partly delegated: xnnpack left CUMSUM ×1 outside (1a2b3c4d)``: what the marked runs'
    engines left outside, once per different way; None when every run's engine took all."""
    seen: dict[str, list[str]] = {}
    for r in records:
        if (text := short_text(r.result)) is not None:
            seen.setdefault(text, []).append(r.id[:8])
    if not seen:
        return None
    return (f"{PARTLY} partly delegated: "
            + "; ".join(f"{safe(text)} ({', '.join(ids[:3])}{', …' if len(ids) > 3 else ''})"
                        for text, ids in seen.items())
            + " (details: aiot results show ID)")
