"""``aiot demo``: the whole pipeline on the embedded local device in a few minutes."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from aiot.host.cli._output import message, out, state
from aiot.host.cli.progress import RichRunListener
from aiot.host.cli.run_table import print_run_table
from aiot.host.cli.train import TrainProgress
from aiot.host.devices.resolve import LOCAL
from aiot.host.engine.campaign import run_sweep
from aiot.host.engine.runs import MeasureParams, expand_sweep
from aiot.host.engine.workspace import Workspace
from aiot.host.store import open_store
from aiot.host.training.record import train_and_record
from aiot.host.training.trainer import TrainConfig

DEMO_MODEL = "tiny_cnn"
DEMO_FORMATS = ("onnx", "tflite")


def thread_counts(cores: int) -> list[int]:
    """1, 2, 4, … up to ``cores`` (and ``cores`` itself when it is not a power of two)."""
    counts, t = [], 1
    while t <= cores:
        counts.append(t)
        t *= 2
    if counts[-1] != cores:
        counts.append(cores)
    return counts


def demo(
    ctx: typer.Context,
    epochs: Annotated[int, typer.Option(min=1, help="Training epochs for the demo model.")] = 2,
    limit: Annotated[int | None, typer.Option(help="Test images used for on-device accuracy (default: all 10,000).")] = None,
    min_s: Annotated[float, typer.Option(help="Timed seconds per run (at least).")] = 1.0,
    fresh: Annotated[bool, typer.Option("--fresh", help="Retrain and reconvert instead of reusing.")] = False,
) -> None:
    """Train a small CNN on Fashion-MNIST, convert to ONNX and TFLite, sweep threads here.

    Measures latency and top-1 accuracy on the embedded local device, stores every run and
    prints the table. Cached weights and artifacts are reused on later runs.
    """
    from rich.markup import escape

    results_dir = state(ctx).results_dir()
    threads = thread_counts(os.cpu_count() or 1)
    message(f"[bold]aiot demo[/] — results in {escape(str(results_dir))}")
    message(f"1/3 training {DEMO_MODEL} on Fashion-MNIST ({epochs} epochs; cached after the first time)")
    with open_store(results_dir) as store:
        with TrainProgress() as progress:
            trained, _ = train_and_record(TrainConfig(model=DEMO_MODEL, dataset="fashion-mnist", epochs=epochs),
                                          store, progress=progress, reuse=not fresh)
        message(f"    PyTorch test accuracy {trained.test_accuracy:.2%}")
        message(f"2/3 converting to {', '.join(DEMO_FORMATS)} with a parity check against PyTorch")
        message(f"3/3 measuring on '{LOCAL}' at {', '.join(map(str, threads))} thread(s), "
                "with top-1 accuracy on the Fashion-MNIST test set")
        requests = expand_sweep([LOCAL], [DEMO_MODEL], list(DEMO_FORMATS), threads,
                                weights=trained.weights_path, dataset="fashion-mnist", dataset_limit=limit,
                                params=MeasureParams(min_s=min_s))
        with RichRunListener() as listener:
            records = run_sweep(requests, Workspace(results_dir), listener)
    print_run_table(records, compact=True)
    out.print("Every row is a stored record with raw samples and provenance: "
              "`aiot results list`, `aiot results show ID`, `aiot results export --format csv`.")
    if any(r.status != "ok" for r in records):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
