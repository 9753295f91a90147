"""``aiot devices``: which devices aiot can reach and what they are."""

from __future__ import annotations

from typing import Annotated

import typer

app = typer.Typer(no_args_is_help=True, help="List and probe devices.")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]


@app.command("list")
def list_devices(as_json: JsonOpt = False) -> None:
    """List the devices aiot can reach (the embedded `local` device is always there)."""
    from rich.table import Table

    from aiot.host.cli._output import out, print_json
    from aiot.host.devices import known_devices, open_transport

    rows = []
    for name in known_devices():
        transport = open_transport(name)
        rows.append({"name": name, "transport": transport.kind, "state": "online",
                     "workdir": transport.workdir()})
    if as_json:
        print_json(rows)
        return
    table = Table("device", "transport", "state", "workdir")
    for row in rows:
        table.add_row(row["name"], row["transport"], f"[green]{row['state']}[/]", row["workdir"])
    out.print(table)


@app.command("info")
def info(
    device: Annotated[str | None, typer.Argument(help="Device name [default: $AIOT_DEVICE or local].")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Probe a device: CPU, cores and clusters, ABI, OS, memory, Python and runtimes."""
    from aiot.host.agent_client import AgentSession
    from aiot.host.cli._output import out, print_json, spinner
    from aiot.host.devices import open_transport, resolve_name

    name = resolve_name(device)
    transport = open_transport(name)
    with spinner(f"probing {name}…"):
        facts = transport.info()
        with AgentSession(transport) as agent:
            facts["agent"] = agent.hello()
    facts["name"] = name
    if as_json:
        print_json(facts)
        return
    out.print(render_info(facts))


def render_info(facts: dict):
    """A Rich table of a device probe."""
    from rich.table import Table

    table = Table(show_header=False, title=f"device {facts['name']}")
    table.add_column(style="bold")
    table.add_column()
    clusters = ", ".join(
        f"{c['name']}: {len(c['cores'])} cores"
        + (f" @ ≤{c['max_khz'] / 1e6:.2f} GHz" if c.get("max_khz") else " (no cpufreq)")
        for c in facts.get("clusters", [])
    )
    runtimes = ", ".join(f"{k} {v}" if v else f"{k} [dim](not importable)[/]"
                         for k, v in facts["agent"]["runtimes"].items())
    rows = [
        ("transport", facts.get("transport")), ("cpu", facts.get("cpu_model")),
        ("board", facts.get("board")), ("cores", facts.get("cores")), ("clusters", clusters),
        ("abi", facts.get("abi")), ("os", f"{facts.get('os')} {facts.get('kernel')}"),
        ("distribution", facts.get("distribution")),
        ("memory", f"{facts.get('mem_total_mib')} MiB total, {facts.get('mem_available_mib')} MiB available"),
        ("python", f"{facts['agent']['python']} ({facts.get('python_path')})"),
        ("runtimes", runtimes), ("agent", facts["agent"]["agent_version"]),
    ]
    for key, value in rows:
        if value not in (None, ""):
            table.add_row(key, str(value))
    return table
