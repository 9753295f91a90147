"""A deployed artifact on a device, as a :class:`~aiot.host.robust.predictor.Predictor`.

``open_deployed`` converts the target (or reuses the cached artifact, whose parity with
PyTorch was checked at conversion), pushes it, and answers ``predict`` calls by running the
agent's ``predict`` command on the device.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np

from aiot.host.errors import UsageError
from aiot.host.robust.target import Target

log = logging.getLogger(__name__)


class DeployedPredictor:
    """Batched predictions of one artifact on one device.

    Attributes:
        name: ``format@device``.
        queries: images asked about so far.
        provenance: device, artifact, converter and runtime facts for the record.
    """

    def __init__(self, target: Target, workspace) -> None:
        from aiot.converters import get_converter
        from aiot.converters.api import convert_model
        from aiot.converters.sidecar import read_sidecar
        from aiot.host.deploy import push_file
        from aiot.host.executor import _artifact_provenance

        if target.fmt is None:
            raise UsageError("a deployed predictor needs a format", "pass --format tflite (or another)")
        converter = get_converter(target.fmt)
        if converter.backend is None:
            raise UsageError(f"format '{target.fmt}' is emit-only: no runtime can answer queries",
                             "pick a format with a runtime (aiot convert --list)")
        self.target = target
        self.backend = converter.backend
        self.name = f"{target.fmt}@{target.device}"
        self.queries = 0
        conv = convert_model(target.model, target.fmt, workspace.artifacts_dir, weights=target.weights,
                             options=target.options or None, binarize=target.binarize)
        self.session = workspace.session(target.device)
        self.remote = push_file(self.session.transport, conv.artifact, conv.sha256).remote
        self.provenance = {"device": workspace.device_info(target.device),
                           **_artifact_provenance(conv, read_sidecar(conv.artifact))}
        self.artifact_sha256 = conv.sha256
        self.size_bytes = conv.size_bytes
        self._stage = Path(tempfile.mkdtemp(prefix="aiot-robust-"))

    def predict(self, x: np.ndarray) -> np.ndarray:
        from aiot.host.deploy import push_file

        self.queries += len(x)
        local_in = self._stage / "inputs.npy"
        np.save(local_in, np.ascontiguousarray(x, dtype=np.float32))
        remote_in = push_file(self.session.transport, local_in).remote
        remote_out = remote_in[: -len(".npy")] + ".out.npy"
        spec = {"v": 1, "backend": self.backend, "artifact": self.remote, "threads": self.target.threads,
                "inputs": remote_in, "outputs": remote_out}
        self.session._command("predict", "predicted", spec, timeout=600, on_progress=None)
        local_out = self._stage / "outputs.npy"
        self.session.transport.pull(remote_out, local_out)
        return np.load(local_out).astype(np.float32).reshape(len(x), -1)

    def close(self) -> None:
        import shutil

        shutil.rmtree(self._stage, ignore_errors=True)


def open_deployed(target: Target, workspace) -> DeployedPredictor:
    """The target's artifact on its device, converted and pushed, ready for queries."""
    return DeployedPredictor(target, workspace)
