"""``aiot convert``: PyTorch model → on-device artifact with sidecar and parity report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from aiot.host.errors import UsageError


def parse_options(pairs: list[str]) -> dict[str, str]:
    """``["quant=fp32", ...]`` → dict; a malformed pair is a UsageError."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"option '{pair}' is not KEY=VALUE", "e.g. --opt opset=17")
        options[key.strip()] = value.strip()
    return options


def _print_format_table(as_json: bool) -> None:
    from rich.table import Table

    from aiot.converters import format_table
    from aiot.host.cli._output import out, print_json

    rows = format_table()
    if as_json:
        print_json(rows)
        return
    table = Table("format", "file", "runs on", "available", "description")
    for r in rows:
        status = "[green]yes[/]" if r["available"] else f"[red]no[/] — {r['reason']}" + (
            f" (pip install 'aiot[{r['extra']}]')" if r.get("extra") else "")
        table.add_row(r["name"], r["extension"], r["backend"] or "emit-only", status, r["description"])
    out.print(table)


def convert(
    model: Annotated[str | None, typer.Argument(help="Zoo model name, e.g. resnet18.")] = None,
    fmt: Annotated[str | None, typer.Option("--format", "-f", help="Artifact format (see --list).")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Output folder [default: <results>/artifacts].")] = None,
    weights: Annotated[Path | None, typer.Option(help="State-dict file to load (default: random init).")] = None,
    opt: Annotated[list[str], typer.Option("--opt", help="Converter option KEY=VALUE (repeatable).")] = [],  # noqa: B006 - Typer needs a literal default
    list_formats: Annotated[bool, typer.Option("--list", help="List formats and their availability.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")] = False,
    ctx: typer.Context = None,
) -> None:
    """Convert a zoo model into an artifact, check parity with PyTorch and write a sidecar."""
    if list_formats:
        _print_format_table(as_json)
        return
    if not model or not fmt:
        raise UsageError("convert needs a MODEL and --format", "e.g. aiot convert resnet18 --format tflite")
    from rich.markup import escape

    from aiot.converters.api import convert_model
    from aiot.host.cli._output import out, print_json, spinner, state

    out_dir = out_dir or state(ctx).results_dir() / "artifacts"
    with spinner(f"converting {model} to {fmt}…"):
        res = convert_model(model, fmt, out_dir, weights=weights, options=parse_options(opt))
    report = {
        "artifact": str(res.artifact), "sidecar": str(res.sidecar), "sha256": res.sha256,
        "size_bytes": res.size_bytes, "seconds": res.seconds, "cached": res.cached, "parity": res.parity,
    }
    if as_json:
        print_json(report)
        return
    p = res.parity
    out.print(f"[green]✓[/] {escape(str(res.artifact))} ({res.size_bytes / 1e6:.2f} MB"
              f"{', cached' if res.cached else f', {res.seconds:.1f} s'})")
    out.print(f"  parity vs PyTorch on {p['n']} inputs: max abs {p['max_abs']:.2e} (tol {p['atol']:.0e}), "
              f"max rel {p['max_rel']:.2e}, top-1 agreement {p['top1_agreement']:.0%}")


def register(app: typer.Typer) -> None:
    app.command("convert")(convert)
