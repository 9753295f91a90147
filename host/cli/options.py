"""The CLI's shared options and parsers: one definition each, for every command that takes it.

An option whose meaning differs between commands has a name of its own (``Device``: the device a
command works on; ``OnlyDevice``: a filter over stored runs). Options only one command group
takes stay in its module.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from aiot.core.errors import UsageError

DEFAULT_DEVICE = "$AIOT_DEVICE, else the device of $ANDROID_SERIAL, else local"

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]

Device = Annotated[str | None, typer.Option(
    "--device", "-d", help=f"Device name (default: {DEFAULT_DEVICE}).")]
Devices = Annotated[str | None, typer.Option(
    "--device", "-d", help=f"Devices, comma-separated (default: {DEFAULT_DEVICE}).")]
OnlyDevice = Annotated[str | None, typer.Option(
    "--device", "-d", help="Only runs on this device.")]
OnlyModel = Annotated[str | None, typer.Option("--model", "-m", help="Only runs of this model.")]
OnlyHost = Annotated[str | None, typer.Option(
    "--host", help="Only runs driven by this host: its host id, as the host column and "
                   "'results show' name it ($AIOT_HOST_ID, else the host name and 6 hex digits).")]

Weights = Annotated[Path | None, typer.Option(
    help="State-dict file to load, as aiot train writes (default: the newest aiot train of the "
         "model on --dataset, else its packaged weights, else a seeded random init).")]
Binarize = Annotated[str | None, typer.Option(
    help="Binarize the model with a BiBench algorithm (bnn, xnor, dorefa, bireal, xnorpp, "
         "reactnet, recu, fda) first; --weights are then the binarized model's "
         "(aiot train --binarize ALG).")]
Quantize = Annotated[str | None, typer.Option(
    help="Quantize the model with a RobustMQ method at a bit-width, METHOD:BITS: dorefa, pact or "
         "lsq at 2, 4, 6 or 8 bits (e.g. lsq:4); first and last layers stay full precision.")]
Algorithms = Annotated[str | None, typer.Option(
    "--binarize", "-b", help="Algorithm, comma list or all.", show_default="all eight")]
Opt = Annotated[list[str] | None, typer.Option(
    "--opt", help="Converter option KEY=VALUE (repeatable), e.g. --opt quant=int8 for the int8 "
                  "TFLite artifact.")]

# Accuracy beside latency (aiot run, sweep, push, paper aiotbench).
Dataset = Annotated[str | None, typer.Option(
    help="Also measure top-1 accuracy on this dataset's test split (fashion-mnist, digits, "
         "folder:PATH).")]
Limit = Annotated[int | None, typer.Option(help="Use at most this many test images for accuracy.")]


def parse_options(pairs: list[str] | None) -> dict[str, str]:
    """``["quant=fp32", ...]`` → dict; a malformed pair is a UsageError."""
    options = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"option '{pair}' is not KEY=VALUE", "e.g. --opt opset=17")
        options[key.strip()] = value.strip()
    return options


def split_list(value: str, what: str) -> list[str]:
    """``"a,b"`` → ``["a", "b"]`` with blanks dropped; empty → UsageError."""
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise UsageError(f"no {what} given")
    return items


MAX_THREADS = 1024  # more than any device's cores; larger counts are typos (or overflow the store)


def parse_threads(value: str) -> list[int]:
    """``"1,2,4,8"`` → ``[1, 2, 4, 8]``, repeats dropped (a sweep measures each count once)."""
    try:
        threads = [int(v) for v in split_list(value, "thread counts")]
    except ValueError:
        raise UsageError(f"thread counts must be integers, got '{value}'",
                         "e.g. --threads 1,2,4") from None
    wrong = [t for t in threads if not 1 <= t <= MAX_THREADS]
    if wrong:
        raise UsageError(f"thread count {wrong[0]} is out of range: it must be 1 to {MAX_THREADS}",
                         "e.g. --threads 1,2,4")
    return list(dict.fromkeys(threads))


def parse_algorithms(value: str | None) -> list[str]:
    """Canonical BiBench algorithm names from ``all``, one name or a comma list (None: all).

    Raises:
        UnknownName: an unknown algorithm (with close names).
        UsageError: an empty list.
    """
    from aiot.models.bibench import ALGORITHMS  # the binarized layers: torch

    if value is None or value.strip().lower() == "all":
        return ALGORITHMS.names()
    names = [part.strip() for part in value.split(",") if part.strip()]
    if not names:
        raise UsageError("--binarize got no algorithm",
                         f"use all or some of: {', '.join(ALGORITHMS.names())}")
    return list(dict.fromkeys(ALGORITHMS.canonical(name) for name in names))


def check_seconds(options: dict[str, float | None]) -> None:
    """Refuse, in one line, a timing option (``{"--min-s": value}``) that is not a finite
    number of seconds ≥ 0: ``inf`` never ends a wait and ``nan`` passes every comparison."""
    for option, value in options.items():
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise UsageError(f"{option} must be a finite number of seconds ≥ 0, got {value}",
                             f"e.g. {option} 30")
