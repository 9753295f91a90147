"""The device-session broker of one invocation: open agent sessions and transports per device,
cached device facts and telemetry baselines, closed together at the end.

A campaign gives each device worker its own :class:`Workspace`; a lab node's driver gives one
whose runs are measured on the node (:mod:`aiot.host.lab.session`).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from aiot.core.arch import canonical
from aiot.core.errors import AiotError
from aiot.host.app.session import AppAgentSession
from aiot.host.devices.agent_client import AgentSession
from aiot.host.devices.resolve import open_transport
from aiot.host.engine.cooldown import Baseline

log = logging.getLogger(__name__)


def artifacts_dir(results_dir: Path) -> Path:
    """Where converted artifacts (and their sidecars) live in a results folder."""
    return Path(results_dir) / "artifacts"


class Workspace:
    """Per-invocation state shared across runs: open agent sessions and prepared files.

    Args:
        results_dir: where the store and artifacts live.
        persistent_agent: keep one agent session per device for its commands (None: the
            default of :class:`~aiot.host.devices.agent_client.AgentSession`); False starts an agent
            process per command.
        conversions: the artifacts converted so far, by what they depend on
            (:class:`~aiot.host.engine.executor.Converted`); a campaign shares one between its
            devices' workspaces, so each artifact is converted (or verified) once.
        probes: device probes already read (preflight's), used once instead of probing again
            (after :meth:`forget`, a reconnected device is probed anew).
    """

    def __init__(self, results_dir: Path, persistent_agent: bool | None = None,
                 conversions: dict | None = None, probes: dict | None = None) -> None:
        self.results_dir = results_dir
        self.persistent_agent = persistent_agent
        self.artifacts_dir = artifacts_dir(results_dir)
        self._sessions: dict[str, object] = {}
        self._app_sessions: dict[str, object] = {}  # --via app: agents the Android app starts
        self._transports: dict[str, object] = {}
        self._device_info: dict[str, dict] = {}
        self._baselines: dict[str, object] = {}
        #: ``(artifact, sidecar)`` a lab's driver converted and shipped for the run at hand
        #: (see :mod:`aiot.host.lab.runner`); None: runs convert here.
        self.shipped: tuple | None = None
        self._cancelled = False
        self._cancel_event = threading.Event()  # wakes a cool-down wait when cancelled
        self.conversions = conversions if conversions is not None else {}
        self._probes: dict[str, dict] = dict(probes or {})

    def cancel(self) -> None:
        """Close every session and open no new one: a cancelled campaign's run in flight
        ends, and one still converting fails instead of starting to measure."""
        self._cancelled = True
        self._cancel_event.set()
        self.close()

    def pause(self, seconds: float) -> None:
        """Sleep ``seconds`` (a cool-down poll's wait), cut short by :meth:`cancel`."""
        self._cancel_event.wait(seconds)
        self._check_cancelled()

    def _check_cancelled(self) -> None:
        if self._cancelled:
            raise AiotError("cancelled before the run reached the device")

    def baseline(self, device: str, source):
        """``device``'s idle telemetry baseline, captured from ``source`` on first use."""
        if device not in self._baselines:
            self._baselines[device] = Baseline.capture(source)
        return self._baselines[device]

    def transport(self, device: str):
        """A transport to ``device`` without deploying the agent (native runs need none)."""
        self._check_cancelled()
        if device in self._sessions:
            return self._sessions[device].transport
        if device not in self._transports:
            self._transports[device] = open_transport(device)
        return self._transports[device]

    def session(self, device: str, via: str = "shell"):
        """The agent session for ``device``, deployed on first use; ``via="app"``: the one
        whose agent processes the Android app starts (:mod:`aiot.host.app.session`)."""
        self._check_cancelled()
        if via == "app":
            if device not in self._app_sessions:
                transport = open_transport(device)
                try:
                    self._app_sessions[device] = AppAgentSession(transport)
                except BaseException:
                    transport.close()  # not installed, runtime not staged: no link left open
                    raise
            return self._app_sessions[device]
        if device not in self._sessions:
            self._sessions[device] = AgentSession(open_transport(device), persistent=self.persistent_agent)
        return self._sessions[device]

    def device_info(self, device: str, agent: bool = True) -> dict:
        """Probe + agent hello for ``device`` (probe only with ``agent=False``), cached."""
        known = self._device_info.get(device)
        if known is not None and (not agent or "agent" in known):
            return known
        if not agent:
            info = self._probe(device, lambda: self.transport(device))
            info["name"] = device
            self._device_info[device] = info
            return info
        session = self.session(device)
        info = self._probe(device, lambda: session.transport)
        info["agent"] = session.hello()
        info["name"] = device
        machine = info["agent"].get("machine")
        if machine and info.get("abi") and canonical(machine) != canonical(info["abi"]):
            # A userland of another architecture than the kernel (an emulated arm64 board
            # under qemu-user): the runtimes' architecture is the one that matters.
            info["kernel_abi"], info["abi"] = info["abi"], machine
        self._device_info[device] = info
        return info

    def _probe(self, device: str, transport) -> dict:
        """``device``'s probe: the one handed in (once), else read over ``transport()``."""
        known = self._probes.pop(device, None)
        return dict(known) if known is not None else transport().info()

    def forget(self, device: str) -> None:
        """Close and drop ``device``'s session and transport: the next use reconnects."""
        for pool in (self._sessions, self._app_sessions, self._transports):
            held = pool.pop(device, None)
            if held is not None:
                try:
                    held.close()
                except Exception:
                    log.debug("closing %s failed", device, exc_info=True)
        self._device_info.pop(device, None)

    def close(self) -> None:
        for session in [*self._sessions.values(), *self._app_sessions.values()]:
            session.close()
        for transport in self._transports.values():
            transport.close()
        self._sessions.clear()
        self._app_sessions.clear()
        self._transports.clear()
