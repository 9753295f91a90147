"""Rich progress for runs and sweeps (a RunListener at the CLI edge): one row per device."""

from __future__ import annotations

import threading

from rich.markup import escape

from aiot.host.cli._output import err, message, progress_enabled, safe


class RichRunListener:
    """A bar for the whole sweep and one live row per device; plain lines without a terminal.

    Thread-safe: a campaign's device workers call it concurrently.
    """

    def __init__(self) -> None:
        self._live = progress_enabled()
        self._progress = None
        self._sweep = None
        self._rows: dict[str, int] = {}
        self._labels: dict[str, str] = {}
        self._lock = threading.Lock()

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
        return self

    def __exit__(self, *exc) -> None:
        if self._progress:
            self._progress.stop()

    def _row(self, device: str) -> int:
        if device not in self._rows:
            self._rows[device] = self._progress.add_task(device, total=None)
        return self._rows[device]

    def on_run_start(self, request, index: int, total: int) -> None:
        with self._lock:
            self._labels[request.device] = request.label()
            if not self._progress:
                message(escape(f"[{index + 1}/{total}] {request.label()}"))
                return
            if self._sweep is None:
                self._sweep = self._progress.add_task("runs", total=total)
            self._progress.update(self._row(request.device), description=escape(request.label()),
                                  completed=0, total=None)

    def on_stage(self, request, stage: str) -> None:
        with self._lock:
            if self._progress:
                self._progress.update(self._row(request.device), completed=0, total=None,
                                      description=escape(f"{request.label()}: {stage}"))

    def on_progress(self, request, phase: str, done: int, total: int) -> None:
        with self._lock:
            if self._progress:
                self._progress.update(self._row(request.device), completed=min(done, total),
                                      total=total, description=escape(f"{request.label()}: {phase}"))

    def on_run_end(self, record) -> None:
        with self._lock:
            if self._progress and self._sweep is not None:
                self._progress.advance(self._sweep)
            # A reason quotes the device (its agent's error): made safe for the terminal.
            if record.status == "failed":
                message(f"  [red]failed[/] {escape(record.device or '')}: {safe(record.reason or '')}")
            elif record.status == "skipped":
                message(f"  [yellow]skipped[/] {escape(record.device or '')}: {safe(record.reason or '')}")
