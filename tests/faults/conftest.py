"""The fault layer: each test is one case of bad input, a hostile device or concurrent use,
marked ``@pytest.mark.fault("case")``, and asserts the behaviour that must hold (a one-line
error, no traceback, no record lost, nothing written where it must not be).

Under ``AIOT_FAULTS_REPORT=FILE`` every case's outcome (held or not, records lost) is
written there as JSON: ``bench/faults.py`` prints its table from it.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

_OUTCOMES: list[dict] = []


class Fault:
    """What a case reports besides pass/fail: the records it lost (counted, not assumed)."""

    def __init__(self) -> None:
        self.lost = 0
        self.tries = 1

    def tried(self, times: int) -> None:
        """The case was tried ``times`` times (a race is tried more than once)."""
        self.tries = times

    def records_lost(self, before: int, after: int) -> int:
        """Note ``before - after`` records lost (never negative) and return it."""
        self.lost = max(0, before - after)
        return self.lost


@pytest.fixture
def fault(request) -> Fault:
    case = Fault()
    request.node.aiot_fault = case
    return case


def count_records(results_dir: Path | None = None) -> int:
    """Records in the store of ``results_dir`` (default: the test's), read with plain sqlite3
    so that the count does not depend on the code under test; 0 when there is no store."""
    folder = Path(results_dir or os.environ["AIOT_RESULTS_DIR"])
    path = folder / "aiot.sqlite"
    if not path.exists():
        return 0
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    finally:
        conn.close()


def one_line_error(result, *fragments: str, code: int | None = None) -> None:
    """A CLI result that failed with exactly one ``error:`` line naming ``fragments``, and no
    traceback or escaped exception."""
    from click.exceptions import Exit

    assert result.exit_code != 0, result.output
    if code is not None:
        assert result.exit_code == code, (result.exit_code, result.output)
    assert result.exception is None or isinstance(result.exception, (SystemExit, Exit)), repr(result.exception)
    errors = [line for line in result.stderr.splitlines() if line.startswith(("error: ", "Error: ", "│ "))]
    assert errors and "Traceback" not in result.output, result.output
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    marker = item.get_closest_marker("fault")
    if marker is None or report.when != "call" and not (report.when == "setup" and report.failed):
        return
    case = getattr(item, "aiot_fault", None)
    # On the report, which pytest-xdist carries from its worker to the controller.
    report.aiot_fault = {
        "case": marker.args[0], "test": item.nodeid, "held": report.passed,
        "tried": case.tries if case else 1,
        "records_lost": case.lost if case else 0, "seconds": round(report.duration, 2),
    }


def pytest_runtest_logreport(report):
    outcome = getattr(report, "aiot_fault", None)
    if outcome:
        _OUTCOMES.append(outcome)


def pytest_sessionfinish(session):
    target = os.environ.get("AIOT_FAULTS_REPORT")
    worker = hasattr(session.config, "workerinput")  # an xdist worker: the controller writes
    if target and _OUTCOMES and not worker:
        Path(target).write_text(json.dumps(_OUTCOMES, indent=1))


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """A real sshd on loopback (an emulated SSH board); its inventory entry."""
    from aiot.host.emulator.ssh import SSHD, start_sshd

    if not Path(SSHD).exists():
        pytest.skip("OpenSSH server is not installed")
    proc, _, entry = start_sshd("board", tmp_path_factory.mktemp("emu-ssh"))
    yield entry
    proc.terminate()
    proc.wait(5)


def answer_probe_with(monkeypatch, probe_output: str) -> None:
    """Make the local device answer aiot's probe script with ``probe_output`` (as a hostile
    device would): the facts then travel the real path (probe, record, views)."""
    import dataclasses

    from aiot.host.transports.local import LocalTransport

    real_shell = LocalTransport.shell

    def shell(self, argv, **kwargs):
        result = real_shell(self, argv, **kwargs)
        if list(argv[:2]) == ["sh", "-c"] and "@@getprop" in argv[2]:
            return dataclasses.replace(result, stdout=probe_output)
        return result

    monkeypatch.setattr(LocalTransport, "shell", shell)
