"""``aiot toolchains``: the isolated environments some converters and runtimes need."""

from __future__ import annotations

from typing import Annotated

import typer

from aiot.core import toolchains
from aiot.host.cli._output import message, out, print_json, spinner
from aiot.host.cli.options import JsonOpt

app = typer.Typer(no_args_is_help=True,
                  help="List, install and remove isolated toolchain environments (e.g. lce).")


@app.command("list")
def list_toolchains(as_json: JsonOpt = False) -> None:
    """Known toolchains, their pinned requirements and whether they are installed."""
    from rich.table import Table

    rows = toolchains.listing()
    if as_json:
        print_json(rows)
        return
    table = Table("name", "installed", "requirements", "purpose")
    for r in rows:
        mark = "[green]yes[/]" if r["installed"] else f"[yellow]no[/] (aiot toolchains install {r['name']})"
        table.add_row(r["name"], mark, " ".join(r["requirements"]), r["purpose"])
    out.print(table)


@app.command("install")
def install(name: Annotated[str, typer.Argument(help="Toolchain name (see aiot toolchains list).")]) -> None:
    """Create a toolchain's environment (downloads its packages; a no-op when installed)."""
    name = toolchains.check_name(name)
    with spinner(f"installing the {name} toolchain…") as status:
        marker = toolchains.install(name, progress=lambda step: status.update(f"{step}…"))
    versions = ", ".join(f"{k} {v}" for k, v in marker.get("versions", {}).items())
    message(f"{name} toolchain ready ({versions})")


@app.command("remove")
def remove(name: Annotated[str, typer.Argument(help="Toolchain name.")]) -> None:
    """Delete a toolchain's environment."""
    name = toolchains.check_name(name)
    message(f"removed the {name} toolchain" if toolchains.remove(name) else f"{name} was not installed")
