"""Drive the device agent through a Transport and read its JSON-lines protocol.

One-shot commands (``hello``, ``run``, ``memory``) start an agent process each; ``serve``
keeps one agent with its model loaded and answers many batched predictions over a stream.
"""

from __future__ import annotations

import base64
import json
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path

from aiot.device_agent import protocol
from aiot.host.deploy import deploy_agent, push_file
from aiot.host.device_setup import agent_env
from aiot.host.errors import AgentError, CommandTimeout, DeviceCommandError
from aiot.host.transports.base import Stream, Transport

log = logging.getLogger(__name__)
ProgressCallback = Callable[[str, int, int], None]
#: Seconds a ``serve`` agent may take to import its runtime and load the model (torch under
#: qemu takes ~45 s to import).
READY_TIMEOUT_S = 240.0
#: Seconds one ``predict`` request may take before the session is given up.
PREDICT_TIMEOUT_S = 600.0


def agent_error(device: str, msg: dict) -> AgentError:
    """The AgentError for an ``error`` event of the agent on ``device``."""
    hint = None
    if msg.get("type") in ("ModuleNotFoundError", "ImportError"):
        hint = f"the device's Python lacks a runtime: run aiot devices setup {device}"
    return AgentError(f"agent on {device}: {msg.get('type')}: {msg.get('message')}", hint)


class AgentSession:
    """The agent deployed on one device.

    Args:
        transport: how to reach the device.
        staging: local scratch folder (specs and agent files are written here before pushing).
    """

    def __init__(self, transport: Transport, staging: Path | None = None) -> None:
        self.transport = transport
        self._tmp = None
        if staging is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="aiot-stage-")
            staging = Path(self._tmp.name)
        self.staging = staging
        self.root = deploy_agent(transport, staging)
        self.env = agent_env(transport)  # runtimes from `aiot devices setup`, if any

    def close(self) -> None:
        """Remove the local staging folder and release the device connection."""
        if self._tmp is not None:
            self._tmp.cleanup()
        self.transport.close()

    def __enter__(self) -> AgentSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _invoke(self, args: list[str], timeout: float | None,
                on_progress: ProgressCallback | None, backend: str | None = None) -> dict:
        """Run the agent, return its final ``result``/``hello`` message."""
        messages: list[dict] = []
        human: list[str] = []

        def on_line(line: str) -> None:
            try:
                msg = protocol.decode(line)
            except protocol.ProtocolError as exc:
                raise AgentError(f"{self.transport.name}: {exc}",
                                 "host and agent versions differ; re-run to redeploy") from None
            if msg is None:
                human.append(line)
            elif msg["event"] == "progress" and on_progress:
                on_progress(msg["phase"], msg["done"], msg["total"])
            else:
                messages.append(msg)

        result = self.transport.shell(
            [self.transport.python(backend), "-m", "device_agent", *args],
            cwd=self.root, env=self.env, timeout=timeout, on_line=on_line,
        )
        for line in human:
            log.debug("agent: %s", line)
        final = messages[-1] if messages else None
        if final and final["event"] == "error":
            raise agent_error(self.transport.name, final)
        if final is None:
            if result.exit_code != 0:
                raise DeviceCommandError(self.transport.name, result)
            raise AgentError(f"agent on {self.transport.name} printed no result")
        return final

    def hello(self, timeout: float = 240) -> dict:  # importing torch under qemu takes ~45 s
        """The agent's self-description: versions and importable runtimes."""
        msg = self._invoke(["hello"], timeout, None)
        return {k: v for k, v in msg.items() if k not in ("v", "event")}

    def run(self, spec: dict, timeout: float | None = None,
            on_progress: ProgressCallback | None = None) -> dict:
        """Push ``spec`` and execute it; returns the agent's ``result`` fields."""
        return self._command("run", "result", spec, timeout, on_progress)

    def predict(self, spec: dict, timeout: float | None = None) -> dict:
        """Outputs of ``spec``'s ``inputs`` written to its ``outputs`` (one agent process)."""
        return self._command("predict", "predicted", spec, timeout, None)

    def memory(self, spec: dict, timeout: float | None = None) -> dict:
        """Peak memory of ``spec``'s model in a fresh agent process (the ``memory`` command)."""
        return self._command("memory", "memory", spec, timeout, None)

    def serve(self, spec: dict, ready_timeout: float = READY_TIMEOUT_S) -> ServeSession:
        """A long-lived agent with ``spec``'s model loaded (a run spec's ``v``, ``backend``,
        ``artifact``, ``threads``), ready for :meth:`ServeSession.predict`.

        Raises:
            StreamUnsupported: the transport cannot keep a command's stdin open.
            AgentError: the agent could not load the model, or died before it was ready.
        """
        remote = self._push_spec("serve", spec)
        argv = [self.transport.python(spec.get("backend")), "-m", "device_agent", "serve", remote]
        stream = self.transport.open_stream(argv, cwd=self.root, env=self.env)
        try:
            return ServeSession(stream, self.transport.name, ready_timeout)
        except BaseException:
            stream.close(grace=0)
            raise

    def _push_spec(self, command: str, spec: dict) -> str:
        spec_file = self.staging / f"{command}-spec.json"
        spec_file.write_text(json.dumps(spec, sort_keys=True))
        return push_file(self.transport, spec_file).remote

    def _command(self, command: str, expected: str, spec: dict, timeout: float | None,
                 on_progress: ProgressCallback | None) -> dict:
        remote = self._push_spec(command, spec)
        msg = self._invoke([command, remote], timeout, on_progress, backend=spec.get("backend"))
        if msg["event"] != expected:
            raise AgentError(f"agent on {self.transport.name} answered {msg['event']!r}, expected {expected}")
        return {k: v for k, v in msg.items() if k not in ("v", "event")}


class ServeSession:
    """An agent on the device serving predictions of one loaded model (its ``serve`` command).

    Requests go one at a time as JSON lines on the agent's stdin; each answer is matched by
    its id. An ``error`` answer raises AgentError and the session stays usable; an agent that
    died, or a request past its timeout, ends the session.

    Attributes:
        device: the device's name.
        info: the agent's ``ready`` fields (backend, runtime_version, input_shape, ...).
        compute_ms: runtime time the agent reported, summed over every answered request.
    """

    def __init__(self, stream: Stream, device: str, ready_timeout: float = READY_TIMEOUT_S) -> None:
        self._stream, self.device = stream, device
        self._next_id = 0
        self._ended: str | None = None  # why the session cannot answer any more
        self.compute_ms = 0.0
        self.info = self._await("ready", None, ready_timeout, "starting")

    @property
    def pid(self) -> int | None:
        """The agent's PID on the device, where the transport reports it."""
        return self._stream.pid

    def predict(self, x, timeout: float = PREDICT_TIMEOUT_S):
        """The model's outputs for a batch ``x`` (rows of the model's input shape), as float32
        ``(N, outputs)``.

        Raises:
            AgentError: the agent refused the request (the session goes on), or it has died.
            CommandTimeout: no answer within ``timeout`` seconds (the agent is killed).
        """
        import numpy as np

        x = np.ascontiguousarray(x, dtype="<f4")
        self._next_id += 1
        request = {"op": "predict", "id": self._next_id, "shape": list(x.shape), "dtype": "float32",
                   "data": base64.b64encode(x.tobytes()).decode("ascii")}
        self._send(json.dumps(request, separators=(",", ":")))
        msg = self._await("predictions", self._next_id, timeout, f"answering request {self._next_id}")
        self.compute_ms += msg.get("compute_ms") or 0.0
        out = np.frombuffer(base64.b64decode(msg["data"]), np.dtype(msg["dtype"]).newbyteorder("<"))
        return out.reshape(msg["shape"]).astype(np.float32)

    def close(self) -> None:
        """Ask the agent to exit (killing it if it does not). Idempotent."""
        if self._ended is None:
            self._ended = "the session was closed"
            try:
                self._stream.send_line(json.dumps({"op": "close"}))
            except Exception:  # noqa: BLE001 - already gone: close() below reaps it
                log.debug("agent on %s gone before close", self.device, exc_info=True)
        self._stream.close()

    def __enter__(self) -> ServeSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _send(self, line: str) -> None:
        if self._ended is not None:
            raise AgentError(f"agent session on {self.device} has ended: {self._ended}")
        try:
            self._stream.send_line(line)
        except Exception as exc:
            self._end(getattr(exc, "message", None) or str(exc))
            raise AgentError(f"agent session on {self.device} has ended: {self._ended}",
                             "open a new session") from None

    def _await(self, event: str, request_id: int | None, timeout: float, doing: str) -> dict:
        """Read lines until ``event`` (for ``request_id``) arrives; raise on its error or EOF."""
        while True:
            try:
                line = self._stream.read_line(timeout)
            except CommandTimeout:
                self._end(f"no answer within {timeout:g} s while {doing}")
                raise CommandTimeout(f"agent on {self.device} gave no answer within {timeout:g} s "
                                     f"while {doing}; it was stopped",
                                     "check that the device is not overloaded") from None
            if line is None:
                raise self._died(doing)
            try:
                msg = protocol.decode(line)
            except protocol.ProtocolError as exc:
                self._end(str(exc))
                raise AgentError(f"{self.device}: {exc}",
                                 "host and agent versions differ; re-run to redeploy") from None
            if msg is None or msg["event"] == "progress":
                log.debug("agent on %s: %s", self.device, line)
            elif msg.get("id") != request_id and msg["event"] in ("predictions", "error") \
                    and request_id is not None:
                log.debug("agent on %s: stale answer to request %s", self.device, msg.get("id"))
            elif msg["event"] == "error":
                if request_id is None:  # the model did not load: the agent exits
                    self._end(f"{msg.get('type')}: {msg.get('message')}")
                raise agent_error(self.device, msg)
            elif msg["event"] == event:
                return {k: v for k, v in msg.items() if k not in ("v", "event")}
            else:
                log.debug("agent on %s: unexpected %s while %s", self.device, msg["event"], doing)

    def _died(self, doing: str) -> AgentError:
        """The agent's stdout ended: say how, in one line, with its last stderr line."""
        self._stream.close(grace=1.0)  # reaps it, so the exit code is known
        code = self._stream.exit_code
        tail = (self._stream.stderr().strip().splitlines() or [""])[-1][:300]
        how = "was killed" if code is not None and (code < 0 or code >= 128) else \
            f"exited {code}" if code is not None else "stopped"
        self._end(f"the agent {how} while {doing}" + (f": {tail}" if tail else ""))
        return AgentError(f"agent on {self.device} {how} while {doing}" + (f": {tail}" if tail else ""),
                          "run aiot devices doctor " + self.device)

    def _end(self, why: str) -> None:
        if self._ended is None:
            self._ended = why
        self._stream.close(grace=0)
