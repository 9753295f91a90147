"""The work of ``aiot robust corrupt`` (its options: :mod:`aiot.host.cli.robust_corrupt`)."""

from __future__ import annotations

import typer

from aiot.host.cli._output import out, spinner
from aiot.host.cli.robust_bits import corrupt_row, show_runs
from aiot.host.cli.robust_common import suite_context, suite_targets
from aiot.host.robust.corrupt.imagenet_c import parse_corruptions, parse_severities
from aiot.host.robust.corrupt.sequences import check_frames
from aiot.host.robust.corrupt.suite import CorruptConfig, compare_target, run_corrupt
from aiot.host.robust.record import run_recorded

#: Summary keys shown on the last line, with their labels.
_HEADLINE = {"clean_accuracy": "clean acc", "mNR": "mNR", "mean_G": "mean G",
             "mean_NCI": "mean NCI", "clean_agreement": "clean agreement",
             "mNR_agreement": "mNR (agreement)", "mean_G_agreement": "mean G (agreement)",
             "mean_NCI_agreement": "mean NCI (agreement)", "mFP": "mFP",
             "agreement": "agreement with PyTorch",
             "agreement_on_clean": "agreement with PyTorch on clean", "om_robust": "OM_robust"}


def _fmt(value) -> str:
    if value is None:
        return "—"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _print_table(table: dict) -> None:
    from rich.markup import escape
    from rich.table import Table

    view = Table(*table["columns"], title=escape(table["title"]))
    for row in table["rows"]:
        view.add_row(*(escape(_fmt(v)) for v in row), style="bold" if row[0] == "mean" else None)
    out.print(view)


def _print_result(result: dict, record_id: str) -> None:
    from rich.markup import escape

    for table in result["tables"]:
        _print_table(table)
    parts = [f"{label} {_fmt(result['summary'][key])}" for key, label in _HEADLINE.items()
             if key in result["summary"]]
    out.print("  ".join(parts))
    for note in result["notes"]:
        out.print(f"[dim]note: {escape(note)}[/]")
    out.print(f"record: {record_id[:8]}")


def run_corruptions(ctx: typer.Context, options: dict) -> None:
    """Corrupt the data set for every model of the command's ``options`` (by parameter name),
    score it and print or store the results."""
    targets = suite_targets(options, options["device"])
    compare_binarized = options["compare_binarized"]
    if compare_binarized:
        from aiot.models.bibench import ALGORITHMS

        compare_binarized = ALGORITHMS.canonical(compare_binarized)
    config = CorruptConfig(tuple(parse_corruptions(options["corruptions"])),
                           tuple(parse_severities(options["severities"])), options["dataset"],
                           options["limit"], options["seed"],
                           check_frames(options["frames"]) if options["with_sequences"] else None,
                           compare_binarized, options["compare_weights"])
    for target in targets:
        compare_target(target, config)  # a bad comparison fails before a record is opened
    runs = []
    for target in targets:
        result, record = _run(ctx, target, config)
        runs.append((result, record))
        if not options["as_json"]:
            _print_result(result, record.id)
    show_runs("corruptions", runs, options, corrupt_row)


def _run(ctx, target, config: CorruptConfig):
    """One recorded corruption run of ``target``: ``(result, record)``."""
    what = f"corrupting {config.dataset} for {target.label}…"
    with suite_context(ctx, target, config.dataset) as (store, workspace), spinner(what) as status:
        return run_recorded(
            store, "robust-corrupt", target, config.to_dict(),
            lambda provenance: run_corrupt(target, config, workspace, provenance, status.update))
