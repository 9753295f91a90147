"""A deployed artifact on a device, as a :class:`~aiot.host.robust.predictor.Predictor`.

``open_deployed`` converts the target (or reuses the cached artifact, whose parity with
PyTorch was checked at conversion), pushes it, and starts a persistent agent session on the
device (the agent's ``serve`` command): the model is loaded once and every ``predict`` is one
JSON-lines request over the transport, so black-box attacks do not pay process start-up and
model load per query. A device whose transport cannot keep a command's stdin open (an ADB
device without shell v2, Android < 7) falls back to the one-shot ``predict`` command: one
agent process, one pushed ``.npy`` and one pulled ``.npy`` per call.
"""

from __future__ import annotations

import logging
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from aiot.converters import get_converter
from aiot.converters.api import convert_model
from aiot.converters.sidecar import read_sidecar
from aiot.core.errors import UsageError
from aiot.device_agent.spec import RunSpec
from aiot.host.devices.deploy import push_file
from aiot.host.engine.executor import _artifact_provenance
from aiot.host.robust.target import Target
from aiot.host.transports.base import StreamUnsupported

log = logging.getLogger(__name__)
#: Input bytes per request: a larger batch is split, so one JSON line stays a few MB
#: (base64 adds a third) whatever the input size.
MAX_REQUEST_BYTES = 4 * 1024 * 1024


class DeployedPredictor:
    """Batched predictions of one artifact on one device.

    Attributes:
        name: ``format@device``.
        queries: images asked about so far.
        provenance: device, artifact, converter and runtime facts for the record.
        serving: ``"session"`` (a persistent agent) or ``"one-shot"`` (an agent per call).
        serving_info: the session agent's ``ready`` fields (backend, runtime_version,
            input_shape, input_dtype, ...); None for one-shot.
    """

    def __init__(self, target: Target, workspace, persistent: bool = True) -> None:
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
        conv = convert_model(target.zoo_name, target.fmt, workspace.artifacts_dir, weights=target.weights,
                             options=target.options or None, binarize=target.binarize)
        self.session = workspace.session(target.device)
        self.remote = push_file(self.session.transport, conv.artifact, conv.sha256).remote
        self.provenance = {"device": workspace.device_info(target.device),
                           **_artifact_provenance(conv, read_sidecar(conv.artifact), target.weights_origin)}
        self.artifact_sha256 = conv.sha256
        self.size_bytes = conv.size_bytes
        self._stage: Path | None = None
        self._serving = self._start_session() if persistent else None
        self.serving = "one-shot" if self._serving is None else "session"
        self.serving_info = None if self._serving is None else self._serving.info
        self.provenance["serving"] = self.serving

    @property
    def compute_ms(self) -> float | None:
        """Inference time the session's agent reported so far (None for one-shot)."""
        return None if self._serving is None else self._serving.compute_ms

    def _spec(self) -> dict:
        return RunSpec(backend=self.backend, artifact=self.remote, threads=self.target.threads).to_wire()

    def _start_session(self):
        try:
            return self.session.serve(self._spec())
        except StreamUnsupported as exc:
            log.info("%s: %s; one agent process per batch instead", self.name, exc.message)
            return None

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Scores ``(N, outputs)`` for the float32 batch ``x`` (the model's input layout).

        Raises:
            AgentError: the agent refused the batch, or the session died (one line, with the
                agent's last words).
            TransportError: the device cannot be reached.
        """
        x = np.ascontiguousarray(x, dtype=np.float32)
        self.queries += len(x)
        if len(x) == 0:
            return np.zeros((0, 0), np.float32)
        if self._serving is None:
            return self._predict_once(x)
        rows = max(1, MAX_REQUEST_BYTES // max(1, x[0].nbytes))
        parts = [self._serving.predict(x[i:i + rows]) for i in range(0, len(x), rows)]
        return np.concatenate(parts).reshape(len(x), -1)

    def _predict_once(self, x: np.ndarray) -> np.ndarray:
        """The one-shot ``predict`` command: push the inputs, run an agent, pull the outputs."""
        if self._stage is None:
            self._stage = Path(tempfile.mkdtemp(prefix="aiot-robust-"))
        local_in = self._stage / "inputs.npy"
        np.save(local_in, x)
        remote_in = push_file(self.session.transport, local_in).remote
        remote_out = remote_in[: -len(".npy")] + ".out.npy"
        spec = RunSpec(backend=self.backend, artifact=self.remote, threads=self.target.threads,
                       inputs=remote_in, outputs=remote_out).to_wire()
        self.session.predict(spec, timeout=600)
        local_out = self._stage / "outputs.npy"
        self.session.transport.pull(remote_out, local_out)
        return np.load(local_out).astype(np.float32).reshape(len(x), -1)

    def close(self) -> None:
        """Stop the agent session (the device keeps the artifact). Idempotent."""
        import shutil

        if self._serving is not None:
            self._serving.close()
        if self._stage is not None:
            shutil.rmtree(self._stage, ignore_errors=True)
            self._stage = None


@contextmanager
def deployed_if_format(target: Target, workspace, provenance: dict | None = None):
    """The target's artifact as a predictor while the block runs (None without a format).

    Its device/artifact facts go into ``provenance``; the session is closed afterwards.
    """
    if target.fmt is None:
        yield None
        return
    predictor = open_deployed(target, workspace)
    if provenance is not None:
        provenance.update(predictor.provenance)
    try:
        yield predictor
    finally:
        predictor.close()


def open_deployed(target: Target, workspace, *, persistent: bool = True) -> DeployedPredictor:
    """The target's artifact on its device, converted and pushed, ready for queries.

    ``persistent=False`` answers every call with a fresh one-shot agent instead of a session
    (for comparison: ``bench/agent_session.py``).
    """
    return DeployedPredictor(target, workspace, persistent)
