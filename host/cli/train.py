"""``aiot train``: real weights for a zoo model on a real dataset."""

from __future__ import annotations

from typing import Annotated

import typer

from aiot.host.cli._output import err, message, out, print_json, progress_enabled, state
from aiot.host.cli.options import JsonOpt, Quantize
from aiot.host.store import open_store
from aiot.host.training.record import train_and_record
from aiot.host.training.trainer import TrainConfig
from aiot.models.quant.deploy import DEPLOY_FORMATS, deployment_refusal
from aiot.models.quant.methods import parse_quantize


class TrainProgress:
    """A Rich bar per phase (train / eval) on stderr; plain lines without a terminal."""

    def __init__(self) -> None:
        self._progress = None
        self._tasks: dict[str, int] = {}
        if progress_enabled():
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TimeRemainingColumn(), console=err, transient=True)

    def __enter__(self):
        if self._progress:
            self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._progress:
            self._progress.stop()

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self._progress:
            return
        if phase not in self._tasks:
            self._tasks[phase] = self._progress.add_task(phase, total=total)
        self._progress.update(self._tasks[phase], completed=done, total=total)


def train(
    ctx: typer.Context,
    model: Annotated[str, typer.Argument(help="Zoo model name, e.g. tiny_cnn or resnet18_mnist.")],
    dataset: Annotated[str, typer.Option(help="fashion-mnist, digits or folder:PATH.")] = "fashion-mnist",
    epochs: Annotated[int, typer.Option(min=1, help="Training epochs.")] = 2,
    batch_size: Annotated[int, typer.Option(min=1, help="Mini-batch size.")] = 128,
    lr: Annotated[float, typer.Option(help="Adam learning rate (cosine schedule).")] = 1e-3,
    limit: Annotated[int | None, typer.Option(help="Use at most N training images.")] = None,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    binarize: Annotated[str | None, typer.Option(
        help="Binarize with a BiBench algorithm: bnn, xnor, dorefa, bireal, xnorpp, reactnet, recu, fda.")] = None,
    quantize: Quantize = None,
    from_scratch: Annotated[bool, typer.Option(
        "--from-scratch", help="Binarized and quantized models: start from random weights instead of fine-tuning "
                               "the full-precision model trained with the same recipe.")] = False,
    fresh: Annotated[bool, typer.Option("--fresh", help="Retrain even if cached weights exist.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Train a zoo model (Adam, cosine schedule) and store the weights and a train record."""
    from rich.markup import escape

    from aiot.models import get_model_spec  # the zoo: torch
    from aiot.models.datasets import DATASETS

    spec = get_model_spec(model)
    if not dataset.startswith("folder:"):
        DATASETS.get(dataset)
    config = TrainConfig(model=spec.name, dataset=dataset, epochs=epochs, batch_size=batch_size,
                         lr=lr, seed=seed, limit=limit, binarize=binarize,
                         init="scratch" if from_scratch else "fp", quantize=quantize)
    config.validate()
    label, ref = _names(spec.name, binarize, config.quantization())
    message(f"training {label} on {dataset} for {epochs} epoch(s)…")
    with open_store(state(ctx).results_dir()) as store, TrainProgress() as progress:
        result, record = train_and_record(config, store, progress=progress, reuse=not fresh)
    if as_json:
        print_json(record.to_dict())
        return
    how = "reused cached weights" if result.cached else f"trained in {result.seconds:.1f} s"
    use = (f"  run, sweep and robust use them by default (the newest training): aiot run "
           f"--model {escape(ref)} --dataset {escape(dataset)}")
    if quantize:
        refused = deployment_refusal(parse_quantize(quantize))
        use = (f"  {escape(ref)}: aiot models info {escape(ref)}; robustness (these weights by "
               f"default): aiot robust attack -m {escape(ref)} --dataset {escape(dataset)}; " + (
                   f"not deployed: {escape(refused)}" if refused else
                   f"deployed as int8 ({', '.join(DEPLOY_FORMATS)}): aiot run --model {escape(ref)} "
                   f"-f {DEPLOY_FORMATS[0]} --dataset {escape(dataset)}"))
    out.print(f"[green]✓[/] {escape(label)}: test accuracy {result.test_accuracy:.2%} ({how})\n"
              f"  weights: {escape(str(result.weights_path))}\n  record: {record.id[:8]}\n{use}")


def _names(model: str, binarize: str | None, quantization) -> tuple[str, str]:
    """What the user reads (``tiny_cnn quantized with LSQ 4-bit``) and what ``--model`` takes
    (``tiny_cnn_lsq4``) for the model being trained."""
    if binarize:
        from aiot.models.bibench import get_algorithm

        algorithm = get_algorithm(binarize)
        return f"{model} binarized with {algorithm.title}", f"{model}_{algorithm.name}"
    if quantization:
        return f"{model} quantized with {quantization.title()}", f"{model}_{quantization.suffix}"
    return model, model


def register(app: typer.Typer) -> None:
    app.command("train")(train)
