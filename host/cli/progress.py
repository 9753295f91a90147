"""Rich progress for runs and sweeps (a RunListener at the CLI edge): one row per device."""

from __future__ import annotations

import threading
import time

from rich.markup import escape

from aiot.core import environment
from aiot.host.cli._output import err, message, progress_enabled, safe

#: Seconds between the heartbeat lines of a run in piped output (``$AIOT_HEARTBEAT_S``): a CI
#: log then shows a long run is alive, and where it is, without a line per iteration.
HEARTBEAT_S = 30.0


class RichRunListener:
    """A bar for the whole sweep and one live row per device; plain lines without a terminal,
    and there a heartbeat line per device every :data:`HEARTBEAT_S` while a run lasts.

    Thread-safe: a campaign's device workers call it concurrently.
    """

    def __init__(self) -> None:
        self._live = progress_enabled()
        self._progress = None
        self._sweep = None
        self._rows: dict[str, int] = {}
        self._labels: dict[str, str] = {}
        self._lock = threading.Lock()
        # device -> [label, started (monotonic), where it is now] of its run in flight
        self._running: dict[str, list] = {}
        self._stop = threading.Event()
        self._beat = None

    def __enter__(self) -> RichRunListener:
        if self._live:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                      MofNCompleteColumn(), TimeElapsedColumn(), console=err)
            self._progress.start()
        else:
            interval = float(environment.get("AIOT_HEARTBEAT_S") or HEARTBEAT_S)
            self._beat = threading.Thread(target=self._heartbeat, args=(interval,),
                                          name="aiot-heartbeat", daemon=True)
            self._beat.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._progress:
            self._progress.stop()
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=5)

    def _heartbeat(self, interval: float) -> None:
        """Every ``interval`` s, one line per device whose run has lasted that long."""
        while not self._stop.wait(interval):
            now = time.monotonic()
            with self._lock:
                lines = [f"  … {label}: {where}, {_elapsed(now - started)}"
                         for label, started, where in self._running.values()
                         if now - started >= interval]
            for line in lines:
                message(escape(line))

    def _track(self, request, where: str | None) -> None:
        """Where the device's run is now, for the heartbeat (None: it started)."""
        entry = self._running.setdefault(request.device,
                                         [request.label(), time.monotonic(), "starting"])
        if where is None:
            entry[:] = [request.label(), time.monotonic(), "starting"]
        else:
            entry[2] = where

    def _row(self, device: str) -> int:
        if device not in self._rows:
            self._rows[device] = self._progress.add_task(device, total=None)
        return self._rows[device]

    def on_run_start(self, request, index: int, total: int) -> None:
        with self._lock:
            self._labels[request.device] = request.label()
            self._track(request, None)
            if not self._progress:
                message(escape(f"[{index + 1}/{total}] {request.label()}"))
                return
            if self._sweep is None:
                self._sweep = self._progress.add_task("runs", total=total)
            self._progress.update(self._row(request.device), description=escape(request.label()),
                                  completed=0, total=None)

    def on_stage(self, request, stage: str) -> None:
        with self._lock:
            self._track(request, stage)
            if self._progress:
                self._progress.update(self._row(request.device), completed=0, total=None,
                                      description=escape(f"{request.label()}: {stage}"))

    def on_progress(self, request, phase: str, done: int, total: int) -> None:
        with self._lock:
            self._track(request, f"{phase} {min(done, total)}/{total}")
            if self._progress:
                self._progress.update(self._row(request.device), completed=min(done, total),
                                      total=total, description=escape(f"{request.label()}: {phase}"))

    def on_run_end(self, record) -> None:
        with self._lock:
            self._running.pop(record.device, None)
            if self._progress and self._sweep is not None:
                self._progress.advance(self._sweep)
            # A reason quotes the device (its agent's error): made safe for the terminal.
            if record.status == "failed":
                message(f"  [red]failed[/] {escape(record.device or '')}: {safe(record.reason or '')}")
            elif record.status == "skipped":
                message(f"  [yellow]skipped[/] {escape(record.device or '')}: {safe(record.reason or '')}")


def _elapsed(seconds: float) -> str:
    """``95`` → ``1m35s so far``."""
    minutes, secs = divmod(int(seconds), 60)
    return (f"{minutes}m{secs:02d}s" if minutes else f"{secs}s") + " so far"
