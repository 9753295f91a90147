"""``aiot robust sysnoise``: system noise of the deployment pipeline (SysNoise, RobustMQ).

Its options; the work is :func:`aiot.host.cli.robust_sysnoise_run.run_sysnoise`, imported when
the command runs (NumPy, the decoders and the engine: ``--help`` imports none of them, issue 53)."""

from __future__ import annotations

from typing import Annotated

import typer

from aiot.host.cli.options import Binarize, JsonOpt, Opt, Weights
from aiot.host.cli.robust_options import Bits, EvalDataset, EvalLimit, Format, Model, Seed

Devices = Annotated[list[str] | None, typer.Option(
    "--device", "-d", help="Device(s) for precision and platform: repeatable or a comma list "
                           "(default: $AIOT_DEVICE, else the device of $ANDROID_SERIAL, else local).")]
Types = Annotated[str | None, typer.Option(
    "--types", "-t", help="Noise types, comma list: decoder, resize, colour, precision, variants, "
                          "platform (default: all).")]


def sysnoise(
    ctx: typer.Context,
    model: Model,
    weights: Weights = None,
    binarize: Binarize = None,
    fmt: Format = None,
    device: Devices = None,
    opt: Opt = None,
    types: Types = None,
    dataset: EvalDataset = "fashion-mnist",
    limit: EvalLimit = 500,
    seed: Seed = 0,
    bits: Bits = None,
    as_json: JsonOpt = False,
) -> None:
    """Accuracy drop (dACC) and top-1 flip rate when one step of the deployment pipeline changes.

    Decoders (PyAV/FFmpeg, libjpeg-turbo fast modes, pylibjpeg, kornia-rs vs Pillow), resize
    methods (Pillow's 6, OpenCV's 5; down and up), RGB -> NV12 -> RGB, FP16/INT8 artifacts vs
    FP32, max-pool ceil_mode and upsampling variants, and the same artifact on each --device.
    Labelled images are re-encoded as JPEG at a camera size; --dataset photos (unlabelled, for
    efficientnet_lite0) gives flip rate and top-1 agreement only. A quantized model
    (tiny_cnn_lsq4) runs fake-quantized in PyTorch; --bits 2,4,8 measures each bit-width in
    turn and prints one row per width.
    """
    from aiot.host.cli.robust_sysnoise_run import run_sysnoise

    run_sysnoise(ctx, {"model": model, "weights": weights, "binarize": binarize, "fmt": fmt,
                       "device": device, "opt": opt, "types": types, "dataset": dataset,
                       "limit": limit, "seed": seed, "bits": bits, "as_json": as_json})


def register(app: typer.Typer) -> None:
    """Add the ``sysnoise`` command to the ``aiot robust`` group."""
    app.command("sysnoise")(sysnoise)
