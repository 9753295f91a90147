"""``aiot results``: list, show, export, compare and rank stored records."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Annotated

import typer

from aiot.core.errors import UsageError
from aiot.core.fileio import check_output_file, write_output_atomic
from aiot.host.cli._output import (
    fmt_bytes,
    fmt_ms,
    fmt_pct,
    message,
    out,
    print_json,
    safe,
    state,
)
from aiot.host.cli.options import JsonOpt, OnlyDevice, OnlyHost, OnlyModel
from aiot.host.cli.profile_view import print_profiles
from aiot.host.cli.record_table import write_parquet
from aiot.host.cli.record_view import (
    FLAT_COLUMNS,
    Counted,
    csv_chunks,
    json_chunks,
    nonfinite_text,
    parity_line,
    stats_line,
)
from aiot.host.cli.results_compare import compare_command, store_files
from aiot.host.cli.results_gather import import_command, prune_command
from aiot.host.cli.run_table import print_run_table
from aiot.host.engine.input_values import values_detail
from aiot.host.engine.validity import limits_text, verdict_text
from aiot.host.scores.om_infer import om_infer, pair_runs
from aiot.host.scores.vips import device_scores, select_tests, si
from aiot.host.store import open_store, predictions
from aiot.host.store.leaderboard import latency_board
from aiot.host.store.facts import FactsDisagree
from aiot.host.store.identity import deployment_note, host_name_of, host_of, shape_detail, this_host
from aiot.host.store.output_drift import ATOL, RTOL, output_drift
from aiot.host.store.placement import placement_text
from aiot.host.store.queries import Filters, parse_time
from aiot.host.store.recover import recover_store
from aiot.models.model_ref import model_label, record_name

app = typer.Typer(no_args_is_help=True,
                  help="Stored results: list, show, export, compare sets (a CI gate), "
                       "leaderboards, compare outputs across devices.")


def _open(ctx):
    return open_store(state(ctx).results_dir(), readonly=True)


#: How many records ``results list`` shows without --limit (the newest; --page for older).
LIST_DEFAULT = 50


@app.command("list")
def list_results(
    ctx: typer.Context,
    kind: Annotated[str | None, typer.Option(help="latency or train.")] = None,
    status: Annotated[str | None, typer.Option(help="pending, ok, failed or skipped.")] = None,
    sweep: Annotated[str | None, typer.Option(help="Only records of this sweep id.")] = None,
    device: OnlyDevice = None,
    model: OnlyModel = None,
    fmt: Annotated[str | None, typer.Option("--format", "-f", help="Only runs in this format.")] = None,
    since: Annotated[str | None, typer.Option(
        help="Only records made at or after this time (ISO 8601, e.g. 2026-05-01; UTC unless "
             "it names a zone).")] = None,
    until: Annotated[str | None, typer.Option(help="Only records made before this time.")] = None,
    limit: Annotated[int | None, typer.Option(
        help=f"Show the newest N records (default: {LIST_DEFAULT}; with --json: all); 0: all.")] = None,
    page: Annotated[int, typer.Option(help="Page N of --limit records, newest first (2: the "
                                           "next older ones).")] = 1,
    host: OnlyHost = None,
    as_json: JsonOpt = False,
) -> None:
    """List stored records, oldest first: the newest 50 unless --limit says (with --json: all,
    as full records incl. stats and provenance). Runs another host drove (imported) are
    shown with their host."""
    if page < 1 or (limit is not None and limit < 0):
        raise UsageError("--page must be ≥ 1 and --limit ≥ 0")
    filters = Filters(kind, status, sweep, device, record_name(model), fmt,
                      parse_time(since, "--since"), parse_time(until, "--until"), host=host)
    count = (None if as_json else LIST_DEFAULT) if limit is None else (limit or None)
    with _open(ctx) as store:
        if count is None:  # everything, read and written a batch at a time
            records = store.records(filters)
            if as_json:
                for chunk in json_chunks(records):
                    sys.stdout.write(chunk)
                sys.stdout.flush()
            else:
                print_run_table(list(records))
            return
        # One more than asked for: whether older records are left for the next page.
        newest = list(store.records(filters, newest_first=True, limit=count + 1,
                                    offset=(page - 1) * count))
    records, more = newest[:count][::-1], len(newest) > count
    if as_json:
        print_json([r.to_dict() for r in records])
        return
    print_run_table(records)
    if more:
        message(f"[dim]the newest {count} shown (page {page}); older: --page {page + 1}, "
                "all: --limit 0[/]")


@app.command("show")
def show(ctx: typer.Context, record_id: Annotated[str, typer.Argument(help="Record id (a prefix of ≥4 characters).")],
         as_json: JsonOpt = False) -> None:
    """Show one record with its statistics and provenance."""
    from rich.table import Table

    with _open(ctx) as store:
        record = store.get(record_id)
        predicted = predictions.predicted_before(store, record)  # aiot predict's, before it ran
    data = record.to_dict()
    if as_json:
        print_json(data)
        return
    table = Table(show_header=False, title=f"record {safe(record.id)}")
    table.add_column(style="bold")
    table.add_column()

    def row(key: str, value: str) -> None:  # values hold file names and a device's text
        table.add_row(key, safe(value))

    data["model"] = model_label(record.model, (record.spec or {}).get("binarize"))
    if (note := deployment_note(record)) and data.get("format"):
        data["format"] = f"{data['format']} ({note})"  # as every table of runs names it
    for key in FLAT_COLUMNS:
        if data.get(key) is not None:
            row(*_shown(key, data[key]))
    result = record.result or {}
    row("input shape", shape_detail(record))
    if (values := values_detail(result)) is not None:
        row("input values", values)
    stats = result.get("stats_ms")
    if stats:
        row("latency (ms)", stats_line(stats))
    if predicted is not None:
        row("predicted", predictions.line(predicted, record))
    nonfinite = (result.get("output") or {}).get("nonfinite")
    if nonfinite:  # the model's outputs on the run's input: latency is measured all the same
        row("non-finite outputs", f"{nonfinite_text(nonfinite)} of {result['output']['size']} values")
    validity = result.get("validity")
    if validity:
        row("validity", "; ".join([verdict_text(validity), *validity["reasons"]]))
        if validity.get("limits"):
            row("validity limits", limits_text(validity["limits"]))
    if (where := placement_text(result)) is not None:  # which operators the engine took
        row("placement", where)
    parity = parity_line((record.provenance.get("artifact") or {}).get("parity"))
    if parity:
        row("parity vs PyTorch", parity)
    cached = (record.provenance.get("artifact") or {}).get("from_cache")
    if isinstance(cached, dict):  # the artifact is a copy: say of which conversion
        row("artifact", f"copied from the conversion cache (entry {str(cached.get('key'))[:12]}, "
                        f"converted {str(cached.get('converted_at'))[:19]})")
    prov = record.provenance
    device = prov.get("device") or {}
    row("device", f"{device.get('cpu_model', '—')} · {device.get('cores', '—')} cores · {device.get('abi', '—')}")
    row("host", _host_line(record))
    row("runtime", json.dumps(prov.get("runtime")))
    if prov.get("agent_process"):  # how the timed process started: it can change what it measures
        row("agent process", prov["agent_process"])
    row("toolchain", json.dumps(prov.get("toolchain")))
    if prov.get("weights"):
        row("weights", _weights_line(prov["weights"]))
    row("aiot", f"{prov.get('aiot_version')} git {json.dumps(prov.get('git'))}")
    out.print(table)
    print_profiles([record])  # a --profile run's slowest operators, or why it has none


def _host_line(record) -> str:
    """``lab-b-1a2b3c (another host)``: the host that drove the run, and whether it
    is this machine."""
    host = host_name_of(record) or "not recorded"
    if host_of(record) is None:
        return f"{host} (written before host ids were recorded)"
    return host + (" (this machine)" if host == this_host() else " (another host)")


#: ``results show``'s rows for numeric columns: a label with the unit, and the value rounded.
_SHOWN = {"median_ms": "median (ms)", "p90_ms": "p90 (ms)", "load_ms": "load (ms)",
          "size_bytes": "size", "accuracy": "accuracy"}


def _shown(key: str, value) -> tuple[str, str]:
    """``("median (ms)", "1.234")`` for a record column; text columns as they are."""
    if key in ("created_at", "finished_at"):  # to the second, as created_at is stored
        return key, re.sub(r"(:\d\d)\.\d+", r"\1", str(value))
    if key not in _SHOWN:
        return key, str(value)
    text = {"size_bytes": fmt_bytes, "accuracy": fmt_pct}.get(key, fmt_ms)(value)
    return _SHOWN[key], text


def _weights_line(weights: dict) -> str:
    """``trained on digits, newest cached (default) · tiny_cnn-digits-….pt · sha256 1a2b3c4d…``,
    or ``untrained (random init)``."""
    parts = [weights.get("label") or weights.get("origin") or "?"]
    if weights.get("file"):
        parts.append(weights["file"])
    if weights.get("sha256"):
        parts.append(f"sha256 {weights['sha256'][:12]}…")
    return " · ".join(parts)


@app.command("export")
def export(
    ctx: typer.Context,
    fmt: Annotated[str, typer.Option("--format", "-f", help="csv, json or parquet (with --out; the CSV's columns, typed: the api extra).")] = "json",
    out_file: Annotated[Path | None, typer.Option("--out", "-o", help="Write here (atomically) instead of stdout.")] = None,
    kind: Annotated[str | None, typer.Option(help="latency or train.")] = None,
    sweep: Annotated[str | None, typer.Option(help="Only records of this sweep id.")] = None,
    host: OnlyHost = None,
) -> None:
    """Export records as CSV (one row per run), JSON (full records with raw samples) or Parquet.

    Every record keeps the host that drove it (``provenance.host``; the CSV's host column),
    so another host that imports the file keeps them apart from its own. Parquet has the CSV's
    columns with a type each (numbers as numbers, the statistics and provenance as JSON text).

    --out replaces an existing file atomically; the result store itself, folders, links
    and special files (devices, FIFOs) are refused.
    """
    if fmt not in ("csv", "json", "parquet"):
        raise UsageError(f"unknown export format '{fmt}'", "use --format csv, json or parquet")
    if fmt == "parquet" and out_file is None:  # a binary file: never a terminal's
        raise UsageError("--format parquet writes a file", "give --out FILE.parquet")
    with _open(ctx) as store:
        if out_file is not None:  # before any work: never the store itself, a link, a device
            check_output_file(out_file, store_files(store.path))
        # Streamed: read a batch of records at a time and written as they come.
        counted = Counted(store.records(Filters(kind=kind, sweep_id=sweep, host=host)))
        if fmt == "parquet":
            write_parquet(counted, out_file)
            message(safe(f"wrote {counted.count} records to {out_file}"))
            return
        chunks = csv_chunks(counted) if fmt == "csv" else json_chunks(counted)
        if out_file is None:
            for chunk in chunks:
                sys.stdout.write(chunk)
            sys.stdout.flush()
            return
        write_output_atomic(out_file, chunks)
    message(safe(f"wrote {counted.count} records to {out_file}"))


@app.command("check")
def check(ctx: typer.Context, full: Annotated[bool, typer.Option(
        "--full", help="Also compare every index with its table (PRAGMA integrity_check; "
                       "slower).")] = False) -> None:
    """Check every page of the result store now, and the facts its report reads.

    Opening a store checks it in full only after an unclean stop or a change aiot did not
    make (a cheap check of its header otherwise); this checks it on demand. A damaged store
    fails with exit code 1 and the way to recover it. Facts that disagree with the records
    (changed by something other than aiot) are made again from the records. Records holding
    a field of a type aiot does not write (views show it as "—") are counted and the first
    named, with exit code 1.
    """
    try:
        with _open(ctx) as store:
            store.verify(full)
            total = store.count()
            odd, named = store.unreadable()
        remade = ""
    except FactsDisagree as exc:  # its pages are whole: the facts are made again from them
        with open_store(state(ctx).results_dir()) as store:
            total = store.rebuild_facts(exc.wrong)
            odd, named = store.unreadable()
        remade = "; the facts its report reads disagreed with them and were made again"
    if odd:
        for line in named:
            message(safe(f"unreadable: record {line}"))
        message(safe(f"result store {store.path}: every page read, {total} records{remade}; "
                     f"{odd} of them hold fields of a type aiot does not write (views show "
                     f"them as —; a damaged store, or one written before imports were checked)"))
        raise typer.Exit(1)
    message(safe(f"result store {store.path} is whole: {total} records, every page read{remade}"))


@app.command("recover")
def recover(ctx: typer.Context) -> None:
    """Recover a damaged result store: copy every record still readable into a new store.

    The damaged store is kept beside the new one (aiot.sqlite.damaged-TIME), never deleted.
    """
    from rich.markup import escape

    done = recover_store(state(ctx).results_dir())
    # The count SQLite still gives (an index, read to its first damaged page) can fall short
    # of what the pages gave back: then it says nothing.
    of = f" of {done.listed}" if done.listed is not None and done.listed >= done.recovered else ""
    kept = (f"; {done.kept_runs} runs that finished after the damage were stored in it too"
            if done.kept_runs else "")
    message(escape(f"recovered {done.recovered}{of} records and {done.pushes} pushes into a new "
                   f"store; the damaged one is kept as {done.kept_as}{kept}"))


@app.command("outputs")
def outputs(
    ctx: typer.Context,
    sweep: Annotated[str | None, typer.Option(help="Only records of this sweep id.")] = None,
    reference: Annotated[str | None, typer.Option(
        help="Device whose outputs the others are compared with (default: a real (not emulated) device).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Compare each artifact's outputs across devices (e.g. x86_64 vs an emulated arm64 board).

    Exits with code 1 when a device's output fingerprint differs beyond tolerance.
    """
    from rich.table import Table

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
            table.add_row(safe(d.model or "—"), safe(d.format or "—"), str(d.threads or "—"), safe(d.device),
                          safe(d.reference_device), f"{d.max_abs:.3g}",
                          f"{d.l2_rel:.3g}", f"[{colour}]{d.verdict}[/]")
        out.print(table)
    if any(d.verdict != "match" for d in drifts):
        raise typer.Exit(1)


# -- top: leaderboards ---------------------------------------------------------------------------

def _latency_board(records, fmt, limit):
    from rich.table import Table

    board = latency_board(r for r in records if fmt is None or r.format == fmt)[:limit]
    table = Table("#", "device", "model", "format", "threads", "runner", "latency ms", "p90 ms",
                  "size", "id", title="fastest VALID run per configuration and threads")
    for s in board:
        model = model_label(s.model, s.binarize)
        stat = "" if s.stat == "median" else f" ({s.stat})"
        table.add_row(str(s.rank), safe(s.device or "—"), safe(model or "—"), safe(s.variant),
                      str(s.threads or "—"), safe(s.native or "agent"), fmt_ms(s.latency_ms) + stat,
                      fmt_ms(s.p90_ms), fmt_bytes(s.size_bytes), s.record_id[:8])
    return [s.to_dict() for s in board], table


def _vips_board(records, fmt, limit):
    """Devices by AIoTBench's VIPS, highest first (details: aiot score vips)."""
    from rich.table import Table

    selection = select_tests([r for r in records if fmt is None or r.format == fmt])
    scores = sorted(device_scores(selection.tests, selection.not_run),
                    key=lambda s: (-s.vips, s.device))
    scores = scores[:limit]
    table = Table("#", "device", "VIPS", "VOPS", "tests", "not run",
                  title="devices by VIPS = Σ accuracy / mean s per image",
                  caption="sums: compare devices over the same tests")
    for rank, s in enumerate(scores, start=1):
        table.add_row(str(rank), safe(s.device), f"{s.vips:.2f}", si(s.vops), str(s.tests),
                      str(len(s.not_run)))
    return [{"rank": i, **s.to_dict()} for i, s in enumerate(scores, start=1)], table


def _om_infer_board(records, fmt, limit):
    """Binarizations by BiBench's OM_infer over their FP32 tflite baselines, highest first."""
    from rich.table import Table

    scores = [s for s in om_infer(pair_runs(records)) if fmt is None or s.format == fmt]
    scores = sorted(scores, key=lambda s: -s.om_infer)[:limit]
    table = Table("#", "algorithm", "format", "pairs", "speedup", "compression", "OM_infer",
                  "devices", title="binarizations by OM_infer (baseline: tflite)")
    for rank, s in enumerate(scores, start=1):
        table.add_row(str(rank), safe(s.algorithm), safe(s.format), str(s.pairs), f"{s.speedup:.2f}x",
                      f"{s.compression:.2f}x", f"{s.om_infer:.2f}", safe(", ".join(s.devices)))
    return [{"rank": i, **s.to_dict()} for i, s in enumerate(scores, start=1)], table


BOARDS = {"latency": _latency_board, "vips": _vips_board, "om-infer": _om_infer_board}


@app.command("top")
def top(
    ctx: typer.Context,
    by: Annotated[str, typer.Option(
        "--by", help="latency: the fastest VALID run per configuration (device, model, "
                     "format, options, runner, via ...) and threads; "
                     "vips: devices by AIoTBench's VIPS; om-infer: binarizations by BiBench's "
                     "OM_infer.")] = "latency",
    device: OnlyDevice = None,
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", help="Only runs in this format (om-infer: binarized runs').")] = None,
    model: OnlyModel = None,
    threads: Annotated[int | None, typer.Option(help="Only runs at this thread count.")] = None,
    limit: Annotated[int, typer.Option(help="Show the best N.")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """Leaderboards over the stored ok latency runs, best first."""
    if by not in BOARDS:
        raise UsageError(f"unknown leaderboard '{by}'", f"use --by {', '.join(BOARDS)}")
    if limit < 1:
        raise UsageError(f"--limit must be ≥ 1, got {limit}")
    with _open(ctx) as store:  # streamed: the latency board keeps the best run per key only
        records = (r for r in store.records(Filters("latency", "ok", device=device,
                                                    model=record_name(model)))
                   if threads is None or r.threads == threads)
        rows, table = BOARDS[by](records, fmt, limit)
    if as_json:
        print_json(rows)
        return
    if not rows:
        message(f"nothing to rank by {by}: no ok run matches (see: aiot results list)")
        return
    out.print(table)


app.command("compare")(compare_command)
app.command("import")(import_command)
app.command("prune")(prune_command)
