"""Start, list and stop this host's Ray node of an aiot lab.

A node is ``ray start --block`` in a session of its own, so ``aiot lab stop`` (and a test that
kills a node) ends exactly that node: its GCS/raylet and the workers Ray started for it.
What the node advertises is read from this host's inventory when it starts: one custom
resource per device (``aiot_device:<name>``, capacity 1, so one run per device at a time)
and labels with this host's aiot version and agent protocol, checked by the driver before
it uses the node. Devices added to the inventory later need ``lab stop`` + ``lab join``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from aiot.host.errors import AiotError, MissingDependency, UsageError

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
        from aiot.host.emulator.state import process_alive

        return process_alive(self.pid)


def ray_executable() -> str:
    """The ``ray`` CLI beside this Python (aiot[lab] installs it)."""
    found = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    if found is None:
        raise MissingDependency("Ray (the lab's engine)", "lab")
    return found


def node_labels() -> dict[str, str]:
    """What the driver checks before it uses a node: aiot's version and agent protocol."""
    import aiot
    from aiot.device_agent.protocol import PROTOCOL_VERSION

    return {"aiot-version": aiot.__version__, "aiot-protocol": str(PROTOCOL_VERSION),
            "aiot-host": socket.gethostname()}


def device_resources(names: list[str]) -> dict[str, float]:
    """Ray custom resources for this host's devices (``local`` is every host's own: never shared)."""
    return {f"{DEVICE_RESOURCE}{name}": 1.0 for name in names if name != "local"}


def lab_dir() -> Path:
    from aiot.host.emulator.state import state_dir

    return state_dir() / "lab"


def start_node(head: bool, address: str | None = None, port: int = DEFAULT_PORT,
               bind: str = "127.0.0.1") -> NodeState:
    """Start this host's node: the head (``head=True``, listening on ``bind:port``) or a
    worker joining ``address``; returns once Ray says it is up.

    Raises:
        UsageError: a node already runs here, or the address is malformed.
        AiotError: Ray did not start, with its last log line.
    """
    from aiot.host import inventory

    known = load_nodes()
    for dead in (s for s in known if not s.alive()):  # a node that was killed, not stopped
        (lab_dir() / f"node-{dead.pid}.json").unlink(missing_ok=True)
    running = [s for s in known if s.alive()]
    if running:
        raise UsageError(f"a lab node already runs on this host (pid {running[0].pid})",
                         "run: aiot lab stop")
    if not head and not address:
        raise UsageError("join needs the head's address", "aiot lab join HOST:PORT")
    if address and ":" not in address:
        raise UsageError(f"lab address '{address}' has no port", "give it as HOST:PORT, e.g. 192.168.1.10:6380")
    devices = sorted(n for n in inventory.load() if n != "local")
    argv = [ray_executable(), "start", "--block", "--disable-usage-stats",
            "--node-ip-address", bind, f"--object-store-memory={OBJECT_STORE_BYTES}",
            "--resources", json.dumps(device_resources(devices)), "--labels", json.dumps(node_labels())]
    # No dashboard: nothing listens beyond what the lab needs.
    argv += ["--head", "--port", str(port), "--include-dashboard=false"] if head else ["--address", address]
    folder = lab_dir()
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / f"node-{time.time_ns()}.log"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    state = NodeState(proc.pid, address or f"{bind}:{port}", head, devices, str(log_path))
    _wait_ready(proc, log_path)
    (folder / f"node-{proc.pid}.json").write_text(json.dumps(asdict(state)) + "\n")
    return state


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
    from aiot.host.fileio import load_states

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


__all__ = ["DEVICE_RESOURCE", "NodeState", "device_resources", "kill_session", "load_nodes", "node_labels",
           "start_node", "stop_nodes"]
