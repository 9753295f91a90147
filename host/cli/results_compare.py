"""``aiot results compare``: result set B judged against baseline A, a regression gate for CI
(registered on ``aiot results`` by :mod:`aiot.host.cli.results`; the logic is
:mod:`aiot.host.store.compare`, the JUnit and Markdown files :mod:`aiot.host.cli.compare_reports`).

Its exit codes: 0 passed, 1 a row failed the gate, 2 could not compare (a bad option, an
unknown set), 3 B is incomplete. A failing row fails the gate whatever flags are given, and
no hint it prints names a flag that would turn a failing gate into a pass.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated

import typer

from aiot.core.errors import AiotError, UsageError
from aiot.core.fileio import check_output_file, write_output_atomic
from aiot.host.cli._output import err, message, out, print_json, safe, state
from aiot.host.cli.compare_reports import heading, junit_xml, latency_cells, markdown, short_sha
from aiot.host.cli.options import JsonOpt, OnlyHost
from aiot.host.cli.sweep_view import invalid_reasons
from aiot.host.engine.validity import emulated
from aiot.host.store import open_store
from aiot.host.store.compare import (
    BY,
    LEGEND,
    by_value,
    compare,
    compare_by,
    parse_check,
    resolve_set,
)
from aiot.host.store.identity import HOST_ENV, host_name_of
from aiot.host.store.store import DB_NAME

#: ``results compare``'s exit code when B lacks runs of A or nothing was compared: not a
#: regression (1) and not a bad command (2), but no pass either.
INCOMPLETE_EXIT = 3
#: The file GitHub Actions shows as a job's summary; ``--markdown`` appends to it when set.
STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
#: Rows of A named one per line when B is incomplete (the rest counted).
SHOWN = 20


def store_files(store: Path) -> list[Path]:
    """The store and the files SQLite keeps beside it."""
    return [store, *(store.with_name(store.name + tail) for tail in ("-wal", "-shm", "-journal", "-checked"))]


@dataclass(frozen=True)
class Asked:
    """What the command line asked of a comparison besides its two sets."""

    fail_on: list[str]
    allow_missing: bool
    fail_on_invalid: bool
    junit: Path | None
    markdown: Path | None
    as_json: bool


def _could_not_compare(exc: AiotError) -> typer.Exit:
    """An aiot error as the usual one line, but exit code 2: a CI gate must tell "could not
    compare" from "regressed" (1), so ``compare`` does not leave it to the root app."""
    err.print(f"[bold red]error:[/] {safe(exc.message)}", highlight=False)
    if exc.hint:
        err.print(f"[dim]hint:[/] {safe(exc.hint)}", highlight=False)
    return typer.Exit(2)


def _check_outputs(ctx, asked: Asked) -> None:
    """Refuse a ``--junit`` or ``--markdown`` file before any work (the store, a link, a
    device, a folder; the same file for both)."""
    guarded = store_files(state(ctx).results_dir() / DB_NAME)
    given = [(p, o) for p, o in ((asked.junit, "--junit"), (asked.markdown, "--markdown")) if p]
    for path, option in given:
        check_output_file(path, guarded, option)
    if len(given) == 2 and given[0][0].resolve() == given[1][0].resolve():
        raise UsageError(f"--junit and --markdown name the same file {given[0][0]}",
                         "give each report a file of its own")


def _resolve_sets(ctx, names: list[str], host: str | None = None):
    """The result sets ``names`` name (``host``: only that host's runs of each); the store is
    opened only when one is not a file."""
    if all(Path(n).is_file() for n in names):
        sets = [resolve_set(n, None) for n in names]
    else:
        with open_store(state(ctx).results_dir(), readonly=True) as store:
            sets = [resolve_set(n, store) for n in names]
    return [_of_host(s, host) for s in sets] if host else sets


def _of_host(found, host: str):
    """``found`` cut to the runs ``host`` drove (by host id, or an older record's host name)."""
    mine = [r for r in found.records if host_name_of(r) == host]
    if not mine:
        hosts = sorted({host_name_of(r) or "not recorded" for r in found.records})
        raise UsageError(f"result set '{found.name}' has no runs of host {host}",
                         f"its runs' hosts: {', '.join(hosts)}")
    return replace(found, records=mine)


def _comparison_notes(row, records: dict) -> str:
    """The row's failures, reasons and INVALID sides (with why), ``records`` by id."""
    notes = [f"[red]{safe(f)}[/]" for f in row.failures]
    if row.reason and row.status != "newly failing":
        notes.append(safe(row.reason))
    if row.other_artifact:
        notes.append("[bold]another artifact[/]")
    if row.stat == "mean":
        notes.append("means (no medians)")
    for side in row.invalid:
        if any(f.startswith(f"{side} INVALID") for f in row.failures):
            continue  # --fail-on-invalid's failure says it, with why
        found = records.get(row.a_id if side == "A" else row.b_id)
        why = invalid_reasons(found) if found is not None else ""
        notes.append(f"[yellow]{side} INVALID[/]{safe(': ' + why) if why else ''}")
    notes += [f"[dim]{safe(d)}[/]" for d in row.environment]
    return "; ".join(notes)


def _print_comparison(result, a, b) -> None:
    from rich.table import Table

    table = Table("", "status", "run", "A ms", "B ms", "change", "A", "B", "A sha", "B sha",
                  "notes", title=safe(heading(a, b)), caption=LEGEND)
    records = {r.id: r for r in [*a.records, *b.records]}
    # Every table says which timings are this host's, not the device's.
    on_host = {r.device for r in records.values() if emulated((r.provenance or {}).get("device") or {})}
    for row in result.rows:
        label = row.label() + (" (emulated)" if row.key.get("device") in on_host else "")
        table.add_row(safe(row.marker), row.status, safe(label), *latency_cells(row),
                      (row.a_id or "—")[:8], (row.b_id or "—")[:8], short_sha(row.a_sha256),
                      short_sha(row.b_sha256), _comparison_notes(row, records))
    out.print(table)


def _write_reports(result, a, b, asked: Asked) -> list[str]:
    """Write ``--junit`` and ``--markdown`` (atomically) and append the Markdown to
    ``$GITHUB_STEP_SUMMARY``; returns the errors (one line each) of files not written."""
    errors = []
    if asked.junit is not None:
        try:
            write_output_atomic(asked.junit, junit_xml(result, a, b), "--junit")
            message(safe(f"wrote the JUnit report to {asked.junit}"))
        except UsageError as exc:
            errors.append(exc.message)
    if asked.markdown is None:
        return errors
    text = markdown(result, a, b)
    summary = os.environ.get(STEP_SUMMARY) or None
    same = summary is not None and Path(summary).resolve() == asked.markdown.resolve()
    try:
        if not same:  # the job summary itself is only appended to, never replaced
            write_output_atomic(asked.markdown, text, "--markdown")
            message(safe(f"wrote the Markdown summary to {asked.markdown}"))
    except UsageError as exc:
        errors.append(exc.message)
    if summary is not None:
        try:
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(text + "\n")
            message(safe(f"appended the Markdown summary to ${STEP_SUMMARY} ({summary})"))
        except OSError as exc:
            errors.append(f"cannot append to ${STEP_SUMMARY} {summary}: {exc.strerror or exc}")
    return errors


def _incomplete_hint(result) -> str:
    """How to make B complete: measure what it lacks where A was measured (never a flag that
    lets the gate pass without it)."""
    unlike = result.not_comparable
    if unlike and any((r.reason or "").startswith("host ") for r in unlike):
        return ("B was measured on another machine: measure it on A's device from A's host; CI "
                f"runners of one kind must share one {HOST_ENV} (see docs/guide/ci.md)")
    if unlike:
        return "measure B on the device and hardware A was measured on"
    if result.missing:
        return ("measure the missing configurations into B (the same models, formats, options "
                "and threads as A, on A's device and host), then compare again")
    return ("no run of B has the configuration of a run of A: measure A's configurations "
            "(see: aiot results list --sweep A)")


def _gate(result) -> int:
    """The verdict on stderr, its final line the verdict itself; returns the exit code: 1
    when a row fails the gate, 3 when B is incomplete, else 0."""
    for warning in result.warnings:
        message(f"[yellow]warning:[/] {safe(warning)}")
    head, rest = result.verdict()
    for row in result.failing:
        why = "; ".join(row.failures)
        message(f"  {safe(row.label())} (B {(row.b_id or '')[:8]}, artifact "
                f"{safe(row.artifacts())}): {safe(why)}")
    code = 1 if result.failing else INCOMPLETE_EXIT if result.incomplete else 0
    if code == INCOMPLETE_EXIT:
        unmatched = [*result.not_comparable, *([] if result.allow_missing else result.missing)]
        for row in unmatched[:SHOWN]:
            message(f"  {safe(row.label())} (A {(row.a_id or '')[:8]}): "
                    f"{safe(row.reason or row.status)}")
        if len(unmatched) > SHOWN:
            message(f"  ... and {len(unmatched) - SHOWN} more (--json lists them all)")
        message(f"[dim]hint:[/] {safe(_incomplete_hint(result))}")
    elif code == 1:
        message("[dim]hint:[/] each run's details: aiot results show ID")
    colour = "bold red" if code else "green"
    message(f"[{colour}]{safe(head)}[/]: {safe(rest)}")
    return code


def _finish(result, set_a, set_b, asked: Asked, **shown) -> None:
    """Show the comparison (a table, or ``--json``), write its reports, give the verdict and
    exit with its code (a report not written: exit 2 unless the gate already failed)."""
    if asked.as_json:
        print_json({**shown, "a": set_a.to_dict(), "b": set_b.to_dict(), **result.to_dict()})
    else:
        _print_comparison(result, set_a, set_b)
    errors = _write_reports(result, set_a, set_b, asked)
    code = _gate(result)
    for line in errors:
        err.print(f"[bold red]error:[/] {safe(line)}", highlight=False)
    if errors and code == 0:
        code = 2
    if code:
        raise typer.Exit(code)


def compare_command(
    ctx: typer.Context,
    a: Annotated[str, typer.Argument(
        help="The baseline: an export file, a sweep id (or prefix) or record ids (ID,ID,...).")],
    b: Annotated[str | None, typer.Argument(
        help="The set judged against A, in the same forms (with --by: optional, more runs).")] = None,
    fail_on: Annotated[list[str] | None, typer.Option(
        "--fail-on", metavar="METRIC:LIMIT",
        help="Fail when B is worse than A by more: median|p90|mean|load|size:N%, "
             "median|p90|mean|load:Nms or accuracy:Npp; repeatable; "
             "without one: median:5%.")] = None,
    fail_on_invalid: Annotated[bool, typer.Option(
        "--fail-on-invalid", help="Also fail on every compared pair judged on an INVALID run "
                                  "(either side); by default they are counted in the verdict "
                                  "and warned about.")] = False,
    junit: Annotated[Path | None, typer.Option(
        "--junit", metavar="FILE", help="Also write the verdict as JUnit XML, one test case per "
                                        "configuration (GitLab, Jenkins); atomically.")] = None,
    markdown_file: Annotated[Path | None, typer.Option(
        "--markdown", metavar="FILE", help="Also write a Markdown summary (atomically), and "
                                           "append it to $GITHUB_STEP_SUMMARY when that is "
                                           "set.")] = None,
    by: Annotated[str | None, typer.Option(
        "--by", help="Split the runs of A (and B) on this field instead and compare its values: "
                     "via (A: shell runs, B: app runs, paired per device, model, format and "
                     "threads). Gates only with an explicit --fail-on.")] = None,
    allow_missing: Annotated[bool, typer.Option(
        "--allow-missing", help="B covers part of A on purpose: configurations of A that B has "
                                "no run of do not fail the gate. Never excuses a regression, "
                                "a not comparable run or a comparison of nothing.")] = False,
    other_artifacts: Annotated[bool, typer.Option(
        "--other-artifacts", hidden=True, help="Deprecated, does nothing: runs of another "
                                               "artifact are always compared.")] = False,
    host: OnlyHost = None,
    as_json: JsonOpt = False,
) -> None:
    """Compare result set B with baseline A: a regression gate for CI.

    A and B are each, tried in this order: a file written by
    'aiot results export --format json', a sweep id or a unique prefix of one,
    or a comma list of record ids. Runs match on host, device, model, format,
    threads, native tool, delegate, binarize, cluster, via, input shapes and
    converter options.

    A model that changed (another artifact: its code, weights or converter)
    is compared and judged like any other: each row shows both artifacts'
    sha256. A change is within noise when the medians' 95% confidence
    intervals overlap: it never fails a median check. Runs on another device,
    host or hardware are not comparable; other runtime, OS or agent versions
    are compared with a warning.

    With --by via, one set (a sweep run with --via app,shell) is compared with
    itself: the shell runs are A, the app runs B, so the change column is the
    app's delta over the shell.

    Exit codes: 0 the gate passed; 1 a threshold was crossed, an ok run of A
    failed in B, or (--fail-on-invalid) a pair was judged on an INVALID run;
    2 could not compare (a bad option, an unknown set; a report not written
    while the gate passed);
    3 B is incomplete: nothing was compared, a run of A has only a not
    comparable run in B, or runs of A are missing from B (--allow-missing:
    B covers part of A on purpose). A failing row exits 1 whatever flags
    are given. The verdict's last line counts the pairs judged on INVALID runs.
    A worked CI setup (GitHub Actions, GitLab): docs/guide/ci.md.
    """
    asked = Asked(fail_on or [], allow_missing, fail_on_invalid, junit, markdown_file, as_json)
    if other_artifacts:
        message("[dim]note:[/] --other-artifacts does nothing now: runs of another artifact "
                "are always compared")
    if by is not None:
        _compare_by(ctx, by, [n for n in (a, b) if n], asked, host)
        return
    try:
        if b is None:
            raise UsageError("compare needs two result sets, A and B", "or split one with --by via")
        checks = [parse_check(text) for text in asked.fail_on or ["median:5%"]]
        _check_outputs(ctx, asked)
        set_a, set_b = _resolve_sets(ctx, [a, b], host)
    except AiotError as exc:
        raise _could_not_compare(exc) from None
    result = compare(set_a.records, set_b.records, checks, fail_on_invalid=fail_on_invalid)
    result.allow_missing = allow_missing
    _finish(result, set_a, set_b, asked)


def _compare_by(ctx, by: str, names: list[str], asked: Asked, host: str | None = None) -> None:
    """``compare SET [SET] --by via``: the set's runs split on ``by``, A its baseline value
    (a gate, missing runs included, only with an explicit --fail-on)."""
    try:
        if by not in BY:
            raise UsageError(f"unknown --by '{by}'", f"use one of {', '.join(BY)}")
        checks = [parse_check(text) for text in asked.fail_on]
        _check_outputs(ctx, asked)
        sets = _resolve_sets(ctx, names, host)
    except AiotError as exc:
        raise _could_not_compare(exc) from None
    records = list({r.id: r for s in sets for r in s.records}.values())
    result = compare_by(records, by, checks, asked.fail_on_invalid)
    result.allow_missing, result.gated = asked.allow_missing, bool(asked.fail_on)
    field, base, other = BY[by]
    label = " + ".join(s.name for s in sets)
    set_a = replace(sets[0], name=f"{field}={base} of {label}",
                    records=[r for r in records if by_value(r, by) == base])
    set_b = replace(sets[0], name=f"{field}={other} of {label}",
                    records=[r for r in records if by_value(r, by) == other])
    _finish(result, set_a, set_b, asked, by=by)
