"""``aiot robust corrupt``: ImageNet-C corruptions and perturbation sequences.

Its options; the work is :func:`aiot.host.cli.robust_corrupt_run.run_corruptions`, imported
when the command runs (NumPy, the corruptions and the engine: ``--help`` imports none of them,
issue 53)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from aiot.host.cli.options import Binarize, Device, JsonOpt, Opt, Weights
from aiot.host.cli.robust_options import Bits, EvalDataset, EvalLimit, Format, Model, Seed

Corruptions = Annotated[str, typer.Option(
    help="ImageNet-C corruptions: all or a comma list (gaussian_noise,fog,...).")]
Severities = Annotated[str, typer.Option(help="Severities, a comma list of 1..5.")]
Sequences = Annotated[bool, typer.Option(
    "--sequences/--no-sequences",
    help="Also measure the flip probability over perturbation sequences.")]
Frames = Annotated[int, typer.Option(help="Frames per perturbation sequence.")]
CompareBinarized = Annotated[str | None, typer.Option(
    help="Also evaluate the model binarized with this BiBench algorithm (for OM_robust).")]
CompareWeights = Annotated[Path | None, typer.Option(
    help="State-dict of the binarized twin (aiot train MODEL --binarize ALG).")]


def corrupt(
    ctx: typer.Context,
    model: Model,
    weights: Weights = None,
    binarize: Binarize = None,
    fmt: Format = None,
    device: Device = None,
    opt: Opt = None,
    corruptions: Corruptions = "all",
    severities: Severities = "1,2,3,4,5",
    dataset: EvalDataset = "fashion-mnist",
    limit: EvalLimit = 200,
    seed: Seed = 0,
    with_sequences: Sequences = True,
    frames: Frames = 16,
    compare_binarized: CompareBinarized = None,
    compare_weights: CompareWeights = None,
    bits: Bits = None,
    as_json: JsonOpt = False,
) -> None:
    """Accuracy under the 15 ImageNet-C corruptions x 5 severities, and flip probability.

    Each corrupted image set is preprocessed as the model's inputs and scored by the PyTorch
    model or, with --format, by the deployed artifact on --device (then also its agreement with
    PyTorch). Reports NR, the gap G and NCI per corruption; mNR, mean G, mean NCI, mFP; and
    OM_robust with --compare-binarized. Corrupted sets are cached.

    --dataset photos (unlabelled, many sizes): each photo is resized and centre-cropped to the
    model's input first, and every accuracy is top-1 agreement with the model's own clean
    prediction (summary keys *_agreement).

    A quantized model (tiny_cnn_lsq4) runs fake-quantized in PyTorch; --bits 2,4,8 measures
    each bit-width in turn and prints one row per width.
    """
    from aiot.host.cli.robust_corrupt_run import run_corruptions

    run_corruptions(ctx, {"model": model, "weights": weights, "binarize": binarize, "fmt": fmt,
                          "device": device, "opt": opt, "corruptions": corruptions,
                          "severities": severities, "dataset": dataset, "limit": limit,
                          "seed": seed, "with_sequences": with_sequences, "frames": frames,
                          "compare_binarized": compare_binarized,
                          "compare_weights": compare_weights, "bits": bits, "as_json": as_json})


def register(app: typer.Typer) -> None:
    """Add the ``corrupt`` command to the ``aiot robust`` group."""
    app.command("corrupt")(corrupt)
