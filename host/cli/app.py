"""Root Typer app: global options, error handling, and the command groups."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Annotated

import typer

from aiot import __version__
from aiot.core import children, notices
from aiot.core.diskfull import as_disk_error
from aiot.core.errors import AiotError
from aiot.core.quiet import cli_logging, silence_runtime_teardown
from aiot.host.cli._output import AppState, err, message, notice, safe
from aiot.host.cli.lazy import Command, LazyGroup, Table


class Terminated(KeyboardInterrupt):
    """SIGTERM (kill, a CI timeout, a service manager), handled as Ctrl-C: a sweep stops and
    marks its unfinished records failed instead of leaving them pending."""

    reason = "terminated (SIGTERM)"
    exit_code = 128 + signal.SIGTERM


class HungUp(Terminated):
    """SIGHUP (the terminal or SSH session that ran aiot closed), handled as SIGTERM."""

    reason = "hangup (SIGHUP)"
    exit_code = 128 + signal.SIGHUP


class Quit(Terminated):
    """SIGQUIT (Ctrl-\\), handled as SIGTERM instead of Python's core dump: the records of the
    runs it stops are marked failed, not left pending."""

    reason = "quit (SIGQUIT)"
    exit_code = 128 + getattr(signal, "SIGQUIT", 3)


#: The signals that end a command as Ctrl-C does, each with the interrupt it raises.
_ENDING = {signal.SIGTERM: Terminated,
           **{getattr(signal, name): ending for name, ending in (("SIGHUP", HungUp), ("SIGQUIT", Quit))
              if hasattr(signal, name)}}


@contextmanager
def _sigterm_as_interrupt():
    """Raise :class:`Terminated` (SIGTERM), :class:`HungUp` (SIGHUP) or :class:`Quit` (SIGQUIT)
    in the main thread on the first such signal; later ones are ignored so that the clean-up it starts can finish
    (SIGKILL still ends the process). A hangup that was ignored (``nohup``) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def still_cleaning(signum, frame):
        logging.getLogger(__name__).warning(
            "%s again: still cleaning up (SIGKILL ends aiot now)", signal.Signals(signum).name)

    def handler(signum, frame):
        for ending in previous:
            signal.signal(ending, still_cleaning)
        raise _ENDING[signum]()

    # A hangup ignored when aiot started stays ignored: `nohup aiot sweep ...` outlives its
    # terminal, as nohup promises.
    previous = {signum: signal.signal(signum, handler) for signum in _ENDING
                if signum == signal.SIGTERM or signal.getsignal(signum) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for signum, action in previous.items():
            signal.signal(signum, action)


# Every command and group of the root, in the order `aiot --help` lists them: its name, the
# module under aiot.host.cli that defines it, and the first paragraph of its help. The root lists
# them from here and imports a module only when one of its commands runs (or its own help is
# asked for), so `aiot --help` does not import the whole engine (see aiot.host.cli.lazy).
COMMANDS: Table = {
    "convert": ("convert", "Convert a model into an artifact, check parity with PyTorch and "
                           "write a sidecar."),
    "push": ("measure", "Convert (if needed) and push an artifact and the device agent to a "
                        "device."),
    "pull": ("measure", "Copy the files a device left in WORKDIR/outputs (profiles, logs) into "
                        "the results folder."),
    "run": ("measure", "Measure one model in one format on one device at one thread count."),
    "sweep": ("measure", "Measure every combination of devices × models × formats × delegates "
                         "× clusters × threads (× --via shell,app on Android devices)."),
    "train": ("train", "Train a zoo model (Adam, cosine schedule) and store the weights and a "
                       "train record."),
    "demo": ("demo", "Train a small CNN on Fashion-MNIST, convert to ONNX and TFLite, sweep "
                     "threads here."),
    "complexity": ("complexity", "BiBench's compression r_c, speedup r_s and OM_comp of "
                                 "binarized zoo models (eq. 7-8)."),
    "report": ("report", "Write a report of the result store: the answer first, then plots, "
                         "tables and provenance."),
    "app": ("app_cmd", "The aiot Android app: build its APK offline, show it, install it "
                       "(for --via app)."),
    "devices": ("devices", "List and probe devices."),
    "emulator": ("emulator", "Start, list and stop emulated ADB / SSH devices."),
    "lab": ("lab", "A lab of several hosts: start, join, list and stop Ray nodes."),
    "models": ("models", "The model zoo: architectures, inputs, complexity."),
    "results": ("results", "Stored results: list, show, export, compare sets (a CI gate), "
                           "leaderboards, compare outputs across devices."),
    "score": ("score", "Benchmark scores: AIoTBench VIPS/VOPS, BiBench OM_infer and OM_comp."),
    "paper": ("paper", "Whole benchmark procedures from the papers (AIoTBench, BiBench, RobustMQ)."),
    "toolchains": ("toolchains", "List, install and remove isolated toolchain environments "
                                 "(e.g. lce)."),
    "robust": ("robust", "Robustness suites: system noise, natural corruptions, adversarial "
                         "attacks."),
    "predict": ("predict", "Predict a model's latency on a device from kernels measured there: "
                           "collect, fit, evaluate, then aiot predict -m MODEL."),
}

# Old names that still work, hidden from the help: each says once what it is called now.
ALIASES: dict[str, str] = {"bench": "paper"}


class AiotGroup(LazyGroup):
    """The root group. Lists its commands from :data:`COMMANDS` and imports a command's
    module only when it is used.

    Turns every AiotError into one line on stderr and its exit code (2: bad input, 1: a
    failure); a write that found the disk full or read-only (wherever it was not caught with
    more to say) into one line naming ENOSPC/EROFS; Ctrl-C into 130, SIGTERM, SIGHUP and SIGQUIT
    (handled as Ctrl-C) into 143, 129 and 131."""

    TABLE = COMMANDS

    def get_command(self, ctx, cmd_name: str) -> Command | None:
        return super().get_command(ctx, ALIASES.get(cmd_name, cmd_name))

    def resolve_command(self, ctx, args):
        if args and args[0] in ALIASES and not ctx.resilient_parsing:
            message(f"note: `aiot {args[0]}` is now `aiot {ALIASES[args[0]]}`")
        return super().resolve_command(ctx, args)

    def invoke(self, ctx):
        children.allow()  # a command run in-process after a stopped one starts children again
        with _sigterm_as_interrupt():
            return self._invoke(ctx)

    def _invoke(self, ctx):
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
            # One line each, never wrapped by Rich: a CI log or `grep error:` sees it whole
            # (a terminal still wraps it on screen).
            err.print(f"[bold red]error:[/] {safe(exc.message)}", highlight=False, soft_wrap=True)
            if exc.hint:
                err.print(f"[dim]hint:[/] {safe(exc.hint)}", highlight=False, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt as exc:
            # A command that knows what its stop left behind says it (``said``: aiot convert
            # writes no records); the others keep finished records and mark unfinished ones.
            said = getattr(exc, "said", None) or (
                "interrupted; finished records were kept, unfinished ones marked failed")
            try:  # after a hangup the terminal may be gone: the records are marked already
                err.print(said, highlight=False, soft_wrap=True, markup=False)
            except OSError:
                pass
            raise typer.Exit(getattr(exc, "exit_code", 130)) from None


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
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Log details to stderr: toolchains' output and warnings, a "
                                "failed run's traceback.")] = False,
    store_wait: Annotated[str | None, typer.Option(
        "--store-wait", metavar="SECONDS",
        help="How long a write waits for a store another program holds locked "
             "(default: $AIOT_STORE_WAIT_S, else 300).")] = None,
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_print_version, help="Print aiot's version and exit."
    )] = False,
) -> None:
    """aiot: convert PyTorch models, push them to devices, measure, store and score."""
    del version  # handled by its eager callback
    if store_wait is not None:
        # The store reads its wait from the variable (so do the processes aiot starts): set it,
        # then read it back once so a bad value is refused before any work.
        from aiot.host.store.busy import WAIT_VARIABLE, wait_s

        os.environ[WAIT_VARIABLE] = store_wait
        wait_s()

    ctx.obj = AppState(results_dir_override=results_dir, verbose=verbose)
    notices.set_sink(notice)
    # A toolchain's import-time warnings (torchao, torch's _pytree) and a run's traceback are
    # for --verbose; a plain command shows aiot's own warnings and one line per failure.
    cli_logging(verbose)


def main() -> None:
    """Console-script entry point.

    A command that was stopped (Ctrl-C, SIGTERM, SIGHUP) while a campaign's worker thread was
    inside a conversion's own Python work ends without waiting for that thread: its records
    are marked, its child processes killed, and Python's exit would otherwise wait minutes.
    """
    silence_runtime_teardown()
    try:
        app()
    except SystemExit as end:
        if any(t.name == children.WORKER_THREAD and t.is_alive() for t in threading.enumerate()):
            code = end.code if isinstance(end.code, int) else 1
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            logging.shutdown()
            os._exit(code)
        raise
