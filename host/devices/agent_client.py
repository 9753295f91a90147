"""Drive the device agent through a Transport and read its JSON-lines protocol.

Where the transport can keep a command's stdin open, one ``session`` agent per device (and
interpreter) answers every ``hello``, telemetry reading, ``run``, ``memory`` and ``predict``,
each measurement in a child forked from it (see ``device_agent/session.py``). Elsewhere (an
ADB device without shell v2, a device without ``fork``, or ``AIOT_AGENT_SESSION=0``) each
command starts an agent process of its own. ``serve`` keeps one agent with its model loaded
and answers many batched predictions over a stream.
"""

from __future__ import annotations

import base64
import json
import logging
import tempfile
import time
from pathlib import Path

from aiot.core import environment
from aiot.core.errors import AgentError, DeviceCommandError, NoAgentPython
from aiot.host.devices.agent_messages import (
    DeviceMessageError,
    check_answer,
    invalid,
    read_message,
)
from aiot.host.devices.agent_stream import (
    LOG_LINE_CHARS,
    READY_TIMEOUT_S,
    AgentSessionLost,
    AgentStream,
    ControlSession,
    ProgressCallback,
    agent_error,
)
from aiot.host.devices.deploy import deploy_agent, push_file
from aiot.host.devices.setup import agent_env
from aiot.host.devices.telemetry import parse_telemetry, read_telemetry
from aiot.host.transports.base import ShellResult, Stream, StreamUnsupported, Transport

log = logging.getLogger(__name__)
#: Seconds one ``predict`` request may take before the session is given up.
PREDICT_TIMEOUT_S = 600.0
#: Set to ``0`` to start an agent process per command even where a session could be kept
#: (to rule the session out when a runtime misbehaves).
SESSION_ENV = "AIOT_AGENT_SESSION"

class AgentSession:
    """The agent deployed on one device.

    Args:
        transport: how to reach the device.
        staging: local scratch folder (specs and agent files are written here before pushing).
        persistent: keep one ``session`` agent per interpreter for the commands (where the
            transport and device allow it); False starts an agent process per command.
    """

    def __init__(self, transport: Transport, staging: Path | None = None,
                 persistent: bool | None = None) -> None:
        self.transport = transport
        if persistent is None:
            persistent = environment.get(SESSION_ENV, "1") != "0"
        self.persistent = persistent
        self._controls: dict[str, ControlSession] = {}
        self._no_control: dict[str, str] = {}  # interpreter → why it has no session
        self._tmp = None
        if staging is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="aiot-stage-")
            staging = Path(self._tmp.name)
        self.staging = staging
        self.root = deploy_agent(transport, staging)
        self.env = agent_env(transport)  # runtimes from `aiot devices setup`, if any

    def close(self) -> None:
        """End the agent sessions, remove the local staging folder, release the connection."""
        for control in self._controls.values():
            control.close()
        self._controls.clear()
        if self._tmp is not None:
            self._tmp.cleanup()
        self.transport.close()

    def __enter__(self) -> AgentSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _invoke(self, args: list[str], timeout: float | None,
                on_progress: ProgressCallback | None, backend: str | None = None) -> dict:
        """Run the agent, return its final ``result``/``hello`` message (checked: see
        :mod:`aiot.host.devices.agent_messages`)."""
        messages: list[dict] = []
        human: list[str] = []

        def on_line(line: str) -> None:
            msg = read_message(line, self.transport.name)  # raising stops the command
            if msg is None:
                human.append(line[:LOG_LINE_CHARS])
            elif msg["event"] == "progress":
                if on_progress:
                    on_progress(msg["phase"], msg["done"], msg["total"])
            else:
                messages.append(msg)

        result = self._start_agent([self.transport.python(backend), "-m", "device_agent", *args],
                                   timeout, on_line)
        for line in human:
            log.debug("agent: %s", line)
        final = messages[-1] if messages else None
        answers = [m["event"] for m in messages if m["event"] != "error"]
        if len(answers) > 1:
            raise invalid(self.transport.name, answers[-1],
                          f"{len(answers)} answers ({', '.join(answers[:5])}) to one request; "
                          f"none is believed")
        if final and final["event"] == "error":
            raise agent_error(self.transport.name, final)
        if final is None:
            if result.exit_code == 127:  # the shell found no such interpreter
                raise NoAgentPython(self.transport.name, self.transport.python(backend))
            if result.exit_code != 0:
                raise DeviceCommandError(self.transport.name, result)
            raise AgentError(f"agent on {self.transport.name} printed no result")
        return final

    def _start_agent(self, argv: list[str], timeout: float | None, on_line) -> ShellResult:
        """Run one agent command to its end, its stdout lines to ``on_line``: from the
        device's shell here; :class:`aiot.host.app.session.AppAgentSession` starts it through
        the Android app instead."""
        return self.transport.shell(argv, cwd=self.root, env=self.env, timeout=timeout,
                                    on_line=on_line)

    def control(self, backend: str | None = None) -> ControlSession | None:
        """The ``session`` agent for ``backend``'s interpreter, started on first use; None
        where commands run one-shot (no stream, no fork, or sessions turned off)."""
        python = self.transport.python(backend)
        if not self.persistent or python in self._no_control:
            return None
        control = self._live_control(python)
        if control is not None:
            return control
        argv = [python, "-m", "device_agent", "session"]
        try:
            control = ControlSession(self.transport.open_stream(argv, cwd=self.root, env=self.env),
                                     self.transport.name)
        except AgentSessionLost as exc:
            # It ended before it was ready (no such interpreter, a lost link): a one-shot
            # command says which, in its own words; the next command tries a session again.
            log.info("%s: agent session did not start (%s)", self.transport.name, exc.one_line())
            return None
        except (StreamUnsupported, AgentError) as exc:  # no stream, or the agent has no fork
            self._no_control[python] = exc.one_line()
            log.info("%s: one agent process per command (%s)", self.transport.name, exc.one_line())
            return None
        self._controls[python] = control
        return control

    def _live_control(self, python: str) -> ControlSession | None:
        control = self._controls.get(python)
        return control if control is not None and not control.ended else None

    def process_kind(self, backend: str | None = None) -> str:
        """How ``backend``'s commands run now, for provenance: ``"session-fork"`` (a child
        forked from the agent session), ``"session-fork-preloaded"`` (from a session that
        imports the runtimes its children inherit: an emulated board's, see
        :mod:`aiot.device_agent.session`) or ``"one-shot"`` (an agent process per command)."""
        live = self._live_control(self.transport.python(backend))
        if live is None:
            return "one-shot"
        return "session-fork-preloaded" if live.info.get("preload") else "session-fork"

    def hello(self, timeout: float = READY_TIMEOUT_S) -> dict:
        """The agent's self-description: versions and installed runtimes."""
        control = self.control()
        if control is not None:
            return control.hello(timeout)
        msg = self._invoke(["hello"], timeout, None)
        return {k: v for k, v in msg.items() if k not in ("v", "event")}

    def telemetry(self):
        """The device's :class:`~aiot.host.devices.telemetry.Telemetry` now: from the agent session
        (no shell, no ``cat`` per file), else from the telemetry script in one shell call."""
        control = self.control()
        if control is None:
            return read_telemetry(self.transport)
        return parse_telemetry(control.telemetry_text(), time.time())

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

    def profile(self, spec: dict, timeout: float | None = None) -> dict:
        """Per-operator time of ``spec``'s model from its runtime's profiler, in a fresh agent
        process (the ``profile`` command; see ``device_agent/profiling.py``)."""
        return self._command("profile", "profile", spec, timeout, None)

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
        control = self.control(spec.get("backend"))
        if control is not None:
            answer = control.command(command, expected, spec, timeout, on_progress)
        else:
            remote = self._push_spec(command, spec)
            msg = self._invoke([command, remote], timeout, on_progress, backend=spec.get("backend"))
            if msg["event"] != expected:
                raise AgentError(f"agent on {self.transport.name} answered {msg['event']!r}, "
                                 f"expected {expected}")
            answer = {k: v for k, v in msg.items() if k not in ("v", "event")}
        try:
            check_answer(expected, answer, spec, self.transport.name)
        except DeviceMessageError:
            if control is not None:  # what else it sends is not believed either: a fresh one
                control.close()
            raise
        return answer


class ServeSession(AgentStream):
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
        self.compute_ms = 0.0
        super().__init__(stream, device, ready_timeout)

    def predict(self, x, timeout: float = PREDICT_TIMEOUT_S):
        """The model's outputs for a batch ``x`` (rows of the model's input shape), as float32
        ``(N, outputs)``.

        Raises:
            AgentError: the agent refused the request (the session goes on), or it has died.
            CommandTimeout: no answer within ``timeout`` seconds (the agent is killed).
        """
        import numpy as np

        x = np.ascontiguousarray(x, dtype="<f4")
        request_id = self._request("predict", shape=list(x.shape), dtype="float32",
                                   data=base64.b64encode(x.tobytes()).decode("ascii"))
        msg = self._await(("predictions",), request_id, timeout, f"answering request {request_id}")
        try:
            out = np.frombuffer(base64.b64decode(msg["data"], validate=True),
                                np.dtype(msg["dtype"]).newbyteorder("<"))
            out = out.reshape(msg["shape"]).astype(np.float32)
        except (ValueError, TypeError) as exc:  # binascii.Error is a ValueError
            self._end("its predictions could not be read")
            raise invalid(self.device, "predictions", f"{msg['dtype'][:40]!r} data of shape "
                          f"{msg['shape']}: {exc}") from None
        self.compute_ms += msg.get("compute_ms") or 0.0
        return out
