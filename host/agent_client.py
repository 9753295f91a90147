"""Drive the device agent through a Transport and read its JSON-lines protocol."""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path

from aiot.device_agent import protocol
from aiot.host.deploy import deploy_agent, push_file
from aiot.host.device_setup import agent_env
from aiot.host.errors import AgentError, DeviceCommandError
from aiot.host.transports.base import Transport

log = logging.getLogger(__name__)
ProgressCallback = Callable[[str, int, int], None]


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
            hint = None
            if final["type"] in ("ModuleNotFoundError", "ImportError"):
                hint = f"the device's Python lacks a runtime: run aiot devices setup {self.transport.name}"
            raise AgentError(f"agent on {self.transport.name}: {final['type']}: {final['message']}", hint)
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

    def memory(self, spec: dict, timeout: float | None = None) -> dict:
        """Peak memory of ``spec``'s model in a fresh agent process (the ``memory`` command)."""
        return self._command("memory", "memory", spec, timeout, None)

    def _command(self, command: str, expected: str, spec: dict, timeout: float | None,
                 on_progress: ProgressCallback | None) -> dict:
        spec_file = self.staging / f"{command}-spec.json"
        spec_file.write_text(json.dumps(spec, sort_keys=True))
        remote = push_file(self.transport, spec_file).remote
        msg = self._invoke([command, remote], timeout, on_progress, backend=spec.get("backend"))
        if msg["event"] != expected:
            raise AgentError(f"agent on {self.transport.name} answered {msg['event']!r}, expected {expected}")
        return {k: v for k, v in msg.items() if k not in ("v", "event")}
