"""The options every ``aiot robust`` suite takes beside the shared ones of
:mod:`aiot.host.cli.options`: kept apart from the suites' work (:mod:`aiot.host.cli.robust_common`,
NumPy and the engine) so that a suite's ``--help`` imports neither (issue 53)."""

from __future__ import annotations

from typing import Annotated

import typer

Model = Annotated[str, typer.Option("--model", "-m", help="Zoo model name (resnet18, or resnet18_bnn for a binarized one).")]
Format = Annotated[str | None, typer.Option(
    "--format", "-f", help="Also evaluate this deployed artifact format on --device (default: PyTorch only).")]
EvalDataset = Annotated[str, typer.Option(help="Test images: fashion-mnist, digits, folder:PATH (labelled) or photos (unlabelled: agreement metrics only).")]
EvalLimit = Annotated[int, typer.Option(help="Images to evaluate (a seeded, class-balanced subset).")]
Seed = Annotated[int, typer.Option(help="Seed of the image subset and of random perturbations.")]
Bits = Annotated[str | None, typer.Option(
    "--bits", help="Sweep a quantized model's bit-width, e.g. -m tiny_cnn_lsq4 --bits 2,4,8: one run "
                   "and record per width, then one table row per width.")]
