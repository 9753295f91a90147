"""``aiot devices``: which devices aiot can reach and what they are."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from aiot.converters import CONVERTERS
from aiot.core.errors import NoAgentPython, UnknownName, UsageError
from aiot.core.paths import cache_dir
from aiot.core.units import size_text
from aiot.host.app.runtime import check_app
from aiot.host.cli._output import message, out, print_json, safe, spinner
from aiot.host.cli.options import JsonOpt, parse_options
from aiot.host.devices import inventory, reservations
from aiot.host.devices.agent_client import AgentSession
from aiot.host.devices.doctor import diagnose
from aiot.host.devices.reachability import adb_states, ssh_state
from aiot.host.devices.resolve import ANDROID_WORKDIR, LOCAL, open_transport, resolve_name
from aiot.host.devices.setup import setup_device
from aiot.host.emulator import arm64
from aiot.host.transports.local import LocalTransport
from aiot.host.transports.ssh import fetch_host_key, fingerprint, known_hosts_path, trust_host_key

app = typer.Typer(no_args_is_help=True, help="List and probe devices.")


def _rows() -> list[dict]:
    """local + inventory + ADB-discovered devices, each with a quick state."""
    rows = [{"name": LOCAL, "transport": "local", "state": "online", "address": "this machine",
             "workdir": LocalTransport().workdir(), "labels": {}}]
    adb = adb_states()
    for entry in inventory.load().values():
        if entry.transport == "ssh":
            state, address = ssh_state(entry), f"{entry.user}@{entry.host}:{entry.port or 22}"
        else:
            state, address = adb.pop(entry.serial, "unreachable"), entry.serial
        rows.append({"name": entry.name, "transport": entry.transport, "state": state, "address": address,
                     "workdir": entry.workdir, "labels": dict(entry.labels)})
    for serial, state in adb.items():  # connected phones that are not inventoried (yet)
        rows.append({"name": serial, "transport": "adb", "state": state, "address": serial,
                     "workdir": ANDROID_WORKDIR, "labels": {}})
    return rows


@app.command("list")
def list_devices(as_json: JsonOpt = False) -> None:
    """List devices: local, the inventory, and phones the adb server sees, with their state."""
    from rich.table import Table

    rows = _rows()
    if as_json:  # JSON escapes control characters itself; the values stay as they are
        print_json(rows)
        return
    table = Table("device", "transport", "state", "address", "labels", "workdir")
    colour = {"online": "green", "unauthorized": "yellow", "offline": "yellow"}
    # Every cell is the inventory's or a device's text (adb lists what phones call themselves):
    # no escape sequence in a label or serial may act on the terminal.
    for r in rows:
        state = f"[{colour.get(r['state'], 'red')}]{safe(r['state'])}[/]"
        labels = ", ".join(f"{k}={v}" for k, v in r["labels"].items())
        table.add_row(safe(r["name"]), safe(r["transport"]), state, safe(r["address"]), safe(labels),
                      safe(r["workdir"]))
    out.print(table)


@app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="A name for the device, e.g. pi4 or pixel7.")],
    transport: Annotated[str, typer.Option(help="ssh or adb.")],
    host: Annotated[str | None, typer.Option(help="SSH host name or address.")] = None,
    port: Annotated[int | None, typer.Option(help="SSH port (default: 22).")] = None,
    user: Annotated[str | None, typer.Option(help="SSH user.")] = None,
    key: Annotated[str | None, typer.Option(help="SSH private key file (default: your ssh agent / ~/.ssh keys).")] = None,
    serial: Annotated[str | None, typer.Option(help="ADB serial (adb devices), e.g. 1A2B3C or 10.0.0.5:5555.")] = None,
    workdir: Annotated[str | None, typer.Option(help="Folder on the device for aiot's files.")] = None,
    python: Annotated[str, typer.Option(help="Python on the device that runs the agent.")] = "python3",
    label: Annotated[list[str], typer.Option("--label", help="KEY=VALUE, e.g. soc=BCM2711 (repeatable).")] = [],  # noqa: B006
    replace: Annotated[bool, typer.Option("--replace", help="Overwrite an existing entry.")] = False,
) -> None:
    """Add a device to the inventory (an SSH board or an ADB phone)."""
    default_workdir = ANDROID_WORKDIR if transport == "adb" else f"/home/{user or 'root'}/aiot"
    if user == "root" and transport == "ssh" and workdir is None:
        default_workdir = "/root/aiot"
    entry = inventory.DeviceEntry(
        name=name, transport=transport, host=host, port=port, user=user, key=key, serial=serial,
        workdir=workdir or default_workdir, python=python, labels=parse_options(label),
    )
    inventory.add(entry, replace=replace)
    hint = f"; next: aiot devices trust {name}" if transport == "ssh" else ""
    message(f"added {safe(name)} ({safe(transport)}) to {inventory.inventory_path()}{hint}")


@app.command("remove")
def remove(name: Annotated[str, typer.Argument(help="Inventory name.")]) -> None:
    """Remove a device from the inventory (its files on the device stay)."""
    inventory.remove(name)
    message(f"removed {safe(name)}")


@app.command("trust")
def trust(
    name: Annotated[str, typer.Argument(help="Inventory name of an SSH device.")],
    replace: Annotated[bool, typer.Option("--replace", help="Replace a recorded key that changed.")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
) -> None:
    """Record an SSH device's host key after showing its fingerprint."""
    entry = inventory.load().get(name)
    if entry is None:
        raise UnknownName("device", name, inventory.load())
    if entry.transport != "ssh":
        raise UsageError(f"'{name}' is an {entry.transport} device; only SSH devices have host keys")
    key = fetch_host_key(entry)
    message(f"{safe(name)} presents {safe(key.get_name())} key {fingerprint(key)}")
    if not yes and not typer.confirm("Trust this key?", err=True):
        raise typer.Exit(1)
    changed = trust_host_key(entry, key, replace=replace)
    message(f"{'trusted' if changed else 'already trusted'}: recorded in {known_hosts_path(entry)}")


@app.command("info")
def info(
    device: Annotated[str | None, typer.Argument(help="Device name (default: $AIOT_DEVICE, else the device of $ANDROID_SERIAL, else local).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Probe a device: CPU, cores and clusters, ABI, OS, memory, Python and runtimes."""
    name = resolve_name(device)
    transport = open_transport(name)
    with spinner(f"probing {name}…"):
        facts = transport.info()
        with AgentSession(transport) as agent:
            try:
                facts["agent"] = agent.hello()
            except NoAgentPython as exc:  # a phone before set-up: the probe still says what it is
                facts["agent"], facts["agent_missing"] = None, exc.one_line()
    facts["name"] = name
    if as_json:
        print_json(facts)
        return
    out.print(render_info(facts))


def render_info(facts: dict):
    """A Rich table of a device probe. Every fact came from the device: each value is passed
    through :func:`~aiot.host.cli._output.safe` (no escape sequences, no markup of its own)."""
    from rich.table import Table

    table = Table(show_header=False, title=f"device {safe(facts['name'])}")
    table.add_column(style="bold")
    table.add_column()
    clusters = ", ".join(
        f"{c['name']}: {len(c['cores'])} cores"
        + (f" @ ≤{c['max_khz'] / 1e6:.2f} GHz" if c.get("max_khz") else " (no cpufreq)")
        for c in facts.get("clusters", [])
    )
    agent = facts.get("agent") or {}
    # Markup of its own ([dim]): the device's names and versions in it are made safe here.
    internal = {c.backend for c in CONVERTERS if c.internal}  # null: aiot's test
    runtimes = ", ".join(f"{safe(k)} {safe(v)}" if v else f"{safe(k)} [dim](not importable)[/]"
                         for k, v in (agent.get("runtimes") or {}).items() if k not in internal)
    maker = " ".join(p for p in (facts.get("manufacturer"), facts.get("model")) if p)
    soc = " ".join(p for p in (facts.get("soc_manufacturer"), facts.get("soc")) if p)
    if facts.get("soc_name"):
        soc = f"{facts['soc_name']} ({soc})"
    rows = [
        ("transport", facts.get("transport")), ("model", maker if maker != facts.get("board") else None),
        ("soc", soc), ("cpu", facts.get("cpu_model")),
        ("board", facts.get("board")), ("cores", facts.get("cores")), ("clusters", clusters),
        ("abi", facts.get("abi")), ("os", f"{facts.get('os')} {facts.get('kernel')}"),
        ("distribution", facts.get("distribution")),
        ("memory", f"{facts.get('mem_total_mib')} MiB total, {facts.get('mem_available_mib')} MiB available"),
        ("thermal", thermal_summary(facts.get("thermal_zones", []))),
        ("battery", battery_summary(facts.get("power_supplies", []))),
        ("python", f"{agent['python']} ({facts.get('python_path')})" if agent
         else f"none: {facts.get('agent_missing')}"),
        ("runtimes", runtimes), ("agent", agent.get("agent_version")),
        ("agent runtime", agent.get("runtime")),
    ]
    for key, value in rows:
        if value not in (None, ""):
            table.add_row(key, value if key == "runtimes" else safe(value))
    return table


def thermal_summary(zones: list[dict]) -> str:
    """A few zones by name, or the zone count and the hottest one (phones have dozens)."""
    read = [z for z in zones if z["temp_c"] is not None]
    if len(read) <= 4:
        return ", ".join(f"{z['type'] or z['zone']} {z['temp_c']:.1f} °C" for z in read)
    hottest = max(read, key=lambda z: z["temp_c"])
    return f"{len(read)} zones, hottest {hottest['type'] or hottest['zone']} {hottest['temp_c']:.1f} °C"


def battery_summary(supplies: list[dict]) -> str:
    """Charge, status and temperature of each battery (USB and mains supplies are left out)."""
    parts = []
    for s in supplies:
        if (s["type"] or "").lower() != "battery":
            continue
        bits = [f"{s['capacity_pct']}%" if s["capacity_pct"] is not None else None, s["status"],
                f"{s['temp_c']:.1f} °C" if s["temp_c"] is not None else None]
        parts.append(f"{s['name']}: " + ", ".join(b for b in bits if b))
    return "; ".join(parts)


@app.command("doctor")
def doctor(
    device: Annotated[str | None, typer.Argument(help="Device name (default: $AIOT_DEVICE, else the device of $ANDROID_SERIAL, else local).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check that a device can run benchmarks: reachable, workdir, free space, Python, runtimes.

    Each failed check says how to fix it; the exit code is 1 when any check failed.
    """
    name = resolve_name(device)
    transport = open_transport(name)
    try:
        with spinner(f"checking {name}…"):
            checks = diagnose(transport, phone_extras=(check_app,))
    finally:
        transport.close()
    failed = [c for c in checks if not c.ok]
    if as_json:
        print_json({"name": name, "ok": not failed,
                    "checks": [{**dataclasses.asdict(c), "status": c.status} for c in checks]})
    else:
        out.print(render_checks(name, checks))
        message(f"{safe(name)}: {len(failed)} of {len(checks)} checks failed" if failed
                else f"{safe(name)}: all checks passed")
    if failed:
        raise typer.Exit(1)


def render_checks(name: str, checks: list):
    """A Rich table of doctor checks: status, what was found, and the fix."""
    from rich.table import Table

    table = Table("check", "status", "detail", "fix", title=f"doctor {safe(name)}")
    marks = {"ok": "[green]ok[/]", "warn": "[yellow]warn[/]", "fail": "[bold red]fail[/]"}
    for c in checks:  # details quote the device (its paths, its errors)
        table.add_row(c.name, marks[c.status], safe(c.detail), safe(c.fix or ""))
    return table


@app.command("setup")
def setup(
    device: Annotated[str | None, typer.Argument(help="Device name (default: $AIOT_DEVICE, else the device of $ANDROID_SERIAL, else local).")] = None,
    with_runtimes: Annotated[str | None, typer.Option(
        "--with", help="Optional runtimes, comma-separated: torch (PyTorch Mobile .ptl), "
                       "executorch (.pte); aarch64.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Install the agent's runtimes (numpy, onnxruntime, ai-edge-litert) on a device from this host.

    A board: wheels matching its Python, CPU and glibc are downloaded here and pushed, so the
    board needs no internet. An aarch64 Android phone (no Python): aiot's own runtime (glibc,
    CPython and the runtimes, started through its own loader) is pushed once.
    """
    name = resolve_name(device)
    transport = open_transport(name)
    try:
        with spinner(f"setting up {name}…") as status:
            extras = tuple(w.strip() for w in (with_runtimes or "").split(",") if w.strip())
            summary = setup_device(transport, cache_dir(), on_step=lambda step: status.update(f"{name}: {step}…"),
                                   extras=extras, userland=arm64.ensure_userland)
    finally:
        transport.close()
    if as_json:
        print_json(summary)
        return
    if "runtime" in summary:  # a phone: aiot's own runtime, not wheels for its Python
        message(f"{name}: {summary['runtime']} {summary['runtime_sha256'][:16]} ready at "
                f"{summary['site']} ({size_text(summary['tree_bytes'])}; "
                f"{size_text(summary['pushed_bytes'])} sent); the agent runs on it")
        return
    message(f"{name}: installed {', '.join(summary['requirements'])} into {summary['site']} "
            f"({len(summary['wheels'])} wheels, {size_text(summary['sent_bytes'])} sent)")


@app.command("reserve")
def reserve(
    name: Annotated[str, typer.Argument(help="Device name (inventory name, or local).")],
    duration: Annotated[str, typer.Option("--for", help="How long: 2h, 30m, 1d.")] = "2h",
    note: Annotated[str, typer.Option(help="Why, for the others (shown in aiot lab view).")] = "",
) -> None:
    """Reserve a device: other users' sweeps on it are refused until the time is up."""
    held = reservations.reserve(reservations.check_device(name), reservations.parse_duration(duration), note)
    message(f"reserved {safe(name)} for {held.user} until {held.until}")


@app.command("release")
def release(
    name: Annotated[str, typer.Argument(help="Device name.")],
    force: Annotated[bool, typer.Option("--force", help="Release another user's reservation.")] = False,
) -> None:
    """End a device's reservation (yours, or anyone's with --force)."""
    held = reservations.release(reservations.check_device(name), force=force)
    message(f"released {safe(name)} (held by {held.user})" if held else f"{safe(name)} was not reserved")
