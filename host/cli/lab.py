"""``aiot lab``: a lab of several hosts on Ray, each node owning the devices of its inventory."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated

import typer

from aiot.core import environment
from aiot.core.errors import UsageError
from aiot.host.cli._output import message, out, print_json, safe, spinner, state
from aiot.host.cli.options import JsonOpt
from aiot.host.lab.node import load_nodes, start_node, stop_nodes
from aiot.host.lab.security import check_bind, read_token, token_path
from aiot.host.lab.session import connect, lab_nodes

app = typer.Typer(no_args_is_help=True, help="A lab of several hosts: start, join, list and stop Ray nodes.")

TokenOpt = Annotated[Path | None, typer.Option(
    "--token", help="A copy of the head's token file (kept in this host's aiot state for later "
                    "commands); default: $AIOT_LAB_TOKEN_FILE, else the one this host has.")]


@app.command("start")
def start(
    head: Annotated[bool, typer.Option("--head", help="Start the lab's head node on this host.")] = False,
    port: Annotated[int, typer.Option(help="Port the head listens on.")] = 6380,
    bind: Annotated[str, typer.Option(
        help="Address this node listens on: loopback by default; the lab network's address (never "
             "0.0.0.0 unless you mean it) for other hosts to join.")] = "127.0.0.1",
    as_json: JsonOpt = False,
) -> None:
    """Start the head node; it advertises this host's devices (its inventory) to the lab."""
    if not head:
        raise UsageError("lab start starts the head node", "run: aiot lab start --head  (others: aiot lab join HOST:PORT)")
    _started(_start_node(head=True, port=port, bind=bind), as_json)


@app.command("join")
def join(
    address: Annotated[str, typer.Argument(help="The head's HOST:PORT.")],
    bind: Annotated[str, typer.Option(help="This host's address on the lab network.")] = "127.0.0.1",
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Join the lab at ADDRESS with this host's devices (its inventory) and the lab's token."""
    _started(_start_node(head=False, address=address, bind=bind, token=token), as_json)


def _start_node(**kwargs):
    with spinner("starting the lab node…"):
        return start_node(**kwargs)


def _started(state, as_json: bool) -> None:
    if as_json:
        print_json({"pid": state.pid, "address": state.address, "head": state.head, "devices": state.devices,
                    "token": str(token_path())})
        return
    devices = ", ".join(state.devices) or "no devices (add some with aiot devices add, then restart the node)"
    role = "head" if state.head else "node"
    message(f"lab {role} at {safe(state.address)} serves: {safe(devices)}")
    if state.head:
        message(f"the lab's token is {token_path()} (keep it secret): copy it to each other host, then "
                f"aiot lab join {state.address} --token FILE; sweeps: aiot sweep --lab {state.address} …")


@app.command("status")
def status(
    address: Annotated[str | None, typer.Option(
        help="The lab's HOST:PORT (default: $AIOT_LAB, else the node this host started).")] = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Nodes of the lab, their devices and each device's state (online, busy, offline)."""
    from rich.table import Table

    connect(lab_address(address), token)
    rows = []
    for node in lab_nodes():
        for device in node.devices or ("—",):
            state = "offline" if not node.alive else "busy" if device in node.busy else "online"
            rows.append({"node": node.node_id[:12], "host": node.hostname, "address": node.address,
                         "alive": node.alive,
                         "aiot": node.aiot_version, "device": None if device == "—" else device,
                         "state": state if device != "—" else None, "refused": node.compatible()})
    if as_json:
        print_json(rows)
        return
    table = Table("node", "host", "aiot", "device", "state")
    for r in rows:  # names, versions and devices as each node said them: no escape sequence acts
        colour = {"online": "green", "busy": "yellow"}.get(r["state"], "red")
        aiot = safe(r["aiot"]) + (" [red](differs)[/]" if r["refused"] else "")
        table.add_row(safe(r["node"]), safe(r["host"] or "?"), aiot, safe(r["device"] or "—"),
                      f"[{colour}]{r['state']}[/]" if r["state"] else ("alive" if r["alive"] else "[red]dead[/]"))
    out.print(table)


@app.command("stop")
def stop() -> None:
    """Stop the lab node(s) this host started (the head ends the lab)."""
    stopped = stop_nodes()
    message(f"stopped {len(stopped)} lab node(s)" if stopped else "no lab node runs on this host")


def lab_address(given: str | None) -> str:
    """``--lab``/``--address`` > ``$AIOT_LAB`` > the head or node this host started."""

    if given:
        return given
    if environment.get("AIOT_LAB"):
        return environment.get("AIOT_LAB")
    nodes = load_nodes()
    for state in nodes:
        if state.alive():
            return state.address
    if nodes:
        raise UsageError(f"the lab node this host started ({nodes[0].address}) is no longer running",
                         "start it again (aiot lab start --head, or aiot lab join HOST:PORT), or give --lab "
                         "HOST:PORT")
    raise UsageError("no lab address", "give --lab HOST:PORT, set AIOT_LAB, or start one: aiot lab start --head")


@app.command("view")
def view(
    ctx: typer.Context,
    port: Annotated[int, typer.Option(help="Port the view listens on.")] = 8470,
    bind: Annotated[str, typer.Option(
        help="Address it listens on: loopback by default (reach it over an SSH tunnel); another "
             "address exposes it to that network, still behind the token.")] = "127.0.0.1",
    token: Annotated[Path | None, typer.Option(
        "--token", help="A token file to log in with (default: the lab's token on this host, else a "
                        "new random one, printed once).")] = None,
    every: Annotated[float, typer.Option(help="Seconds between the live pages' polls.")] = 3.0,
    lab: Annotated[str | None, typer.Option(
        help="The lab's HOST:PORT whose nodes' devices to show (default: $AIOT_LAB, else the node "
             "this host started, else none: this host's devices only).")] = None,
    lab_token: Annotated[Path | None, typer.Option(help="The lab's token file for --lab (default: as "
                                                        "aiot lab status finds it).")] = None,
    session_idle_s: Annotated[float, typer.Option(
        envvar="AIOT_VIEW_SESSION_IDLE_S", help="Seconds a browser's login lasts without a request.")] = 1800.0,
    session_max_s: Annotated[float, typer.Option(
        envvar="AIOT_VIEW_SESSION_MAX_S", help="Seconds a browser's login lasts at most.")] = 43200.0,
    client_timeout_s: Annotated[float, typer.Option(
        envvar="AIOT_VIEW_CLIENT_TIMEOUT_S",
        help="Seconds a client has to send a request's headers, and its body (then it is dropped).")] = 10.0,
    allow_host: Annotated[list[str] | None, typer.Option(
        "--allow-host", help="Another HOST:PORT the view answers as (a tunnel's other local port; "
                             "it answers as its address, and as localhost when it binds loopback). "
                             "Repeat for more.")] = None,
) -> None:
    """The lab in a browser: devices, campaigns, results and reservations, live."""
    bind = check_bind(bind)
    try:
        from aiot.host.labview import server
    except ImportError as exc:
        raise UsageError(f"aiot lab view needs the view extra ({exc.name} is missing)",
                         "pip install 'aiot[view]'") from None
    for option, value in (("--session-idle-s", session_idle_s), ("--session-max-s", session_max_s),
                          ("--client-timeout-s", client_timeout_s)):
        try:
            server.check_seconds(value, option)
        except ValueError as exc:
            raise UsageError(str(exc), f"give {option} a number of seconds, e.g. 600") from None
    for name in allow_host or ():
        try:
            server.guard.split_host(name, port)
        except ValueError:
            raise UsageError(f"--allow-host {name!r} is not HOST or HOST:PORT",
                             "give e.g. --allow-host localhost:9000") from None
    given = token or (token_path() if read_token(token_path()) else None)
    secret = read_token(given) if given is not None else server.new_token()
    if not secret:
        raise UsageError(f"token file {given} is empty", "give a file holding the token")
    server.check_listen(bind, port)
    joined = server.join_lab(lab, lab_token)
    host = f"[{bind}]" if ":" in bind else bind
    if not ipaddress.ip_address(bind).is_loopback:
        message(f"[yellow]the view listens on {bind}: anyone there who holds the token sees the lab and "
                "may reserve its devices[/]")
    if joined:
        message(f"showing the devices of the lab at {safe(joined)} and of this host")
    config = server.ViewConfig(state(ctx).results_dir(), secret, every, bind=bind, port=port,
                               idle_s=session_idle_s, absolute_s=session_max_s,
                               client_timeout_s=client_timeout_s, allow_hosts=tuple(allow_host or ()))
    message(f"lab view at http://{host}:{port}/ (Ctrl-C stops it)")
    if given is not None:
        message(f"log in with the token in {given} and your name (at http://{host}:{port}/login)")
    else:  # the fragment never reaches a server or its log; the page takes it and forgets it
        message(f"log in with your name (once per browser): http://{host}:{port}/login#{secret}")
    message(config.sessions_line())
    server.serve(config)
