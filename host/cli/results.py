"""``aiot results``: list, show and export stored records."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Annotated

import typer

from aiot.host.errors import UsageError
from aiot.host.fileio import write_text_atomic

app = typer.Typer(no_args_is_help=True, help="Stored results: list, show, export, compare outputs across devices.")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
FLAT_COLUMNS = ("id", "sweep_id", "kind", "status", "reason", "created_at", "finished_at", "device",
                "model", "format", "threads", "artifact_sha256", "size_bytes", "median_ms", "p90_ms",
                "load_ms", "accuracy")


def print_run_table(records, compact: bool = False) -> None:
    """The run table a person reads: format, threads, latency, load time, accuracy, size.

    Args:
        compact: leave out id, device and model (for one model on one device, as in the demo).
    """
    from rich.table import Table

    from aiot.host.cli._output import fmt_bytes, fmt_ms, fmt_pct, out

    lead = [] if compact else ["id", "device", "model"]
    table = Table(*lead, "format", "threads", "median ms", "p90 ms", "load ms", "accuracy", "size", "status")
    for r in records:
        status = "[green]ok[/]" if r.status == "ok" else f"[red]{r.status}[/]"
        if r.validity == "INVALID":  # measured, but not defensible: `results show` says why
            status += " [yellow]INVALID[/]"
        model = r.model or "—"
        if (r.spec or {}).get("binarize"):  # a binarized model: say with what
            model = f"{model}.{r.spec['binarize']}"
        cells = [] if compact else [r.id[:8], r.device or "—", model]
        table.add_row(*cells, r.format or "—", str(r.threads or "—"), fmt_ms(r.median_ms),
                      fmt_ms(r.p90_ms), fmt_ms(r.load_ms), fmt_pct(r.accuracy), fmt_bytes(r.size_bytes),
                      status)
    out.print(table)


def _open(ctx):
    from aiot.host.cli._output import state
    from aiot.host.store import open_store

    return open_store(state(ctx).results_dir())


@app.command("list")
def list_results(
    ctx: typer.Context,
    kind: Annotated[str | None, typer.Option(help="latency or train.")] = None,
    status: Annotated[str | None, typer.Option(help="pending, ok, failed or skipped.")] = None,
    sweep: Annotated[str | None, typer.Option(help="Only records of this sweep id.")] = None,
    limit: Annotated[int | None, typer.Option(help="Only the newest N records.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List stored records, oldest first (with --json: full records incl. stats and provenance)."""
    from aiot.host.cli._output import print_json

    with _open(ctx) as store:
        records = store.query(kind=kind, status=status, sweep_id=sweep, limit=limit)
    if as_json:
        print_json([r.to_dict() for r in records])
    else:
        print_run_table(records)


def _stats_line(stats: dict) -> str:
    """Numbers with 4 significant digits; the median's CI and outlier count in short form."""
    parts = [f"{k} {v:.4g}" for k, v in stats.items() if isinstance(v, (int, float))]
    ci = stats.get("median_ci")
    if ci:
        parts.append(f"median {ci['level']:.0%} CI [{ci['low']:.4g}, {ci['high']:.4g}]")
    outliers = stats.get("outliers")
    if outliers:
        parts.append(f"outliers {outliers['count']}")
    return ", ".join(parts)


@app.command("show")
def show(ctx: typer.Context, record_id: Annotated[str, typer.Argument(help="Record id (a prefix of ≥4 characters).")],
         as_json: JsonOpt = False) -> None:
    """Show one record with its statistics and provenance."""
    from rich.table import Table

    from aiot.host.cli._output import out, print_json

    with _open(ctx) as store:
        record = store.get(record_id)
    data = record.to_dict()
    if as_json:
        print_json(data)
        return
    table = Table(show_header=False, title=f"record {record.id}")
    table.add_column(style="bold")
    table.add_column()
    for key in FLAT_COLUMNS:
        if data.get(key) is not None:
            table.add_row(key, str(data[key]))
    result = record.result or {}
    stats = result.get("stats_ms")
    if stats:
        table.add_row("stats (ms)", _stats_line(stats))
    validity = result.get("validity")
    if validity:
        table.add_row("validity", "; ".join([validity["verdict"], *validity["reasons"]]))
    prov = record.provenance
    device = prov.get("device") or {}
    table.add_row("device", f"{device.get('cpu_model', '—')} · {device.get('cores', '—')} cores · {device.get('abi', '—')}")
    table.add_row("runtime", json.dumps(prov.get("runtime")))
    table.add_row("toolchain", json.dumps(prov.get("toolchain")))
    table.add_row("aiot", f"{prov.get('aiot_version')} git {json.dumps(prov.get('git'))}")
    out.print(table)


def _to_csv(records) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=[*FLAT_COLUMNS, "stats_ms", "provenance"], lineterminator="\n")
    writer.writeheader()
    for r in records:
        row = {k: getattr(r, k) for k in FLAT_COLUMNS}
        row["stats_ms"] = json.dumps((r.result or {}).get("stats_ms"))
        row["provenance"] = json.dumps(r.provenance, sort_keys=True)
        writer.writerow(row)
    return buf.getvalue()


@app.command("export")
def export(
    ctx: typer.Context,
    fmt: Annotated[str, typer.Option("--format", "-f", help="csv or json.")] = "json",
    out_file: Annotated[Path | None, typer.Option("--out", "-o", help="Write here (atomically) instead of stdout.")] = None,
    kind: Annotated[str | None, typer.Option(help="latency or train.")] = None,
    sweep: Annotated[str | None, typer.Option(help="Only records of this sweep id.")] = None,
) -> None:
    """Export records as CSV (one row per run) or JSON (full records with raw samples)."""
    from rich.markup import escape

    from aiot.host.cli._output import message

    if fmt not in ("csv", "json"):
        raise UsageError(f"unknown export format '{fmt}'", "use --format csv or --format json")
    with _open(ctx) as store:
        records = store.query(kind=kind, sweep_id=sweep)
    text = _to_csv(records) if fmt == "csv" else json.dumps(
        [r.to_dict() for r in records], indent=2, sort_keys=True) + "\n"
    if out_file is None:
        typer.echo(text, nl=False)
    else:
        write_text_atomic(out_file, text)
        message(escape(f"wrote {len(records)} records to {out_file}"))


@app.command("outputs")
def outputs(
    ctx: typer.Context,
    sweep: Annotated[str | None, typer.Option(help="Only records of this sweep id.")] = None,
    reference: Annotated[str | None, typer.Option(
        help="Device whose outputs the others are compared with [default: a real (not emulated) device].")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Compare each artifact's outputs across devices (e.g. x86_64 vs an emulated arm64 board).

    Exits with code 1 when a device's output fingerprint differs beyond tolerance.
    """
    from rich.table import Table

    from aiot.host.cli._output import message, out, print_json
    from aiot.host.output_drift import ATOL, RTOL, output_drift

    with _open(ctx) as store:
        drifts = output_drift(store.query(kind="latency", status="ok", sweep_id=sweep), reference)
    if as_json:
        print_json([d.to_dict() for d in drifts])
    elif not drifts:
        message("no artifact has ok runs on two or more devices to compare")
    else:
        table = Table("model", "format", "threads", "device", "reference", "max |Δ|", "L2 rel Δ", "verdict",
                      caption=f"tolerance |Δ| ≤ {ATOL:g} + {RTOL:g}·|ref|")
        for d in drifts:
            colour = "green" if d.verdict == "match" else "red"
            table.add_row(d.model or "—", d.format or "—", str(d.threads or "—"), d.device, d.reference_device, f"{d.max_abs:.3g}",
                          f"{d.l2_rel:.3g}", f"[{colour}]{d.verdict}[/]")
        out.print(table)
    if any(d.verdict != "match" for d in drifts):
        raise typer.Exit(1)
