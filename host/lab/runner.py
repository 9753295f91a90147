"""The node's side of a lab sweep: one Ray actor per device, on the node that owns it.

:class:`DeviceRunner` holds a :class:`~aiot.host.engine.workspace.Workspace` of the node (its inventory,
transports, agent session, cool-down baseline) and measures one run at a time exactly as a
local campaign worker does (:func:`aiot.host.engine.executor.measure_run`). It converts nothing:
the driver sends the artifact's bytes through Ray's object store, and the runner checks
their sha256 before it writes them into the node's cache (content-addressed, so the node's
push cache still sends 0 bytes to the device for an artifact it has). It never touches a
store: it returns the record's columns and provenance, and raises what failed.
"""

from __future__ import annotations

import hashlib
import socket

import aiot
from aiot.core.errors import AiotError, is_transient
from aiot.core.fileio import write_bytes_atomic
from aiot.core.paths import cache_dir, results_dir
from aiot.device_agent.protocol import PROTOCOL_VERSION
from aiot.host.devices import inventory
from aiot.host.engine.executor import measure_run
from aiot.host.engine.runs import NullListener
from aiot.host.engine.user_artifact import UserArtifact
from aiot.host.engine.workspace import Workspace


class ShipmentError(AiotError):
    """The artifact the driver sent arrived with other bytes than it hashed."""


class DeviceRunner:
    """Measures ``device``'s runs on this node (a Ray actor; see :func:`actor_class`)."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.root = cache_dir() / "lab-artifacts"
        self.workspace = Workspace(results_dir())

    def facts(self) -> dict:
        """This node as records and the driver's checks name it."""
        import ray

        return {"node_id": ray.get_runtime_context().get_node_id(), "hostname": socket.gethostname(),
                "aiot_version": aiot.__version__, "protocol": PROTOCOL_VERSION,
                "has_device": self.device in inventory.load()}

    def device_info(self, agent: bool) -> dict:
        return self.workspace.device_info(self.device, agent=agent)

    def measure(self, request, artifact: dict, cooldown, *blobs: bytes) -> dict:
        """Measure ``request`` with the shipped artifact.

        Returns ``{"columns", "provenance"}``, or ``{"error": {type, message, hint, transient}}``:
        failures travel as data, since an exception class need not rebuild on the driver.
        """
        provenance: dict = {"lab": {k: v for k, v in self.facts().items() if k in ("node_id", "hostname")}}
        try:
            self.workspace.shipped = self._unpack(artifact, blobs)
            columns = measure_run(request, self.workspace, NullListener(), provenance, cooldown)
        except Exception as exc:  # noqa: BLE001 - every failure is the run's record
            message = exc.message if isinstance(exc, AiotError) else f"{type(exc).__name__}: {exc}"
            return {"error": {"type": type(exc).__name__, "message": message,
                              "hint": getattr(exc, "hint", None), "transient": is_transient(exc)}}
        finally:
            self.workspace.shipped = None
        return {"columns": columns, "provenance": provenance}

    def forget(self) -> None:
        """Drop the device's session and transport: the next run reconnects."""
        self.workspace.forget(self.device)

    def close(self) -> None:
        self.workspace.close()

    def _unpack(self, artifact: dict, blobs: tuple[bytes, ...]):
        """The shipped files in this node's cache, checked against the driver's hash."""
        folder = self.root / artifact["sha256"]
        paths = [folder / name for name in artifact["files"]]
        main = paths[0]
        if not main.exists() or _sha256(main.read_bytes()) != artifact["sha256"]:
            folder.mkdir(parents=True, exist_ok=True)
            if _sha256(blobs[0]) != artifact["sha256"]:
                raise ShipmentError(f"{artifact['files'][0]} arrived on {socket.gethostname()} with other "
                                    "bytes than the driver sent", "run the sweep again")
            for path, blob in zip(paths, blobs, strict=True):
                write_bytes_atomic(path, blob)
        conv = UserArtifact(main, artifact["sha256"], artifact["size_bytes"], artifact["parity"])
        return conv, artifact["sidecar"]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def actor_class():
    """:class:`DeviceRunner` as a Ray actor class (built on first use: Ray is optional)."""
    import ray

    return ray.remote(num_cpus=0, max_restarts=0, max_concurrency=2)(DeviceRunner)


__all__ = ["DeviceRunner", "ShipmentError", "actor_class"]

