"""``aiot robust attack``: adversarial accuracy of the reference and of its deployed artifact."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from aiot.core.errors import UsageError
from aiot.host.cli._output import out, print_json, spinner
from aiot.host.cli.options import Binarize, Device, JsonOpt, Opt, Weights
from aiot.host.cli.robust_bits import Bits, attack_row, bit_models, print_sweep
from aiot.host.cli.robust_common import (
    EvalDataset,
    EvalLimit,
    Format,
    Model,
    Seed,
    check_weights_file,
    make_target,
    suite_context,
)
from aiot.host.robust.attacks.base import require
from aiot.host.robust.attacks.catalog import select_attacks
from aiot.host.robust.attacks.suite import AttackSettings, run_suite
from aiot.host.robust.data import PHOTOS
from aiot.host.robust.deployed import deployed_if_format
from aiot.host.robust.record import run_recorded

Attacks = Annotated[str, typer.Option(
    help="Comma-separated attacks or groups: fgsm, pgd, pgd-l2, cw, deepfool, autoattack, sinifgsm, spsa, "
         "square, nattack, boundary, hsj, evolutionary | all | white-box | transfer | black-box.")]
Eps = Annotated[float, typer.Option(help="L∞ budget in [0, 1] pixel units (ARBiBench: 0.03).")]
EpsL2 = Annotated[float, typer.Option("--eps-l2", help="L2 budget in [0, 1] pixel units (ARBiBench: 0.5).")]
Queries = Annotated[int | None, typer.Option(
    help="Per-image query budget of every black-box attack (default: ARBiBench's 10,000; Square 5,000).")]
Steps = Annotated[int | None, typer.Option(
    help="Iterations of iterative white-box attacks (PGD 20, C&W 100, DeepFool 50, AutoAttack 100, "
         "SI-NI-FGSM 10; default: each attack's own).")]
Curve = Annotated[str | None, typer.Option(
    "--eps-curve", help="L∞ budgets for the accuracy-vs-ε curve, e.g. 0,0.01,0.02,0.03,0.05 "
                        "(every L∞ attack runs again per budget, black-box ones with their full query budget).")]
CurveL2 = Annotated[str | None, typer.Option(
    "--eps-curve-l2", help="L2 budgets for the curve of L2 attacks, e.g. 0,0.25,0.5,1 (PGD L2 runs again "
                           "per budget; minimum-norm attacks are only re-scored).")]
SourceWeights = Annotated[Path | None, typer.Option(
    help="Transfer source: other weights of the same model (e.g. FP32 when the target is a BNN).")]
SourceBinarize = Annotated[str | None, typer.Option(help="BiBench algorithm the source weights belong to.")]


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


def attack(
    ctx: typer.Context,
    model: Model,
    weights: Weights = None,
    binarize: Binarize = None,
    fmt: Format = None,
    device: Device = None,
    opt: Opt = None,
    attacks: Attacks = "white-box",
    eps: Eps = 0.03,
    eps_l2: EpsL2 = 0.5,
    queries: Queries = None,
    steps: Steps = None,
    eps_curve: Curve = None,
    eps_curve_l2: CurveL2 = None,
    source_weights: SourceWeights = None,
    source_binarize: SourceBinarize = None,
    dataset: EvalDataset = "fashion-mnist",
    limit: EvalLimit = 100,
    seed: Seed = 0,
    bits: Bits = None,
    as_json: JsonOpt = False,
) -> None:
    """White-box, transfer and black-box attacks; accuracy on the reference and the deployment.

    A quantized model (tiny_cnn_lsq4) is attacked fake-quantized in PyTorch (its rounding
    passes gradients straight through); --bits 2,4,8 attacks each bit-width in turn."""
    if dataset == PHOTOS:
        raise UsageError("the photos have no labels: attacks need them", "pass --dataset fashion-mnist or digits")
    targets = [make_target(m, weights, binarize, fmt, device, opt, dataset)
               for m in bit_models(model, bits, weights)]
    chosen = select_attacks(attacks)
    settings = AttackSettings(tuple(a.name for a in chosen), eps, eps_l2, queries, steps,
                              _budgets(eps_curve, "--eps-curve"), _budgets(eps_curve_l2, "--eps-curve-l2"),
                              dataset, limit, seed, source_weights, _source(source_weights, source_binarize))
    settings.validate()
    for one in chosen:
        require(one.modules)  # before converting or deploying anything
    runs = []
    for target in targets:
        result, record = _run(ctx, target, settings)
        runs.append((result, record))
        if not as_json:
            _print(result, record)
    if as_json:
        shown = [{**result, "record": record.id} for result, record in runs]
        print_json(shown[0] if bits is None else {"sweep": shown})
    elif bits is not None:
        print_sweep("attacks", runs, attack_row)


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


def register(app: typer.Typer) -> None:
    """Add the ``attack`` command to the ``aiot robust`` group."""
    app.command("attack")(attack)
