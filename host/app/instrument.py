"""The host side of the app path: install the APK, start the agent through ``am instrument``
and read its lines back out of the instrumentation's status output.

``am instrument -w -r -e spec BASE64 COMPONENT`` prints each status the app sends as
``INSTRUMENTATION_STATUS: key=value`` lines closed by ``INSTRUMENTATION_STATUS_CODE: N``, and
the final result as ``INSTRUMENTATION_RESULT: key=value`` lines closed by
``INSTRUMENTATION_CODE: N``. The app relays each stdout line of the agent as the status value
``aiot`` (long lines in chunks marked ``aiot_more``), so :class:`StatusParser` hands the host
the agent's own JSON lines, not log text to scrape.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

from aiot.core.errors import AiotError
from aiot.host.app.build import COMPONENT, PACKAGE
from aiot.host.devices.deploy import push_file
from aiot.host.transports.stream import LineFramer

KEY_LINE, KEY_MORE = "aiot", "aiot_more"
_STATUS, _STATUS_CODE = "INSTRUMENTATION_STATUS: ", "INSTRUMENTATION_STATUS_CODE: "
_RESULT, _CODE = "INSTRUMENTATION_RESULT: ", "INSTRUMENTATION_CODE: "
_FAILED, _ABORTED = "INSTRUMENTATION_FAILED: ", "INSTRUMENTATION_ABORTED: "
#: Seconds ``am`` may take on top of the agent's own timeout (process start, activity).
START_SLACK_S = 60.0


class AppError(AiotError):
    """The app is missing, refused to install, or could not start the agent."""


def encode_spec(argv: list[str], env: dict[str, str] | None, cwd: str | None,
                timeout_s: float | None) -> str:
    """The ``-e spec`` value: base64 of the JSON the app's RunSpec reads."""
    spec: dict = {"argv": list(argv), "env": dict(env or {}), "cwd": cwd}
    if timeout_s:
        spec["timeout_ms"] = int(timeout_s * 1000)
    return base64.b64encode(json.dumps(spec, separators=(",", ":")).encode()).decode("ascii")


def decode_spec(value: str) -> dict:
    """The JSON of a ``-e spec`` value (the emulated phone's side of :func:`encode_spec`)."""
    return json.loads(base64.b64decode(value))


def instrument_argv(spec: str, foreground: bool = True, component: str = COMPONENT) -> list[str]:
    """``am instrument`` waiting for the end (-w), printing raw status (-r)."""
    argv = ["am", "instrument", "-w", "-r", "-e", "spec", spec]
    if not foreground:
        argv += ["-e", "foreground", "0"]
    return [*argv, component]


def unescape(value: str) -> str:
    """A result value the app wrote on one line (StatusLines.oneLine) as it was."""
    out, i = [], 0
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value):
            nxt = value[i + 1]
            out.append({"n": "\n", "r": "\r", "\\": "\\"}.get(nxt, "\\" + nxt))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class StatusParser:
    """Turns ``am instrument -r`` output into the agent's lines and the final result.

    Args:
        on_line: receives each relayed agent line (chunks joined).

    Attributes:
        result: the ``INSTRUMENTATION_RESULT`` values; ``code`` its ``INSTRUMENTATION_CODE``.
        failure: an ``INSTRUMENTATION_FAILED``/``ABORTED`` line (no such app, it crashed).
        other: lines that are none of these (``am``'s own errors).
    """

    def __init__(self, on_line: Callable[[str], None]) -> None:
        self.on_line = on_line
        self.result: dict[str, str] = {}
        self.code: int | None = None
        self.failure: str | None = None
        self.other: list[str] = []
        self._status: dict[str, str] = {}
        # The agent line being relayed in chunks: a list (joining on each chunk was
        # quadratic) held to the transports' line limit.
        self._pending = LineFramer("app", "the agent")
        self._last: tuple[dict, str] | None = None  # where a continuation line goes

    def feed(self, line: str) -> None:
        line = line.rstrip("\r")
        if line.startswith(_STATUS):
            self._value(self._status, line[len(_STATUS):])
        elif line.startswith(_STATUS_CODE):
            self._end_status()
        elif line.startswith(_RESULT):
            self._value(self.result, line[len(_RESULT):])
        elif line.startswith(_CODE):
            self.code = _int(line[len(_CODE):])
            self._last = None
        elif line.startswith((_FAILED, _ABORTED)):
            self.failure = line
            self._last = None
        elif self._last is not None:  # a value that went on over several lines
            bundle, key = self._last
            bundle[key] += "\n" + line
        elif line.strip():
            self.other.append(line)

    def _value(self, bundle: dict, text: str) -> None:
        key, _, value = text.partition("=")
        bundle[key] = value
        self._last = (bundle, key)

    def _end_status(self) -> None:
        status, self._status, self._last = self._status, {}, None
        if KEY_LINE not in status:
            return
        self._pending.feed(status[KEY_LINE].replace("\n", " ").encode())
        if status.get(KEY_MORE) != "1":
            self.on_line(self._pending.flush() or "")

    def outcome(self) -> dict:
        """How the agent ended, from the result bundle (stderr and detail unescaped)."""
        r = self.result
        exit_text = r.get("aiot_exit")
        return {"reason": r.get("aiot_reason"), "exit": _int(exit_text) if exit_text else None,
                "detail": unescape(r.get("aiot_detail", "")) or None,
                "stderr": unescape(r.get("aiot_stderr", "")),
                "error": unescape(r["aiot_error"]) if "aiot_error" in r else None,
                "cpuset": unescape(r.get("aiot_cpuset", "")) or None,
                "cgroup": unescape(r.get("aiot_cgroup", "")) or None,
                "foreground": {"1": True, "0": False}.get(r.get("aiot_foreground", "")),
                "app_version": r.get("aiot_app_version"),
                "emulated": r.get("aiot_emulated") == "1"}


def _int(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def install(transport, meta: dict) -> dict:
    """Push the APK and ``pm install -r`` it; returns what the device says it installed.

    Raises:
        AppError: pm refused it (its Failure line is the message) or the instrumentation is not
            listed afterwards.
    """
    pushed = push_file(transport, Path(meta["path"]), meta["sha256"])
    done = transport.shell(["pm", "install", "-r", pushed.remote], timeout=300)
    text = (done.stdout + "\n" + done.stderr).strip()
    if not done.ok or "Success" not in text:
        last = [line for line in text.splitlines() if line.strip()] or [f"exit {done.exit_code}"]
        hint = ("see https://developer.android.com/tools/adb#pm for the Failure code"
                if "UPDATE_INCOMPATIBLE" not in text else
                f"the phone has the app signed with another key (another aiot cache): "
                f"adb shell pm uninstall {PACKAGE}, then install again")
        raise AppError(f"pm install on {transport.name} failed: {last[-1][:300]}", hint)
    listed = transport.shell(["pm", "list", "instrumentation"], timeout=60)
    if PACKAGE not in listed.stdout:
        raise AppError(f"{transport.name} installed the APK but lists no {PACKAGE} instrumentation",
                       "check: adb shell pm list instrumentation")
    return {"device": transport.name, "apk": pushed.remote, "sha256": meta["sha256"],
            "version": meta["version"], "pm": text.splitlines()[-1]}


def force_stop(transport) -> None:
    """``am force-stop`` the app: Android kills its processes and their process group (the
    agent the app started), e.g. after the host gave up waiting."""
    try:
        transport.shell(["am", "force-stop", PACKAGE], timeout=30)
    except AiotError:
        pass  # the link is gone too; the device ends the app when am's shell dies
