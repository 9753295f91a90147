"""The CLI's log (:mod:`aiot.core.quiet`): a plain command shows aiot's own warnings and any
library's errors; a library's warnings, Python warnings and torch's lines are for ``-v``;
what a toolchain prints or warns inside a conversion goes to the debug log, never lost."""

from __future__ import annotations

import io
import logging
import os
import sys
import warnings

import pytest

from aiot.core import quiet


@pytest.fixture
def cli_log(monkeypatch):
    """What the CLI's log handler writes to stderr, with the root logger as a command line
    process starts: no handler (pytest adds its own when the test starts: the test calls
    ``cli_log.bare()`` first). The suite's logging is put back afterwards."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "level", root.level)
    monkeypatch.delenv(quiet.TORCH_LOGS, raising=False)
    monkeypatch.setattr(quiet, "_set_here", {})
    torch_level = logging.getLogger("torch").level
    stderr = io.StringIO()

    def bare() -> None:  # pytest's capture and log handlers are set when the test starts
        monkeypatch.setattr(root, "handlers", [])
        monkeypatch.setattr(sys, "stderr", stderr)

    stderr.bare = bare
    yield stderr
    logging.captureWarnings(False)
    logging.getLogger("torch").setLevel(torch_level)


def _say_everything() -> None:
    logging.getLogger("aiot.host.engine.executor").warning("aiot's own warning")
    logging.getLogger("aiot.host.engine.executor").debug("aiot's debug detail")
    logging.getLogger("torchao").warning("Failed to load torchao/_C_mxfp8.so")
    logging.getLogger("torchao.kernel.intmm").error("a library's error")
    logging.getLogger("aiotx").warning("a library whose name starts like aiot's")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("old_api is deprecated", FutureWarning)


def test_a_plain_command_shows_aiots_warnings_and_library_errors_only(cli_log):
    cli_log.bare()
    quiet.cli_logging(verbose=False)
    _say_everything()
    shown = cli_log.getvalue()
    assert "aiot's own warning" in shown and "a library's error" in shown
    for noise in ("aiot's debug detail", "Failed to load", "starts like aiot's", "deprecated"):
        assert noise not in shown, shown
    assert os.environ[quiet.TORCH_LOGS] == "-torch" or "torch" in sys.modules
    if "torch" in sys.modules:
        assert logging.getLogger("torch").level == logging.ERROR


def test_verbose_shows_everything_and_takes_aiots_torch_setting_back(cli_log):
    cli_log.bare()
    quiet.cli_logging(verbose=False)
    quiet.cli_logging(verbose=True)  # a later command of the same process
    _say_everything()
    shown = cli_log.getvalue()
    for line in ("aiot's own warning", "aiot's debug detail", "Failed to load", "a library's error",
                 "starts like aiot's", "old_api is deprecated"):
        assert line in shown, shown
    assert quiet.TORCH_LOGS not in os.environ
    handlers = [h for h in logging.getLogger().handlers if isinstance(h, quiet._Stderr)]
    assert len(handlers) == 1  # each command replaces the handler, never adds a second


def test_the_users_torch_logs_and_a_program_that_configured_logging_are_left_alone(cli_log, monkeypatch):
    monkeypatch.setenv(quiet.TORCH_LOGS, "+dynamo")
    cli_log.bare()
    quiet.cli_logging(verbose=False)
    assert os.environ[quiet.TORCH_LOGS] == "+dynamo"
    theirs = logging.StreamHandler(io.StringIO())
    logging.getLogger().handlers[:] = [theirs]
    quiet.cli_logging(verbose=True)
    assert logging.getLogger().handlers == [theirs]


def test_what_a_toolchain_prints_or_warns_goes_to_the_debug_log(caplog):
    log = logging.getLogger("aiot.test.toolchain")
    caplog.set_level(logging.DEBUG, logger="aiot.test.toolchain")
    with quiet.toolchain_output_to_log(log):
        print("a progress line")
        os.write(2, b"INFO: DestroyAccelerator from C++\n")
        warnings.warn("TracerWarning-like: converting a tensor to a Python boolean", UserWarning)
        late = logging.StreamHandler()  # a library importing inside the block binds to its stderr
        logging.getLogger("aiot.test.late").addHandler(late)
    try:
        kept = [r.getMessage() for r in caplog.records if r.name == "aiot.test.toolchain"]
        assert "toolchain: a progress line" in kept
        assert "toolchain: INFO: DestroyAccelerator from C++" in kept
        assert any("UserWarning: TracerWarning-like" in line for line in kept), kept
        assert late.stream is sys.stderr  # its later lines reach stderr, not the block's stand-in
    finally:
        logging.getLogger("aiot.test.late").removeHandler(late)


def test_a_toolchain_failure_names_its_exception_not_its_advice():
    from aiot.core.toolchains import _last_error

    stderr = ("Traceback (most recent call last):\n  File \"lower.py\", line 3, in <module>\n"
              "torch._export.verifier.SpecViolationError: Operator aten.cumsum is not Aten Canonical.\n"
              "If you believe this operator should be included into core ATen opset, please "
              "create an issue\n")
    assert _last_error(stderr).startswith("torch._export.verifier.SpecViolationError: Operator")
    assert _last_error("a plain last line\n") == "a plain last line"
