"""Root Typer app: global options, error handling, and the command groups."""

from __future__ import annotations

import logging
import signal
import threading
from contextlib import contextmanager
from typing import Annotated

import typer
from typer.core import TyperGroup

from aiot import __version__
from aiot.core import notices
from aiot.core.diskfull import as_disk_error
from aiot.core.errors import AiotError


class Terminated(KeyboardInterrupt):
    """SIGTERM (kill, a CI timeout, a service manager), handled as Ctrl-C: a sweep stops and
    marks its unfinished records failed instead of leaving them pending."""

    reason = "terminated (SIGTERM)"


@contextmanager
def _sigterm_as_interrupt():
    """Raise :class:`Terminated` in the main thread on the first SIGTERM; later ones are
    ignored so that the clean-up it starts can finish (SIGKILL still ends the process)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        signal.signal(signal.SIGTERM, lambda *_: logging.getLogger(__name__).warning(
            "SIGTERM again: still cleaning up (SIGKILL ends aiot now)"))
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class AiotGroup(TyperGroup):
    """Turns every AiotError into one line on stderr and its exit code (2: bad input, 1: a
    failure); a write that found the disk full or read-only (wherever it was not caught with
    more to say) into one line naming ENOSPC/EROFS; Ctrl-C into 130, SIGTERM (handled as
    Ctrl-C) into 143."""

    def invoke(self, ctx):
        with _sigterm_as_interrupt():
            return self._invoke(ctx)

    def _invoke(self, ctx):
        from aiot.host.cli._output import err, safe

        try:
            try:
                return super().invoke(ctx)
            except Exception as exc:  # a full disk, a read-only mount: the user's to fix
                disk = None if isinstance(exc, AiotError) else as_disk_error(exc, "cannot write")
                if disk is None:
                    raise
                raise disk from None
        except AiotError as exc:
            # Messages quote devices (an agent's error, a command's output): made safe here.
            err.print(f"[bold red]error:[/] {safe(exc.message)}", highlight=False)
            if exc.hint:
                err.print(f"[dim]hint:[/] {safe(exc.hint)}", highlight=False)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt as exc:
            err.print("interrupted; finished records were kept, unfinished ones marked failed")
            raise typer.Exit(143 if isinstance(exc, Terminated) else 130) from None


app = typer.Typer(
    cls=AiotGroup,
    name="aiot",
    help=f"aiot {__version__}: measure how neural networks really run on phones and ARM boards.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # device credentials can sit in locals
    # --install-completion / --show-completion: Click's completion for bash, zsh, fish and
    # PowerShell (the shell from shellingham, or named: --show-completion bash).
    add_completion=True,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"aiot {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    results_dir: Annotated[str | None, typer.Option(
        "--results-dir", envvar="AIOT_RESULTS_DIR",
        help="Where the result store and artifacts live (default: ./results in a checkout, "
             "else ~/.local/share/aiot/results).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log details to stderr.")] = False,
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_print_version, help="Print aiot's version and exit."
    )] = False,
) -> None:
    """aiot: convert PyTorch models, push them to devices, measure, store and score."""
    del version  # handled by its eager callback
    from aiot.host.cli._output import AppState, message, safe

    ctx.obj = AppState(results_dir_override=results_dir, verbose=verbose)
    notices.set_sink(lambda text: message(safe(text)))
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")


def _register() -> None:
    from aiot.host.cli import (
        app_cmd,
        bench,
        complexity,
        convert,
        demo,
        devices,
        emulator,
        lab,
        measure,
        models,
        report,
        results,
        robust,
        score,
        toolchains,
        train,
    )

    app.add_typer(app_cmd.app, name="app")
    app.add_typer(devices.app, name="devices")
    app.add_typer(emulator.app, name="emulator")
    app.add_typer(lab.app, name="lab")
    app.add_typer(models.app, name="models")
    app.add_typer(results.app, name="results")
    app.add_typer(score.app, name="score")
    app.add_typer(bench.app, name="bench")
    app.add_typer(toolchains.app, name="toolchains")
    convert.register(app)
    measure.register(app)
    train.register(app)
    demo.register(app)
    complexity.register(app)
    report.register(app)
    robust.register(app)


_register()


def main() -> None:
    """Console-script entry point."""
    from aiot.core.quiet import silence_runtime_teardown

    silence_runtime_teardown()
    app()
