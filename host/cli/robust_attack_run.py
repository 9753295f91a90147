"""The work of ``aiot robust attack`` (its options: :mod:`aiot.host.cli.robust_attack`)."""

from __future__ import annotations

from pathlib import Path

import typer

from aiot.core.errors import UsageError
from aiot.host.cli._output import out, spinner
from aiot.host.cli.robust_bits import attack_row, show_runs
from aiot.host.cli.robust_common import check_weights_file, suite_context, suite_targets
from aiot.host.robust.attacks.base import require
from aiot.host.robust.attacks.catalog import select_attacks
from aiot.host.robust.attacks.suite import AttackSettings, run_suite
from aiot.host.robust.data import PHOTOS
from aiot.host.robust.deployed import deployed_if_format
from aiot.host.robust.record import run_recorded


def run_attacks(ctx: typer.Context, options: dict) -> None:
    """Attack every model of the command's ``options`` (by parameter name) and print or store
    the results."""
    if options["dataset"] == PHOTOS:
        raise UsageError("the photos have no labels: attacks need them", "pass --dataset fashion-mnist or digits")
    targets = suite_targets(options, options["device"])
    chosen = select_attacks(options["attacks"])
    settings = AttackSettings(
        tuple(a.name for a in chosen), options["eps"], options["eps_l2"], options["queries"],
        options["steps"], _budgets(options["eps_curve"], "--eps-curve"),
        _budgets(options["eps_curve_l2"], "--eps-curve-l2"), options["dataset"], options["limit"],
        options["seed"], options["source_weights"],
        _source(options["source_weights"], options["source_binarize"]))
    settings.validate()
    for one in chosen:
        require(one.modules)  # before converting or deploying anything
    runs = []
    for target in targets:
        result, record = _run(ctx, target, settings)
        runs.append((result, record))
        if not options["as_json"]:
            _print(result, record)
    show_runs("attacks", runs, options, attack_row)


def _budgets(text: str | None, option: str) -> tuple[float, ...]:
    if not text:
        return ()
    try:
        return tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise UsageError(f"{option} takes comma-separated numbers, got '{text}'",
                         f"e.g. {option} 0,0.01,0.02,0.03") from None


def _source(weights: Path | None, binarize: str | None) -> str | None:
    """The source's canonical binarization algorithm, its weights checked first."""
    check_weights_file(weights, "--source-weights", "source weights")
    if binarize:
        from aiot.models.bibench import ALGORITHMS

        return ALGORITHMS.canonical(binarize)
    return None


def _run(ctx, target, settings):
    with suite_context(ctx, target, settings.dataset) as (store, workspace), spinner("preparing the attack suite…") as status:
        def work(provenance: dict) -> dict:
            if target.fmt is not None:
                status.update(f"deploying {target.label} as {target.fmt} on {target.device}…")
            with deployed_if_format(target, workspace, provenance) as deployed:
                return run_suite(target, settings, deployed, progress=status.update)

        return run_recorded(store, "robust-attack", target, settings.to_dict(), work)


def _fmt(value, digits: str = ".2%") -> str:
    return "—" if value is None else format(value, digits)


def _label(role: str) -> str:
    """The summary's key suffix for an evaluated model."""
    return "reference" if role == "reference" else "deployed"


def _print(result: dict, record) -> None:
    from rich.markup import escape
    from rich.table import Table

    data = result["tables"][0]
    roles = [c[len("accuracy ("):-1] for c in data["columns"] if c.startswith("accuracy (")]
    summary = result["summary"]
    table = Table("attack", "ε", "crafted on", *roles, "queries/image", "seconds", "median distance",
                  title=data["title"])
    table.add_row("clean", "", "", *(_fmt(summary[f"clean_{_label(r)}"]) for r in roles), "", "", "")
    for row in data["rows"]:
        cells = dict(zip(data["columns"], row))
        table.add_row(escape(cells["attack"]), f"{cells['eps']:g} ({cells['norm']})",
                      escape(cells["crafted on"]), *(_fmt(cells[f"accuracy ({r})"]) for r in roles),
                      _fmt(cells["queries per image"], ".0f"), f"{cells['seconds']:.2f}",
                      _fmt(cells["median distance"], ".3f"))
    out.print(table)
    worst = ", ".join(f"{r} {_fmt(summary.get('wcar_' + _label(r)))}" for r in roles)
    out.print(f"worst case over the attacks (WCAR): {worst}")
    for line in result["notes"]:
        out.print(f"[dim]· {escape(line)}[/]")
    out.print(f"record: {record.id[:8]}")
