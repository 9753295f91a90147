"""``aiot report``: a static HTML page (or Markdown, or CSV) of the stored results."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from aiot.core.diskfull import as_disk_error
from aiot.core.errors import UsageError
from aiot.host.cli._output import message, print_json, safe, state
from aiot.host.cli.options import JsonOpt, OnlyHost
from aiot.host.report.html import FORMATS, write
from aiot.host.report.scale import report_of
from aiot.host.store import open_store


def report(
    ctx: typer.Context,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Folder to write into (default: the results folder's report/).")] = None,
    fmt: Annotated[str, typer.Option(
        "--format", "-f", help="html (a page with PNG plots beside it), md (Markdown with the same "
                               "PNGs) or csv (one file per table).")] = "html",
    sweep: Annotated[str | None, typer.Option(help="Only records of this sweep id.")] = None,
    host: OnlyHost = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a report of the result store: the answer first, then plots, tables and provenance.

    It opens with each model's best median per device and format (with its threads) and,
    where a device measured several formats of a model, the formats compared; then latency
    vs threads, accuracy vs latency, load time, BNN speedup vs FP32, the VIPS/VOPS
    leaderboard, the slowest operators of --profile runs, telemetry and robustness records
    when present; provenance, failures and every run last. Parts without data are left out
    (listed here). INVALID runs are flagged, never dropped. A large store (over 2000
    records) is summarised: trends per configuration, and the newest runs listed (the rest:
    aiot results list). Prints the main file's path.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown report format '{fmt}'", f"use one of: {', '.join(FORMATS)}")
    results_dir = state(ctx).results_dir()
    with open_store(results_dir, readonly=True) as store:
        model = report_of(store, source=str(results_dir), sweep=sweep, host=host)
    out_dir = out or results_dir / "report"
    try:
        files, plots = write(model, fmt, out_dir)
    except OSError as exc:  # a full disk or read-only folder: one line, not a traceback
        raise as_disk_error(exc, "cannot write the report", out_dir) or exc from None
    drawn = sorted(k for k, v in plots.items() if not isinstance(v, str))
    # What is missing and why: empty sections, then figures without data.
    notes = model.left_out()
    notes.update((k, v) for k, v in plots.items() if isinstance(v, str))
    if as_json:
        print_json({"format": fmt, "out": str(out_dir), "files": [str(f) for f in files],
                    "runs": model.tally.count, "invalid": model.tally.invalid,
                    "plots": drawn, "notes": notes})
        return
    message(f"report of {model.tally.count} run(s) ({model.tally.invalid} INVALID), "
            f"{len(files)} file(s)" + (f", {len(drawn)} plot(s)" if fmt != "csv" else "")
            + f" in {safe(out_dir)}")
    for key, note in notes.items():  # a note can name a device's model or reason
        message(f"  [dim]{key}: {safe(note)}[/]")
    typer.echo(files[0] if files else out_dir)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
