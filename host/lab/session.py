"""The driver's side of a lab sweep: which node owns which device, and a campaign workspace
per device whose runs are measured on that node.

The campaign engine (:func:`aiot.host.engine.campaign.run_campaign`) is unchanged: its worker for a
device gets a :class:`LabDevice` instead of a local workspace. The driver converts each
artifact once, ships its bytes through Ray's object store (once per content hash), and
writes every record itself (pending before, ok/failed after), so resume, ``--fresh``,
retries and "device lost" work as for local devices. A node that dies makes its devices'
runs fail as transient ``node lost`` failures: after the retry policy the campaign records
their remaining runs as skipped, and rerunning the command after the node rejoins does them.
Nothing but device names, requests, artifacts and results crosses the wire: transports and
credentials stay on the node that owns the device.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from aiot.converters import get_converter
from aiot.converters.naming import artifact_files
from aiot.core.errors import AiotError, TransportError, UsageError, first_line
from aiot.host.engine.executor import _convert
from aiot.host.engine.workspace import Workspace
from aiot.host.lab import security
from aiot.host.lab.node import DEVICE_RESOURCE, node_labels, ray_available
from aiot.host.lab.reach import check_head, stderr_captured, token_refused
from aiot.host.lab.runner import actor_class

log = logging.getLogger(__name__)

#: Seconds a node may take to start a device's runner (a Python worker importing aiot).
RUNNER_START_S = 120.0
#: Seconds the driver waits for the node's answer when it cannot reach it any more.
FORGET_S = 10.0


class NodeLost(TransportError):
    """The lab node owning a device died or left the lab (transient: the campaign retries)."""


class RemoteFailure(AiotError):
    """A run failed on its node; carries the node's error type and transience."""

    def __init__(self, message: str, hint: str | None, remote_type: str, transient: bool) -> None:
        super().__init__(message, hint)
        self.remote_type, self.transient = remote_type, transient


@dataclass(frozen=True)
class LabNode:
    """One node of the lab as Ray reports it."""

    node_id: str
    alive: bool
    address: str
    hostname: str | None
    aiot_version: str | None
    protocol: str | None
    devices: tuple[str, ...]
    busy: tuple[str, ...] = ()

    def compatible(self) -> str | None:
        """Why the driver refuses this node (version or protocol differs), or None."""
        mine = node_labels()
        if self.aiot_version != mine["aiot-version"] or self.protocol != mine["aiot-protocol"]:
            return (f"lab node {self.hostname or self.address} runs aiot {self.aiot_version} (agent protocol "
                    f"{self.protocol}); this driver runs {mine['aiot-version']} (protocol {mine['aiot-protocol']})")
        return None


def connect(address: str, token: Path | None = None) -> None:
    """Join the lab at ``address`` as a driver (idempotent), with the lab's token.

    The head is checked first (:func:`aiot.host.lab.reach.check_head`): no head, a silent
    port or a refused token is one line within seconds, not Ray's minutes of retries.

    Raises:
        TransportError: nothing answers at ``address``, or the lab refused this driver.
        UsageError: this host has no token for the lab.
    """
    ray_available()
    if "ray" in sys.modules and sys.modules["ray"].is_initialized():
        return
    check_head(address, token, driver=True)
    import ray

    with stderr_captured() as said, _own_sigterm_handler():
        try:
            ray.init(address=address, namespace="aiot", logging_level=logging.ERROR, log_to_driver=False,
                     configure_logging=False)
            if token is not None:
                security.keep_token(token)
            return
        except (ConnectionError, RuntimeError, ValueError) as exc:
            failure = first_line(str(exc), 200)
    if "InvalidAuthToken" in said[0] or "Unauthenticated" in said[0]:
        raise token_refused(address)
    raise TransportError(f"the lab at {address} did not answer as a Ray head: {failure}",
                         "check the address: the head prints it (aiot lab start --head)")


@contextlib.contextmanager
def _own_sigterm_handler():
    """Keep this process's SIGTERM handler: ``ray.init`` replaces it with ``sys.exit``, which
    would end a sweep without marking its unfinished records (aiot treats SIGTERM as Ctrl-C)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def lab_nodes() -> list[LabNode]:
    """Every node Ray knows, alive or dead, with the devices it advertises."""
    import ray

    available = ray.available_resources()
    nodes = []
    for raw in ray.nodes():
        labels = raw.get("Labels") or {}
        devices = tuple(sorted(k[len(DEVICE_RESOURCE):] for k in raw.get("Resources", {})
                               if k.startswith(DEVICE_RESOURCE)))
        busy = tuple(d for d in devices if raw.get("Alive") and available.get(DEVICE_RESOURCE + d, 0) < 1)
        nodes.append(LabNode(raw["NodeID"], bool(raw.get("Alive")), raw.get("NodeManagerAddress", "?"),
                             labels.get("aiot-host"), labels.get("aiot-version"), labels.get("aiot-protocol"),
                             devices, busy))
    return nodes


def owner(device: str, nodes: list[LabNode] | None = None) -> LabNode | None:
    """The live node that owns ``device``, or None."""
    for node in nodes if nodes is not None else lab_nodes():
        if node.alive and device in node.devices:
            return node
    return None


class LabSession:
    """A driver's connection to the lab: checks, shipped artifacts, and one runner actor per
    device for the session's life (a runner's start, a Python worker importing aiot, is paid
    once per device, not per campaign)."""

    def __init__(self, address: str, token: Path | None = None) -> None:
        connect(address, token)
        self.address = address
        self._shipped: dict[str, tuple[dict, list]] = {}
        self._runners: dict[str, object] = {}

    def check_devices(self, devices: list[str]) -> None:
        """Every device is owned by a live node whose aiot and agent protocol match the driver's.

        Raises:
            UsageError: naming the device no node owns, or the node that differs.
        """
        nodes = lab_nodes()
        for device in devices:
            node = owner(device, nodes)
            if node is None:
                known = sorted({d for n in nodes if n.alive for d in n.devices})
                raise UsageError(f"no live node of the lab at {self.address} owns device '{device}'",
                                 f"lab devices: {', '.join(known) or 'none'}; add it to a node's inventory "
                                 "and restart that node (aiot lab stop; aiot lab join …)")
            why = node.compatible()
            if why:
                raise UsageError(why, "install the same aiot on every lab host, then restart its node")

    def workspace(self, device: str, results_dir: Path) -> LabDevice:
        """The campaign's workspace for ``device`` (see :class:`LabDevice`)."""
        return LabDevice(self, device, results_dir)

    def ship(self, conv, sidecar: dict, fmt: str) -> tuple[dict, list]:
        """The artifact's description and object refs of its files (put once per hash)."""
        import ray

        if conv.sha256 not in self._shipped:
            files = artifact_files(get_converter(fmt), Path(conv.artifact))
            meta = {"sha256": conv.sha256, "files": [f.name for f in files], "size_bytes": conv.size_bytes,
                    "parity": conv.parity, "sidecar": sidecar}
            self._shipped[conv.sha256] = (meta, [ray.put(f.read_bytes()) for f in files])
        return self._shipped[conv.sha256]

    def runner(self, device: str):
        """``device``'s runner actor, started on its owner node on first use."""
        import ray

        if device in self._runners:
            return self._runners[device]
        node = owner(device)
        if node is None:
            raise NodeLost(f"node lost: no live lab node owns '{device}'",
                           "rerun the same command once its node has rejoined (aiot lab join)")
        runner = actor_class().options(resources={DEVICE_RESOURCE + device: 1}).remote(device)
        try:
            facts = _await_start(runner, device)
        except (ray.exceptions.RayActorError, TimeoutError) as exc:
            ray.kill(runner)
            raise NodeLost(f"node lost: {node.hostname or node.address} did not start a runner for "
                           f"'{device}' ({exc or type(exc).__name__})", "check the node: aiot lab status") from None
        if not facts["has_device"]:
            ray.kill(runner)
            raise UsageError(f"lab node {facts['hostname']} advertises '{device}' but its inventory "
                             "no longer has it", "restart that node: aiot lab stop; aiot lab join …")
        log.info("%s: measured on lab node %s (%s)", device, facts["hostname"], facts["node_id"][:8])
        self._runners[device] = runner
        return runner

    def started(self, device: str):
        """``device``'s runner if one was started, else None (nothing is started)."""
        return self._runners.get(device)

    def drop(self, device: str) -> None:
        """End ``device``'s runner (its node may be gone); the next use starts a new one."""
        import ray

        runner = self._runners.pop(device, None)
        if runner is None:
            return
        try:
            ray.get(runner.close.remote(), timeout=FORGET_S)
        except Exception:  # best effort: it may be dead already
            log.debug("closing the runner of %s failed", device, exc_info=True)
        ray.kill(runner)

    def close(self) -> None:
        """End every runner (their devices' resources free up) and forget shipped artifacts."""
        for device in list(self._runners):
            self.drop(device)
        self._shipped.clear()


def _await_start(runner, device: str) -> dict:
    """A new runner's facts; gives up early when the node owning ``device`` leaves the lab
    meanwhile (an actor waiting for a dead node's resource would wait forever)."""
    import ray

    ref = runner.facts.remote()
    deadline = time.monotonic() + RUNNER_START_S
    while time.monotonic() < deadline:
        ready, _ = ray.wait([ref], timeout=2.0)
        if ready:
            return ray.get(ref)
        if owner(device) is None:
            raise TimeoutError("its node left the lab")
    raise TimeoutError(f"no answer in {RUNNER_START_S:.0f} s")


class LabDevice:
    """The campaign's workspace for one lab device: converts here, measures on the owner node."""

    def __init__(self, session: LabSession, device: str, results_dir: Path) -> None:
        self.session, self.device = session, device
        self.local = Workspace(results_dir)  # conversions and their cache stay on the driver

    def measure(self, request, workspace, listener, provenance: dict, cooldown=None) -> dict:
        """:func:`aiot.host.engine.executor.measure_run` on the node; fills ``provenance``."""
        import ray

        conv, sidecar = _convert(request, self.local, listener)
        meta, refs = self.session.ship(conv, sidecar, request.format)
        runner = self.session.runner(self.device)
        listener.on_stage(request, "measure")
        try:
            outcome = ray.get(runner.measure.remote(request, meta, cooldown, *refs))
        except ray.exceptions.RayActorError as exc:
            self.session.drop(self.device)
            raise NodeLost(f"node lost: the node owning '{self.device}' died ({type(exc).__name__})",
                           "rerun the same command once the node has rejoined") from None
        if "error" in outcome:
            error = outcome["error"]
            raise RemoteFailure(error["message"], error.get("hint"), error["type"], error["transient"])
        provenance.update(outcome["provenance"])
        return outcome["columns"]

    def device_info(self, device: str, agent: bool = True) -> dict:
        import ray

        return ray.get(self.session.runner(device).device_info.remote(agent))

    def forget(self, device: str) -> None:
        """Drop the node's connection to the device (a retry reconnects); a dead runner is dropped."""
        import ray

        runner = self.session.started(device)
        if runner is None:
            return
        try:
            ray.get(runner.forget.remote(), timeout=FORGET_S)
        except Exception:  # noqa: BLE001 - the runner or its node is gone: start a new one
            self.session.drop(device)

    def close(self) -> None:
        """The campaign is done with this device: its runner stays with the session."""
        self.local.close()


__all__ = ["LabDevice", "LabNode", "LabSession", "NodeLost", "RemoteFailure", "connect", "lab_nodes", "owner"]
