"""Start, list and stop this host's Ray node of an aiot lab.

A node is ``ray start --block`` in a session of its own, so ``aiot lab stop`` (and a test that
kills a node) ends exactly that node: its GCS/raylet and the workers Ray started for it.
What the node advertises is read from this host's inventory when it starts: one custom
resource per device (``aiot_device:<name>``, capacity 1, so one run per device at a time)
and labels with this host's aiot version and agent protocol, checked by the driver before
it uses the node. Devices added to the inventory later need ``lab stop`` + ``lab join``.
Every node listens on its ``--bind`` address only and requires the lab's token
(:mod:`.security`); ``ray start`` runs through :mod:`.launch`, which keeps loopback as given.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import aiot
from aiot.core.errors import AiotError, MissingDependency, UsageError
from aiot.core.fileio import load_states
from aiot.device_agent.protocol import PROTOCOL_VERSION
from aiot.host.devices import inventory
from aiot.host.emulator.state import process_alive
from aiot.host.lab import reach, security

DEVICE_RESOURCE = "aiot_device:"
DEFAULT_PORT = 6380
#: Ray's object store per node: artifacts and results only, so little is needed, and a
#: machine hosting two test nodes must not hand half its memory to /dev/shm.
OBJECT_STORE_BYTES = 200 * 1024 * 1024
READY_S = 90.0


@dataclass
class NodeState:
    """A node this host started (``<state>/lab/node-<pid>.json``)."""

    pid: int
    address: str  # the head's host:port
    head: bool
    devices: list[str]
    log: str

    def alive(self) -> bool:
        return process_alive(self.pid)


def node_labels() -> dict[str, str]:
    """What the driver checks before it uses a node: aiot's version and agent protocol."""
    return {"aiot-version": aiot.__version__, "aiot-protocol": str(PROTOCOL_VERSION),
            "aiot-host": socket.gethostname()}


def device_resources(names: list[str]) -> dict[str, float]:
    """Ray custom resources for this host's devices (``local`` is every host's own: never shared)."""
    return {f"{DEVICE_RESOURCE}{name}": 1.0 for name in names if name != "local"}


def lab_dir() -> Path:
    """Where this host keeps its nodes' state, logs and the lab's token."""
    return security.lab_state_dir()


def start_node(head: bool, address: str | None = None, port: int = DEFAULT_PORT,
               bind: str = "127.0.0.1", token: Path | None = None) -> NodeState:
    """Start this host's node: the head (``head=True``, listening on ``bind:port``) or a
    worker joining ``address``; returns once Ray says it is up.

    Every Ray process of the node listens on ``bind`` only and requires the lab's token
    (:mod:`.security`): the head creates it in this host's state, a joining node reads
    ``token`` (a copy of the head's file, kept here) or the one this host already has.

    Raises:
        UsageError: a node already runs here, the address is malformed, or there is no token.
        AiotError: Ray did not start, with its last log line.
    """
    known = load_nodes()
    for dead in (s for s in known if not s.alive()):  # a node that was killed, not stopped
        (lab_dir() / f"node-{dead.pid}.json").unlink(missing_ok=True)
    running = [s for s in known if s.alive()]
    if running:
        raise UsageError(f"a lab node already runs on this host (pid {running[0].pid})",
                         "run: aiot lab stop")
    if not head and not address:
        raise UsageError("join needs the head's address", "aiot lab join HOST:PORT")
    if address:
        reach.split_address(address)
    bind = security.check_bind(bind)
    ray_available()
    base = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}  # before check_head sets a driver's variables
    if head:
        check_port(bind, port)  # one line naming the port, not Ray's "Last connection error: None"
        secret = security.create_token()
    else:  # one line within seconds, rather than Ray's minutes, for no head or a wrong token
        reach.check_head(address, token)
        secret = security.keep_token(token)
    env = security.node_env(base, secret, bind)
    devices = sorted(n for n in inventory.load() if n != "local")
    argv = [sys.executable, "-m", "aiot.host.lab.launch", "start", "--block", "--disable-usage-stats",
            f"--object-store-memory={OBJECT_STORE_BYTES}",
            "--resources", json.dumps(device_resources(devices)), "--labels", json.dumps(node_labels())]
    if not security.is_wildcard(bind):
        argv += ["--node-ip-address", bind]
    # No dashboard (aiot uses none of it); its host is the chosen address should Ray start parts of it.
    argv += (["--head", "--port", str(port), "--include-dashboard=false", "--dashboard-host", bind] if head
             else ["--address", address])
    folder = security.lab_state_dir()
    log_path = folder / f"node-{time.time_ns()}.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    state = NodeState(proc.pid, address or f"{_host_for_address(bind)}:{port}", head, devices, str(log_path))
    try:
        _wait_ready(proc, log_path)
    except AiotError:
        if head:  # taken meanwhile (another head started at the same moment): say so, not Ray's words
            check_port(bind, port)
        raise
    (folder / f"node-{proc.pid}.json").write_text(json.dumps(asdict(state)) + "\n")
    return state


def check_port(bind: str, port: int) -> None:
    """Nothing, if a head could listen on ``bind:port`` (a test bind, released at once).

    Raises:
        UsageError: the port is in use (another lab head, or another program), ``bind`` is no
            address of this host, or the port needs privileges this account has not.
    """
    exc = trial_bind(bind, port)
    if exc is None:
        return
    if exc.errno == errno.EADDRINUSE:
        raise UsageError(f"port {port} on {_host_for_address(bind)} is already in use: another lab "
                         "head or another program listens there",
                         f"start the head on another port (aiot lab start --head --port N), or stop "
                         f"what listens on {port} (a lab head of this host: aiot lab stop)") from None
    if exc.errno == errno.EADDRNOTAVAIL:
        raise UsageError(f"--bind {bind} is not an address of this host",
                         "give one of this host's addresses (ip addr), or 127.0.0.1") from None
    if exc.errno == errno.EACCES:
        raise UsageError(f"port {port} needs privileges this account has not",
                         "use a port above 1023, e.g. --port 6380") from None
    raise exc


def trial_bind(bind: str, port: int) -> OSError | None:
    """Bind ``bind:port`` and release it at once: None where a server could listen there, else
    the bind's error."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as trial:
        # As servers do (Ray's included): a closed connection's TIME_WAIT does not hold the
        # port, a listening socket does.
        trial.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            trial.bind((bind, port))
        except OSError as exc:
            return exc
    return None


def _host_for_address(bind: str) -> str:
    """How others reach the head: its bind address (this host's name for the wildcard)."""
    if security.is_wildcard(bind):
        return socket.gethostname()
    return f"[{bind}]" if ":" in bind else bind


def ray_available() -> None:
    """Raises MissingDependency unless Ray (aiot[lab]) is installed."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise MissingDependency("Ray (the lab's engine)", "lab")


def _wait_ready(proc: subprocess.Popen, log_path: Path) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        if "will now block forever" in text:
            return
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    kill_session(proc.pid)
    lines = [line for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    raise AiotError(f"the Ray node did not start: {(lines or ['no output'])[-1][-200:]}",
                    f"see {log_path}")


def load_nodes() -> list[NodeState]:
    """Nodes this host started (alive or not)."""
    return load_states(sorted(lab_dir().glob("node-*.json")), NodeState)


def stop_nodes() -> list[NodeState]:
    """Stop every node this host started; returns them."""
    stopped = []
    for state in load_nodes():
        kill_session(state.pid)
        (lab_dir() / f"node-{state.pid}.json").unlink(missing_ok=True)
        stopped.append(state)
    return stopped


def kill_session(sid: int, grace_s: float = 5.0) -> None:
    """End every process of session ``sid`` (the node's ``ray start`` and all it started:
    Ray's workers leave its process group but not its session)."""
    members = _session_members(sid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in members:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and (members := _session_members(sid)):
            time.sleep(0.1)
        if not members:
            return


def _session_members(sid: int) -> list[int]:
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) > 3 and int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids


__all__ = ["DEVICE_RESOURCE", "NodeState", "check_port", "device_resources", "kill_session", "load_nodes",
           "node_labels", "ray_available", "start_node", "stop_nodes"]
