"""``aiot results import`` and ``aiot results prune``: gathering results from other hosts, and
letting old ones go (registered on ``aiot results`` by :mod:`aiot.host.cli.results`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from aiot.host.cli._output import message, print_json, safe, state
from aiot.host.cli.options import JsonOpt, OnlyHost
from aiot.host.engine.validity import judge_record
from aiot.host.store import open_store
from aiot.host.store.importing import ImportSummary, import_records
from aiot.host.store.prune import parse_age, prune

#: Refusals and conflicts named one per line before the summary; the rest counted.
SHOWN = 20


def _name_some(lines: list[str], what: str, many: str | None = None) -> None:
    for line in lines[:SHOWN]:
        message(safe(f"{what}: {line}"))
    if len(lines) > SHOWN:
        message(safe(f"... and {len(lines) - SHOWN} more {many or what + 's'} "
                     "(--json lists them all)"))


def import_command(
    ctx: typer.Context,
    source: Annotated[Path, typer.Argument(
        help="A file written by 'aiot results export --format json', or another host's "
             "result store (its aiot.sqlite).")],
    as_json: JsonOpt = False,
) -> None:
    """Import records from an export file or another aiot store into this one.

    Idempotent by record id: a record already stored is skipped; one stored with the same id
    but different content is a conflict, reported and left as it is. Every record is checked
    first, as untrusted as a device's answer (a bad one is refused, naming it and why), and
    its verdict (VALID / INVALID) is judged again here from its own numbers, never taken from
    the file. Fields this aiot does not know are left out and counted. Records are written
    in whole batches: an interrupted import is resumed by running it again. Exits 1 when a
    record was refused or in conflict.
    """
    summary = ImportSummary()
    with open_store(state(ctx).results_dir()) as store:
        # The engine's judge, handed to the store's import (the store is below the engine).
        import_records(store, source, summary, judge=judge_record)
    if as_json:
        print_json(summary.to_dict())
    else:
        _name_some(summary.refused, "refused")
        _name_some([f"record {rid} differs from the stored one (kept as stored)"
                    for rid in summary.conflicts], "conflict")
        _name_some(summary.rejudged, "judged again", "verdicts judged again")
        typer.echo(summary.line())
    if summary.refused or summary.conflicts:
        raise typer.Exit(1)


def prune_command(
    ctx: typer.Context,
    older_than: Annotated[str | None, typer.Option(
        "--older-than", help="Records created longer ago than this: 12h, 90d, 4w.")] = None,
    keep: Annotated[int | None, typer.Option(
        "--keep", help="Keep the newest N records of each configuration and thread count "
                       "(with --older-than: prune only older records beyond these N).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would go; change nothing.")] = False,
    vacuum: Annotated[bool, typer.Option(
        "--vacuum", help="Then give the freed space back to the disk (rewrites the store).")] = False,
    host: OnlyHost = None,
    yes: Annotated[bool, typer.Option(
        "--yes", "-y", help="Do not ask before deleting (asked only at a terminal).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Remove old records: older than an age, beyond the newest N per configuration, or both.

    The newest N are kept per host (the host is part of a configuration), and this store's
    own runs rank before imported ones, so an imported record never displaces one measured
    here. At a terminal, what would go is listed per host and asked about first. Pending
    records, and every record of a sweep that still has pending ones (running, or to be
    resumed), are never pruned. All in one transaction.
    """
    age = parse_age(older_than) if older_than is not None else None
    ask = None if (yes or as_json or not sys.stdin.isatty()) else _ask
    with open_store(state(ctx).results_dir()) as store:
        summary = prune(store, age, keep, dry_run=dry_run, vacuum=vacuum, host=host,
                        confirm=ask)
    if as_json:
        print_json(summary.to_dict())
        return
    if ask is None:  # asked: the lines were said before the question
        for line in summary.host_lines():
            message(safe(line))
    if dry_run:
        for record in summary.pruned[:SHOWN]:
            message(safe(f"would prune {record['id'][:8]} {record['created_at'][:19]} "
                         f"{record['status']} {record['label']}"))
        if len(summary.pruned) > SHOWN:
            message(f"... and {len(summary.pruned) - SHOWN} more (--json lists them all)")
    typer.echo(summary.line())


def _ask(summary) -> bool:
    """Name what would go, per host, and ask (at a terminal only)."""
    for line in summary.host_lines():
        message(safe(line))
    return typer.confirm(f"delete these {len(summary.pruned)} records?", default=False)
