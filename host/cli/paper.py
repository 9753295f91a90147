"""``aiot paper``: a paper's whole measurement procedure as one command (``aiotbench``,
``bibench``, ``robustmq``); ``aiot bench`` still works, with a notice.

Here are the commands' options; their work is in :mod:`aiot.host.cli.paper_run` and
:mod:`aiot.host.cli.robustmq_table`, imported when a command runs, so that a page's ``--help``
does not import the engine (issue 53)."""

from __future__ import annotations

from typing import Annotated

import typer

from aiot.host.cli._output import state
from aiot.host.cli.options import Devices, JsonOpt, Limit

app = typer.Typer(no_args_is_help=True,
                  help="Whole benchmark procedures from the papers (AIoTBench, BiBench, RobustMQ).")


@app.command("aiotbench")
def aiotbench_command(
    ctx: typer.Context,
    device: Devices = None,
    models: Annotated[str | None, typer.Option(
        help="Zoo models, comma-separated (default: AIoTBench's six ImageNet models).")] = None,
    dataset: Annotated[str | None, typer.Option(
        help="Labelled images for accuracy, e.g. folder:PATH of ImageNet validation images.")] = None,
    limit: Limit = None,
    threads: Annotated[int, typer.Option(min=1, help="Inference threads.")] = 1,
    min_runs: Annotated[int, typer.Option(min=1, help="Timed iterations (at least).")] = 50,
    min_s: Annotated[float, typer.Option(min=0, help="Timed seconds (at least).")] = 1.0,
    fresh: Annotated[bool, typer.Option("--fresh", help="Measure everything again instead of resuming.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """AIoTBench: its 6 models × {TFLite CPU, TFLite + NNAPI, PyTorch Mobile, Caffe2-style}.

    Reports model load time, average time per image, accuracy (with --dataset) and file size
    per device; a test a device cannot run is a skipped row with the reason.
    """
    from aiot.host.cli.paper_run import run_aiotbench

    run_aiotbench(ctx, device, models, dataset, limit, threads, min_runs, min_s, fresh, as_json)


@app.command("bibench")
def bibench_command(
    ctx: typer.Context,
    device: Devices = None,
    size: Annotated[str, typer.Option(
        help="imagenet (ResNet18/34 at 224 px, as the paper) or cifar (the 32 px variants: "
             "quick).")] = "imagenet",
    threads: Annotated[str | None, typer.Option(
        help="Thread counts (default: 1,2,4,8, and 16 where the device has 16 cores).")] = None,
    min_runs: Annotated[int, typer.Option(min=1, help="Timed iterations (at least).")] = 50,
    min_s: Annotated[float, typer.Option(min=0, help="Timed seconds (at least).")] = 1.0,
    warmup_runs: Annotated[int, typer.Option(min=0, help="Untimed iterations first.")] = 1,
    warmup_min_s: Annotated[float, typer.Option(min=0, help="Untimed seconds first (at least).")] = 0.5,
    cooldown_max_s: Annotated[float, typer.Option(
        min=0, help="Wait up to this long for the device to cool before each run (0: no gate).")] = 120.0,
    fresh: Annotated[bool, typer.Option("--fresh", help="Measure everything again instead of resuming.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """BiBench's hardware tables (17–20): ResNet18/34 and VGG-Small in FP32 TFLite, LCE BNN and
    ReActNet, daBNN FP32 and BNN (1 thread, with a daBNN benchmark_single_model configured),
    per thread count; each BNN's speed-up over FP32 and OM_infer per device, next to the
    paper's numbers where the device's SoC is one the paper measured.

    Resumable: the same command again measures only what has no ok record yet.
    """
    from aiot.host.cli.paper_run import run_bibench

    run_bibench(ctx, device, size, threads, min_runs, min_s, warmup_runs, warmup_min_s,
                cooldown_max_s, fresh, as_json)


@app.command("robustmq")
def robustmq_command(
    ctx: typer.Context,
    models: Annotated[str | None, typer.Option(
        help="Zoo models, comma-separated (default: the paper's ResNet18, ResNet50, RegNetX-600MF and "
             "MobileNetV2; their 28 px variants on Fashion-MNIST and digits).")] = None,
    methods: Annotated[str, typer.Option(help="Quantization methods: dorefa, pact, lsq.")] = "dorefa,pact,lsq",
    bits: Annotated[str, typer.Option(help="Bit-widths (2, 4, 6, 8); the FP model is the 32-bit column.")] = "2,4,6,8",
    dataset: Annotated[str, typer.Option(help="Labelled images: fashion-mnist, digits or folder:PATH.")] = "fashion-mnist",
    limit: Annotated[int, typer.Option(min=1, help="Images each suite evaluates (a seeded, class-balanced subset).")] = 200,
    suites: Annotated[str, typer.Option(help="Suites: attack, corrupt, sysnoise.")] = "attack,corrupt,sysnoise",
    attacks: Annotated[str, typer.Option(
        help="White-box attacks of the adversarial tables (WCAR is over them), e.g. fgsm,pgd,autoattack.")] = "fgsm,pgd",
    eps: Annotated[float, typer.Option(
        help="The small L-inf budget in [0, 1] pixel units (the seed's text of the paper lost its "
             "ImageNet values).")] = 0.01,
    corruptions: Annotated[str, typer.Option(help="ImageNet-C corruptions: all or a comma list.")] = "all",
    severities: Annotated[str, typer.Option(help="Corruption severities, a comma list of 1..5.")] = "1,2,3,4,5",
    frames: Annotated[int, typer.Option(min=0, help="Frames per perturbation sequence (0: no mFP).")] = 16,
    epochs: Annotated[int, typer.Option(min=1, help="Training epochs of each cell (aiot train's recipe).")] = 2,
    train_limit: Annotated[int | None, typer.Option(help="Train each cell on at most N images.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of training, the image subset and the perturbations.")] = 0,
    fresh: Annotated[bool, typer.Option("--fresh", help="Measure everything again instead of resuming.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """RobustMQ: quantized models' robustness, the paper's grid (methods × bit-widths ×
    architectures) and its tables: clean accuracy (1), WCAR (2), FGSM and PGD AR with AAI
    (3, 4), mNR/NCI (5) and per corruption (6), mFP (7) and per sequence (8), SR/SNI with
    the std (9) and per decoder and resize mode (10), the paper's ImageNet numbers beside.

    Each cell is trained first (the float model, then quantization-aware fine-tuning from it;
    cached trainings are reused) and scored fake-quantized in PyTorch. Resumable: the same
    command again runs only what has no ok record yet.
    """
    from aiot.host.cli.robustmq_table import build_grid, run_and_print

    grid = build_grid({"models": models, "methods": methods, "bits": bits, "dataset": dataset,
                       "limit": limit, "suites": suites, "attacks": attacks, "eps": eps,
                       "corruptions": corruptions, "severities": severities, "frames": frames,
                       "epochs": epochs, "train_limit": train_limit, "seed": seed})
    result = run_and_print(grid, state(ctx).results_dir(), fresh, as_json)
    if result["failures"]:
        raise typer.Exit(1)
