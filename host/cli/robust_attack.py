"""``aiot robust attack``: adversarial accuracy of the reference and of its deployed artifact.

Its options; the work is :func:`aiot.host.cli.robust_attack_run.run_attacks`, imported when the
command runs (NumPy, the attacks and the engine: ``--help`` imports none of them, issue 53)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from aiot.host.cli.options import Binarize, Device, JsonOpt, Opt, Weights
from aiot.host.cli.robust_options import Bits, EvalDataset, EvalLimit, Format, Model, Seed

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
    from aiot.host.cli.robust_attack_run import run_attacks

    run_attacks(ctx, {"model": model, "weights": weights, "binarize": binarize, "fmt": fmt,
                      "device": device, "opt": opt, "attacks": attacks, "eps": eps,
                      "eps_l2": eps_l2, "queries": queries, "steps": steps, "eps_curve": eps_curve,
                      "eps_curve_l2": eps_curve_l2, "source_weights": source_weights,
                      "source_binarize": source_binarize, "dataset": dataset, "limit": limit,
                      "seed": seed, "bits": bits, "as_json": as_json})


def register(app: typer.Typer) -> None:
    """Add the ``attack`` command to the ``aiot robust`` group."""
    app.command("attack")(attack)
