"""``aiot emulator``: emulated devices for trying aiot without hardware, and for CI."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from aiot.host.cli._output import message, out, print_json, spinner
from aiot.host.cli.options import JsonOpt
from aiot.host.emulator import manager

app = typer.Typer(no_args_is_help=True, help="Start, list and stop emulated ADB / SSH devices.")


@app.command("start")
def start(
    kind: Annotated[str, typer.Argument(help="ssh (a private sshd) or adb (a device-side adbd).")],
    name: Annotated[str | None, typer.Option(help="Device name (default: emu-KIND-N).")] = None,
    arch: Annotated[str | None, typer.Option(
        help="x86_64 or arm64 (default: this machine's). arm64 on x86_64 runs the device's Python under "
             "qemu-user: real outputs, meaningless timings.")] = None,
    with_runtimes: Annotated[str | None, typer.Option(
        "--with", help="Optional runtimes for an arm64 userland, comma-separated: torch (PyTorch "
                       "Mobile .ptl; CPU torch 2.10.0, the newest aarch64 CPU build on PyPI), "
                       "executorch (.pte; ExecuTorch 1.1.0, the newest on that torch).")] = None,
    profile: Annotated[str, typer.Option(
        help="linux (a board with Python) or android: an ADB arm64 phone with a toybox-like shell, "
             "getprop and /data/local/tmp, and no Python (set it up with aiot devices setup NAME).")] = "linux",
    props: Annotated[Path | None, typer.Option(
        help="With --profile android: another phone's 'adb shell getprop' dump to answer with "
             "(default: a Snapdragon 8 Gen 2 phone).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Start an emulated device on 127.0.0.1 in the background and add it to the inventory."""
    with spinner(f"starting emulated {kind} device…") as status:
        extras = tuple(w.strip() for w in (with_runtimes or "").split(",") if w.strip())
        state = manager.start(kind, name=name, arch=arch, on_step=lambda step: status.update(f"{step}…"),
                              extras=extras, profile=profile, props=props)
    profile = state.extra.get("profile", "linux")
    if as_json:
        print_json({"name": state.name, "kind": state.kind, "arch": state.arch, "profile": profile,
                    "port": state.port, "pid": state.pid})
        return
    if profile == "android":
        message(f"started {state.name} (Android phone, {state.arch}) on 127.0.0.1:{state.port}; it has "
                f"no Python: run aiot devices setup {state.name}")
        return
    message(f"started {state.name} ({state.kind}, {state.arch}) on 127.0.0.1:{state.port}; "
            f"try: aiot devices info {state.name}")


@app.command("list")
def list_emulators(as_json: JsonOpt = False) -> None:
    """List emulated devices and whether their servers still run."""
    from rich.table import Table

    rows = manager.running()
    if as_json:
        print_json(rows)
        return
    table = Table("name", "kind", "arch", "profile", "port", "pid", "state")
    for r in rows:
        colour = "green" if r["state"] == "running" else "red"
        table.add_row(r["name"], r["kind"], r["arch"], r["profile"], str(r["port"]), str(r["pid"]),
                      f"[{colour}]{r['state']}[/]")
    out.print(table)


@app.command("stop")
def stop(name: Annotated[str, typer.Argument(help="Emulator name.")]) -> None:
    """Stop an emulated device and remove it from the inventory."""
    state = manager.stop(name)
    port = state.extra.get("adb_server_stopped")
    message(f"stopped {name}" + (f", and the adb server aiot started for it (port {port}): no "
                                 "other emulator or device uses it" if port else ""))
