"""``aiot robust corrupt``: ImageNet-C corruptions and perturbation sequences."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from aiot.host.cli._output import out, print_json, spinner
from aiot.host.cli.options import Binarize, Device, JsonOpt, Opt, Weights
from aiot.host.cli.robust_bits import Bits, bit_models, corrupt_row, print_sweep
from aiot.host.cli.robust_common import (
    EvalDataset,
    EvalLimit,
    Format,
    Model,
    Seed,
    make_target,
    suite_context,
)
from aiot.host.robust.corrupt.imagenet_c import parse_corruptions, parse_severities
from aiot.host.robust.corrupt.sequences import check_frames
from aiot.host.robust.corrupt.suite import CorruptConfig, compare_target, run_corrupt
from aiot.host.robust.record import run_recorded

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
    targets = [make_target(m, weights, binarize, fmt, device, opt, dataset)
               for m in bit_models(model, bits, weights)]
    if compare_binarized:
        from aiot.models.bibench import ALGORITHMS

        compare_binarized = ALGORITHMS.canonical(compare_binarized)
    config = CorruptConfig(tuple(parse_corruptions(corruptions)),
                           tuple(parse_severities(severities)), dataset, limit, seed,
                           check_frames(frames) if with_sequences else None,
                           compare_binarized, compare_weights)
    for target in targets:
        compare_target(target, config)  # a bad comparison fails before a record is opened
    runs = []
    for target in targets:
        result, record = _run(ctx, target, config)
        runs.append((result, record))
        if not as_json:
            _print_result(result, record.id)
    if as_json:
        shown = [{"record": record.id, **result} for result, record in runs]
        print_json(shown[0] if bits is None else {"sweep": shown})
    elif bits is not None:
        print_sweep("corruptions", runs, corrupt_row)


def _run(ctx, target, config: CorruptConfig):
    """One recorded corruption run of ``target``: ``(result, record)``."""
    what = f"corrupting {config.dataset} for {target.label}…"
    with suite_context(ctx, target, config.dataset) as (store, workspace), spinner(what) as status:
        return run_recorded(
            store, "robust-corrupt", target, config.to_dict(),
            lambda provenance: run_corrupt(target, config, workspace, provenance, status.update))


def register(app: typer.Typer) -> None:
    """Add the ``corrupt`` command to the ``aiot robust`` group."""
    app.command("corrupt")(corrupt)
