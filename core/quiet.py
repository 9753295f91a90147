"""Keep toolchains' console chatter off the user's terminal and out of ``--json`` output.

Converters and runtimes (litert-torch progress lines, LiteRT's native INFO logs, torch
warnings) print to stdout and stderr from Python and from C++. While they run, both file
descriptors and ``sys.stdout``/``sys.stderr`` point at a temporary file; what was printed
goes to the debug log afterwards (visible with ``aiot --verbose``).

Outside those blocks, what a toolchain says when it is merely imported (torchao's "Failed to
load … .so" and "Detected no triton" log records, torch's ``_pytree`` deprecation lines, a
``FutureWarning``) reaches the CLI's log: :func:`cli_logging` shows aiot's own warnings and
every library's errors, and keeps the rest for ``--verbose``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import tempfile
import warnings

#: The logger namespace of aiot's own modules: their warnings are the user's to read.
OWN_LOGGERS = "aiot"
#: torch's own log configuration (its loggers do not reach the root handler); aiot sets it only
#: where the user has not.
TORCH_LOGS = "TORCH_LOGS"
_TORCH_QUIET = "-torch"  # torch's loggers at ERROR: its import-time deprecation lines are not shown


@contextlib.contextmanager
def toolchain_output_to_log(logger: logging.Logger):
    """Redirect fd 1/2 and Python's stdout/stderr into ``logger.debug`` for the block; Python
    warnings raised in it are logged the same way (not shown, never lost for ``--verbose``)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    python_side = io.StringIO()
    raised: list[warnings.WarningMessage] = []
    with tempfile.TemporaryFile() as sink:
        for fd in saved:
            os.dup2(sink.fileno(), fd)
        try:
            with contextlib.redirect_stdout(python_side), contextlib.redirect_stderr(python_side), \
                    warnings.catch_warnings(record=True) as raised:
                warnings.simplefilter("default")
                yield
        finally:
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            _rebind_handlers(python_side)
            sink.seek(0)
            text = sink.read().decode(errors="replace") + python_side.getvalue()
            text += "".join(f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})\n"
                            for w in raised)
            for line in text.splitlines():
                if line.strip():
                    logger.debug("toolchain: %s", line)


def _rebind_handlers(captured: io.StringIO) -> None:
    """A library imported inside the block (torch makes its handlers at import) bound its log
    handlers to the block's stand-in stderr: point them at the real one, or its later
    warnings would vanish even under ``--verbose``."""
    loggers = [logging.getLogger(), *(v for v in logging.Logger.manager.loggerDict.values()
                                      if isinstance(v, logging.Logger))]
    for each in loggers:
        for handler in each.handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream is captured:
                handler.setStream(sys.stderr)


class _Stderr(logging.StreamHandler):
    """The CLI's log handler: whatever ``sys.stderr`` is when a record is written (a test's
    captured stream, the terminal), never a stream that has since been closed."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        del value  # always sys.stderr


def own_or_severe(record: logging.LogRecord) -> bool:
    """What a plain (not ``--verbose``) command shows of the log: aiot's own warnings, and
    errors of any library; a library's warnings and notes are its noise (kept under ``-v``)."""
    own = record.name == OWN_LOGGERS or record.name.startswith(OWN_LOGGERS + ".")
    return own or record.levelno >= logging.ERROR


#: torch's handlers make their own lines; ``TORCH_LOGS`` set by aiot in this process (so that a
#: later ``--verbose`` command of the same process takes it back).
_set_here: dict[str, str] = {}


def cli_logging(verbose: bool) -> None:
    """Configure logging for one CLI command: with ``verbose``, everything at DEBUG on stderr
    (toolchains' records and Python warnings included); else aiot's own warnings and any
    library's errors (:func:`own_or_severe`), Python warnings and torch's own warning lines
    kept back. A program that configured logging itself (the root logger has its handlers,
    as under pytest) keeps its configuration."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _Stderr)]:
        root.removeHandler(handler)
    if root.handlers:
        return
    handler = _Stderr()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    if not verbose:
        handler.addFilter(own_or_severe)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    logging.captureWarnings(True)  # warnings are log records: py.warnings, a library's
    _torch_logs(verbose)


def _torch_logs(verbose: bool) -> None:
    """torch logs through handlers of its own (its ``_pytree`` deprecation lines at import):
    at ERROR unless ``verbose``, left to the user where ``TORCH_LOGS`` is theirs."""
    mine = _set_here.get(TORCH_LOGS)
    if os.environ.get(TORCH_LOGS) not in (None, mine):
        return  # the user's torch log configuration
    if "torch" in sys.modules:  # imported: its import-time configuration is done
        logging.getLogger("torch").setLevel(logging.WARNING if verbose else logging.ERROR)
    if verbose:
        if mine is not None:
            os.environ.pop(TORCH_LOGS, None)
            _set_here.clear()
    else:  # read when torch is imported, by this process and by the toolchains it starts
        os.environ[TORCH_LOGS] = _set_here[TORCH_LOGS] = _TORCH_QUIET


def silence_runtime_teardown() -> None:
    """At exit, if LiteRT was loaded in this process, drop what its C++ destructors print.

    LiteRT logs ``DestroyAccelerator`` lines from static destructors after Python has
    finished; by then the CLI has printed everything it means to.
    """
    import atexit

    def at_exit() -> None:
        if "ai_edge_litert" in sys.modules:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 2)

    atexit.register(at_exit)
