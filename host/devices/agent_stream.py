"""Long-lived agents on a stream: requests as JSON lines in, protocol events out.

:class:`AgentStream` holds what ``serve`` (one loaded model answering predictions, see
:class:`aiot.host.devices.agent_client.ServeSession`) and ``session`` (a campaign's commands, see
:class:`ControlSession`) share: request ids, waiting for an answer with a deadline, and one
line saying how an agent that stopped answering ended.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable

from aiot.core.errors import AgentError, AiotError, CommandTimeout, TransportError
from aiot.device_agent import protocol
from aiot.host.devices.agent_messages import answered_twice, read_message
from aiot.host.devices.wheels import runtime_fix
from aiot.host.transports.base import Stream
from aiot.host.transports.stream import LineTooLong

log = logging.getLogger(__name__)
ProgressCallback = Callable[[str, int, int], None]
#: Seconds an agent may take to start: importing its runtime and loading the model, for
#: ``serve`` (torch under qemu takes ~45 s to import).
READY_TIMEOUT_S = 240.0
#: Characters of a log line (not a protocol message) kept in the debug log.
LOG_LINE_CHARS = 2000
#: The events that answer a request, each exactly once.
ANSWER_EVENTS = frozenset(protocol.ANSWERS.values()) | {"predictions"}


def agent_error(device: str, msg: dict) -> AgentError:
    """The AgentError for an ``error`` event of the agent on ``device``."""
    hint = None
    if msg.get("type") in ("ModuleNotFoundError", "ImportError"):
        hint = f"the device's Python lacks a runtime: run aiot devices setup {device}"
    elif msg.get("type") == "BackendUnavailable":  # "runtime for backend 'X' is not importable"
        named = re.search(r"backend '([\w-]+)'", str(msg.get("message")))
        hint = runtime_fix(device, named.group(1)) if named else f"see aiot devices info {device}"
    error = AgentError(f"agent on {device}: {msg.get('type')}: {msg.get('message')}", hint)
    # What the agent itself raised: a model that would not load makes the host check its blobs.
    error.agent_type = msg.get("type")
    return error


class AgentStream:
    """An agent process reading requests on its stdin; one request at a time.

    Attributes:
        device: the device's name.
        info: the agent's ``ready`` fields.
    """

    #: How a request's failure to get an answer is raised when the agent's stdout ends.
    lost_error: type[AiotError] = AgentError

    def __init__(self, stream: Stream, device: str, ready_timeout: float = READY_TIMEOUT_S) -> None:
        self._stream, self.device = stream, device
        self._next_id = 0
        self._answered: set[int] = set()  # requests that got their answer: no second one
        self._ended: str | None = None  # why the agent cannot answer any more
        self.info = self._await(("ready",), None, ready_timeout, "starting")

    @property
    def pid(self) -> int | None:
        """The agent's PID on the device, where the transport reports it."""
        return self._stream.pid

    @property
    def ended(self) -> bool:
        """Whether the agent can no longer answer (closed, died, or timed out)."""
        return self._ended is not None

    def close(self) -> None:
        """Ask the agent to exit (killing it if it does not). Idempotent."""
        if self._ended is None:
            self._ended = "the session was closed"
            try:
                self._stream.send_line(json.dumps({"op": "close"}))
            except Exception:  # already gone: close() below reaps it
                log.debug("agent on %s gone before close", self.device, exc_info=True)
        self._stream.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _request(self, op: str, **fields) -> int:
        """Send one request; returns its id."""
        self._next_id += 1
        self._send(json.dumps({"op": op, "id": self._next_id, **fields}, separators=(",", ":")))
        return self._next_id

    def _send(self, line: str) -> None:
        if self._ended is not None:
            raise self.lost_error(f"agent session on {self.device} has ended: {self._ended}")
        try:
            self._stream.send_line(line)
        except Exception:
            # Its stdin broke: it died (or the link did). Say how it ended, as a read would.
            raise self._died("reading a request") from None

    def _await(
        self,
        events: tuple[str, ...],
        request_id: int | None,
        timeout: float | None,
        doing: str,
        on_progress: ProgressCallback | None = None,
    ) -> dict:
        """Read lines until one of ``events`` answers ``request_id``; raise on its ``error``,
        on the end of the agent's output or after ``timeout`` seconds in all.

        Every message is checked first (:func:`~aiot.host.devices.agent_messages.read_message`),
        and a second answer to a request that had one ends the agent: it is seen at the next
        read, which for a run is the telemetry reading after it, so the run fails with it.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            msg = self._next_message(left, timeout, doing)
            if msg is None:
                continue
            if msg["event"] in ANSWER_EVENTS and msg.get("id") in self._answered:
                self._end(f"a second {msg['event']} for request {msg['id']}")
                raise answered_twice(self.device, msg["event"], msg["id"])
            if (
                request_id is not None
                and msg.get("id") != request_id
                and (msg["event"] in events or msg["event"] in ("error", "progress"))
            ):
                log.debug(
                    "agent on %s: stale %s for request %s", self.device, msg["event"], msg.get("id")
                )
            elif msg["event"] == "progress":
                if on_progress is not None:
                    on_progress(msg["phase"], msg["done"], msg["total"])
            elif msg["event"] == "error":
                if request_id is None:  # it failed to start: the agent exits
                    self._end(f"{msg.get('type')}: {msg.get('message')}")
                raise agent_error(self.device, msg)
            elif msg["event"] in events:
                if request_id is not None:
                    self._answered.add(request_id)
                return {k: v for k, v in msg.items() if k not in ("v", "event", "id")}
            else:
                log.debug("agent on %s: unexpected %s while %s", self.device, msg["event"], doing)

    def _next_message(self, left: float | None, timeout: float | None, doing: str) -> dict | None:
        """The next checked message (None for a log line or a dropped progress event); raise
        when the agent is silent past ``left`` seconds, sent a line past the limit, ended, or
        sent something that is no valid message (each ends the agent)."""
        try:
            line = self._stream.read_line(left)
        except CommandTimeout:
            self._end(f"no answer within {timeout:g} s while {doing}")
            raise CommandTimeout(
                f"agent on {self.device} timed out: no answer within {timeout:g} s "
                f"while {doing}; it was stopped",
                "check that the device is not overloaded",
            ) from None
        except LineTooLong as exc:
            self._end(exc.message)
            raise
        if line is None:
            raise self._died(doing)
        try:
            msg = read_message(line, self.device)
        except AgentError as exc:  # not a message, or not a valid one: the agent is done
            self._end(exc.message)
            raise
        if msg is None:
            log.debug("agent on %s: %s", self.device, line[:LOG_LINE_CHARS])
        return msg

    def _died(self, doing: str) -> AgentError:
        """The agent's stdout ended: say how, in one line, with its last stderr line."""
        self._stream.close(grace=1.0)  # reaps it, so the exit code is known
        code = self._stream.exit_code
        tail = (self._stream.stderr().strip().splitlines() or [""])[-1][:300]
        how = (
            "was killed"
            if code is not None and (code < 0 or code >= 128)
            else f"exited {code}"
            if code is not None
            else "stopped"
        )
        self._end(f"the agent {how} while {doing}" + (f": {tail}" if tail else ""))
        return self.lost_error(
            f"agent on {self.device} {how} while {doing}" + (f": {tail}" if tail else ""),
            "run aiot devices doctor " + self.device,
        )

    def _end(self, why: str) -> None:
        if self._ended is None:
            self._ended = why
        self._stream.close(grace=0)


class AgentSessionLost(TransportError):
    """The device's agent session stopped answering: its process or the link to the device is
    gone. Transient, like any lost link: a campaign retries the run on a fresh connection."""


#: What a session's child is doing for each op, for messages.
DOING = {"run": "measuring", "memory": "measuring memory", "predict": "predicting",
         "profile": "profiling operators"}


class ControlSession(AgentStream):
    """One ``python -m device_agent session`` on a device: hello, telemetry, and runs each in
    a forked child (fresh-process numbers without a fresh Python per run)."""

    lost_error = AgentSessionLost

    def hello(self, timeout: float = READY_TIMEOUT_S) -> dict:
        """The agent's self-description (as the one-shot ``hello``)."""
        return self._await(("hello",), self._request("hello"), timeout, "saying hello")

    def telemetry_text(self, timeout: float = 15.0) -> str:
        """The device's telemetry sections, as the host's telemetry script prints them."""
        return self._await(
            ("telemetry",), self._request("telemetry"), timeout, "reading telemetry"
        )["text"]

    def command(
        self,
        op: str,
        event: str,
        spec: dict,
        timeout: float | None,
        on_progress: ProgressCallback | None = None,
    ) -> dict:
        """Run ``op`` (``run``, ``memory`` or ``predict``) on ``spec`` in a forked child; the
        fields of its ``event`` answer."""
        request_id = self._request(op, spec=spec)
        return self._await((event,), request_id, timeout, DOING.get(op, op), on_progress)
