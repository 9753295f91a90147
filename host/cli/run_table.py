"""The run table a person reads after ``run``, ``sweep``, ``demo`` and ``results list``."""

from __future__ import annotations

from aiot.host.cli import sweep_view
from aiot.host.cli._output import fmt_bytes, fmt_ms, fmt_pct, name_column, out, safe
from aiot.host.store.identity import shape_label
from aiot.models.model_ref import model_label


def print_run_table(records, compact: bool = False, sweep: bool = False) -> None:
    """The run table a person reads: format, threads, latency, load time, accuracy, size.

    An INVALID run says why in its status; an emulated device is labelled so.

    Args:
        compact: leave out id, device and model (for one model on one device, as in the demo).
        sweep: sort by device, model, format and threads, and add each run's speed-up over
            1 thread and its throughput (see :mod:`aiot.host.cli.sweep_view`).
    """
    from rich.table import Table

    models = {r.id: model_label(r.model, (r.spec or {}).get("binarize")) or "—" for r in records}
    lead = [] if compact else [  # names whole: the other columns give way first
        name_column("id", [r.id[:8] for r in records]),
        name_column("device", [sweep_view.device_cell(r) for r in records]),
        name_column("model", models.values())]
    int8 = sweep_view.int8_speedups(records) if sweep else {}
    int8_column = any(v is not None for v in int8.values())  # only where a float twin ran
    extra = ["speed-up", *(["int8 ×"] if int8_column else []), "inf/s"] if sweep else []
    notes = [n for n in (sweep_view.limits_note(records),) if n]
    caption = "\n".join([*(["speed-up: the same run's median at 1 thread over this one; inf/s: "
                             "inferences per second, one after another"] if sweep else []),
                          *(["int8 ×: the float run's median (same model, runtime, device and threads) "
                             "over this int8 run's"] if int8_column else []),
                          *notes]) or None
    table = Table(*lead, "format", "input", "threads", "median ms", "p90 ms", *extra, "load ms",
                  "accuracy", "size", "status", caption=caption)
    if sweep:
        records = sorted(records, key=sweep_view.sort_key)
        gains = sweep_view.speedups(records)
    for r in records:
        model = models[r.id]
        # Names come from the user's files and the device: no escape sequence or markup acts.
        cells = [] if compact else [safe(r.id[:8]), safe(sweep_view.device_cell(r)), safe(model)]
        if sweep:
            gain, rate = gains.get(r.id), sweep_view.throughput(r)
            extra = ["—" if gain is None else f"{gain:.2f}×",
                     *([_int8_cell(int8, r.id)] if int8_column else []), "—" if rate is None else f"{rate:,.1f}"]
        table.add_row(*cells, safe(sweep_view.format_cell(r)), safe(shape_label(r)), str(r.threads or "—"),
                      fmt_ms(r.median_ms), fmt_ms(r.p90_ms), *extra, fmt_ms(r.load_ms),
                      fmt_pct(r.accuracy), fmt_bytes(r.size_bytes), sweep_view.status_cell(r))
    out.print(table)
    busy = sweep_view.busy_note(records)
    if busy:  # the cells name it; the way out is said once, in full
        out.print(f"[yellow]{safe(busy)}[/]")


def _int8_cell(gains: dict, record_id: str) -> str:
    """The int8 speed-up of an int8 run; blank for a float run, — without its float twin."""
    if record_id not in gains:
        return ""
    gain = gains[record_id]
    return "—" if gain is None else f"{gain:.2f}×"
