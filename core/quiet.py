"""Keep toolchains' console chatter off the user's terminal and out of ``--json`` output.

Converters and runtimes (litert-torch progress lines, LiteRT's native INFO logs, torch
warnings) print to stdout and stderr from Python and from C++. While they run, both file
descriptors and ``sys.stdout``/``sys.stderr`` point at a temporary file; what was printed
goes to the debug log afterwards (visible with ``aiot --verbose``).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import tempfile
import warnings


@contextlib.contextmanager
def toolchain_output_to_log(logger: logging.Logger):
    """Redirect fd 1/2 and Python's stdout/stderr into ``logger.debug`` for the block."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    python_side = io.StringIO()
    with tempfile.TemporaryFile() as sink:
        for fd in saved:
            os.dup2(sink.fileno(), fd)
        try:
            with contextlib.redirect_stdout(python_side), contextlib.redirect_stderr(python_side), \
                    warnings.catch_warnings():
                warnings.simplefilter("ignore")
                yield
        finally:
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            sink.seek(0)
            text = sink.read().decode(errors="replace") + python_side.getvalue()
            for line in text.splitlines():
                if line.strip():
                    logger.debug("toolchain: %s", line)


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
