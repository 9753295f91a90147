"""Rich progress for runs and sweeps (a RunListener at the CLI edge)."""

from __future__ import annotations

from rich.markup import escape

from aiot.host.cli._output import err, message, progress_enabled


class RichRunListener:
    """One bar for the sweep, one for the current run's phase; plain lines without a terminal."""

    def __init__(self) -> None:
        self._live = progress_enabled()
        self._progress = None
        self._sweep = self._phase = None
        self._label = ""

    def __enter__(self) -> RichRunListener:
        if self._live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                      MofNCompleteColumn(), TimeElapsedColumn(), console=err)
            self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._progress:
            self._progress.stop()

    def on_run_start(self, request, index: int, total: int) -> None:
        self._label = request.label()
        if not self._progress:
            message(escape(f"[{index + 1}/{total}] {self._label}"))
            return
        if self._sweep is None:
            self._sweep = self._progress.add_task("runs", total=total)
            self._phase = self._progress.add_task("", total=None)
        self._progress.update(self._sweep, completed=index)

    def on_stage(self, request, stage: str) -> None:
        if self._progress:
            self._progress.update(self._phase, description=f"{self._label}: {stage}", completed=0, total=None)

    def on_progress(self, phase: str, done: int, total: int) -> None:
        if self._progress:
            self._progress.update(self._phase, description=f"{self._label}: {phase}",
                                  completed=min(done, total), total=total)

    def on_run_end(self, record) -> None:
        if self._progress:
            self._progress.advance(self._sweep)
        if record.status != "ok":
            message(f"  [red]failed[/]: {escape(record.reason or '')}")
