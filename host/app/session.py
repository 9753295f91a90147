"""The device agent started through the Android app: ``aiot run|sweep --via app``.

Every agent command (``hello``, ``run``, ``memory``) runs as one ``am instrument`` of the
app's :data:`~aiot.host.app.build.COMPONENT`, whose core starts the same ``python -m
device_agent ...`` command the shell path runs (same runtime, cwd and environment) inside
the app's process context, and relays its lines back as instrumentation status. There is no
long-lived session (am cannot feed the agent's stdin), so each command is one agent process.

On a phone with aiot's runtime, the app does not execute it from ``/data/local/tmp`` (Android
10+ forbids apps that): the session copies the tree into the app's files once (``run-as``) and
asks the app to start the loader it carries in its native-library dir
(:mod:`aiot.host.app.runtime`).
"""

from __future__ import annotations

import posixpath

from aiot.core.errors import AgentError, UsageError
from aiot.host.app import runtime as app_runtime
from aiot.host.app.build import COMPONENT, loader_name, read_metadata, read_runtime_metadata
from aiot.host.app.instrument import (
    START_SLACK_S,
    AppError,
    StatusParser,
    encode_spec,
    force_stop,
    instrument_argv,
)
from aiot.host.devices.agent_client import AgentSession
from aiot.host.devices.checks import last_line
from aiot.host.transports.base import ShellResult


class AppAgentSession(AgentSession):
    """An :class:`AgentSession` whose agent processes the Android app starts.

    Attributes:
        last: the last command's instrumentation outcome (cgroup, cpuset, foreground, ...).
    """

    def __init__(self, transport, staging=None) -> None:
        if getattr(transport, "kind", None) != "adb":
            raise UsageError(f"--via app needs an Android device over ADB; '{transport.name}' is "
                             f"{getattr(transport, 'kind', '?')}", "use --via shell for it")
        super().__init__(transport, staging, persistent=False)
        self.last: dict = {}
        self._root_shared = False
        self.runtime = app_runtime.for_device(transport)
        if self.runtime is None:
            self._share(transport.workdir())  # the device's own Python may lie anywhere in it
        else:
            # The app runs its own copy of the runtime: only the agent's files and the pushes
            # need sharing (see _start_agent), not the shell's ~1,500-file tree each session.
            app_runtime.stage(transport, self.runtime)

    def _share(self, *paths: str) -> None:
        """Let the app's user read what the shell user pushed (the app runs as its own uid):
        ``chmod -R a+rX``, and the work dir above them searchable. Other apps may then read the
        models too; a benchmark phone's price."""
        script = ('chmod a+x "$1" || exit 1; shift; '
                  'for p in "$@"; do if [ -e "$p" ]; then chmod -R a+rX "$p" || exit 1; fi; done')
        done = self.transport.shell(["sh", "-c", script, "share", self.transport.workdir(), *paths],
                                    timeout=300)
        if not done.ok:
            raise AppError(f"cannot make {paths[0]} readable to the app on {self.transport.name}: "
                           f"{last_line(done)[:300]}")

    def _start_agent(self, argv: list[str], timeout: float | None, on_line) -> ShellResult:
        # The agent's tree once per session (it is deployed on first use), new pushes each time:
        # a recursive chmod of the whole runtime per command would be paid on every run.
        shared = [posixpath.join(self.transport.workdir(), "blobs")]
        if not self._root_shared:
            shared.insert(0, self.root)
            self._root_shared = True
        self._share(*shared)
        parser = StatusParser(on_line)
        env = self.env
        if self.runtime is not None and argv and argv[0] == self.runtime.python:
            argv, env = self.runtime.command(argv, self.env)
        command = instrument_argv(encode_spec(argv, env, self.root, timeout))
        try:
            done = self.transport.shell(command, timeout=timeout + START_SLACK_S if timeout else None,
                                        on_line=parser.feed)
        except BaseException:
            force_stop(self.transport)  # the host gave up (timeout, Ctrl-C): end the agent too
            raise
        outcome = parser.outcome()
        self.last = outcome
        if parser.failure:
            # FAILED: no such instrumentation (the app is not installed); ABORTED: it crashed.
            hint = (f"is the app installed? run: aiot app install {self.transport.name}"
                    if parser.failure.startswith("INSTRUMENTATION_FAILED")
                    else "see: adb logcat -s AndroidRuntime")
            raise AppError(f"am instrument on {self.transport.name}: {parser.failure[:300]}", hint)
        if outcome["error"]:
            raise AppError(f"the aiot app on {self.transport.name} refused the command: {outcome['error']}",
                           "rebuild and reinstall it: aiot app build && aiot app install "
                           f"{self.transport.name}")
        if outcome["reason"] is None:
            last = (parser.other or [done.stdout.strip() or f"exit {done.exit_code}"])[-1]
            raise AppError(f"am instrument on {self.transport.name} gave no result: {last[:300]}",
                           f"is the app installed? run: aiot app install {self.transport.name}")
        if outcome["reason"] == "start failed":
            hint = ("Android 10+ lets apps execute only files of their own (see android_app/README.md); "
                    "--via shell works on this phone")
            if self.runtime is not None:
                hint = (f"the installed app may carry another runtime's loader: aiot app install "
                        f"{self.transport.name}")
            raise AppError(f"the aiot app on {self.transport.name} cannot start the runtime: "
                           f"{outcome['detail']}", hint)
        if outcome["reason"] in ("timeout", "host disconnected", "stopped"):
            raise AgentError(f"the agent under the app on {self.transport.name} was ended: "
                             f"{outcome['reason']}" + (f" ({outcome['detail']})" if outcome['detail'] else ""))
        code = outcome["exit"] if outcome["exit"] is not None else 1
        return ShellResult(done.command, code, "", outcome["stderr"], done.seconds)

    def provenance(self) -> dict:
        """What a record keeps about the app that started its agent."""
        tree = self.runtime.tree if self.runtime else None
        meta = (read_runtime_metadata(tree) if tree else read_metadata()) or {}
        keep = ("cpuset", "cgroup", "foreground", "app_version", "emulated")
        started = ({"loader": f"native_lib_dir/{loader_name(tree)}", "tree": f"app files/{tree}"}
                   if tree else {"program": "as the shell path"})
        return {"component": COMPONENT, "apk_sha256": meta.get("sha256"), "runtime_start": started,
                **{k: self.last.get(k) for k in keep}}
