"""A hostile device agent (round 3): numbers a device makes up, answers it forges, text it
floods, lines that never end.

Each case runs a real measurement on the embedded ``local`` device whose Python is replaced
by a wrapper: the real agent runs, and its stdout goes through ``_agent_rewriter.py`` (a real
process in a real pipe) before the local transport reads it, so the rewritten lines travel
the real path (transport framing → protocol → checks → executor → store → CLI). Both ways
the host runs an agent are covered: the long-lived ``session`` (default) and one process per
command (``AIOT_AGENT_SESSION=0``); the endless lines and a forged answer also go through an
emulated SSH board (a real sshd on loopback whose inventory names the wrapper as its Python).

Every case asserts what must hold: the run is recorded failed (never ok or VALID) with a
one-line reason naming what the device sent, the CLI exits 1 without a traceback and with
bounded output, and no record is lost.
"""

from __future__ import annotations

import stat
import sys
import time
from pathlib import Path

import pytest

from aiot.host.transports.local import LocalTransport
from tests.faults.conftest import count_records

REWRITER = Path(__file__).with_name("_agent_rewriter.py")
RUN = ("run", "-m", "tiny_cnn", "-f", "onnx", "--min-runs", "3", "--min-s", "0",
       "--warmup-min-s", "0", "--json")
#: Characters of CLI output a failed run may print (its record as JSON, a line or two).
OUTPUT_CAP = 20_000


def _wrapper(folder: Path, python: str, mode: str) -> str:
    """A script that runs ``python`` with its arguments, its stdout rewritten by ``mode``."""
    wrapper = folder / f"hostile-python-{mode}"
    wrapper.write_text(f'#!/bin/sh\n"{python}" "$@" | "{sys.executable}" "{REWRITER}" {mode}\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


@pytest.fixture
def hostile_agent(monkeypatch, tmp_path):
    """``use(mode, session=True)``: the local device's agent output rewritten by ``mode``."""
    real_python = LocalTransport.python

    def use(mode: str, session: bool = True) -> None:
        monkeypatch.setattr(LocalTransport, "python", lambda self, backend=None: _wrapper(
            tmp_path, real_python(self, backend), mode))
        monkeypatch.setenv("AIOT_AGENT_SESSION", "1" if session else "0")

    return use


@pytest.fixture
def hostile_board(board, monkeypatch, tmp_path):
    """``use(mode, session=True)``: the SSH board in the inventory, its Python the wrapper."""
    from dataclasses import replace

    from aiot.host.devices import inventory

    def use(mode: str, session: bool = True) -> None:
        devices = inventory.load()
        devices[board.name] = replace(board, python=_wrapper(tmp_path, board.python, mode))
        inventory.save(devices)
        monkeypatch.setenv("AIOT_AGENT_SESSION", "1" if session else "0")

    return use


def _failed_run(cli, fault, *fragments: str, device: str = "local") -> dict:
    """Run once; the record must be failed with a one-line reason holding ``fragments``."""
    before = count_records()
    result = cli(*RUN, "-d", device, code=1)
    assert "Traceback" not in result.output, result.output[:3000]
    assert len(result.output) < OUTPUT_CAP, result.output[:3000]
    [record] = __import__("json").loads(result.stdout)
    assert record["status"] == "failed" and record["validity"] != "VALID", record
    reason = record["reason"]
    assert "\n" not in reason and len(reason) < 3000, reason[:3000]
    for fragment in fragments:
        assert fragment in reason, reason
    assert record["median_ms"] is None and record["load_ms"] is None
    fault.records_lost(before + 1, count_records())
    return record


@pytest.mark.fault("device sends a negative, zero, NaN or infinite median")
@pytest.mark.parametrize("mode, says", [
    ("median-negative", "stats_ms.median is -1.5, not > 0"),
    ("median-zero", "stats_ms.median is 0, not > 0"),
    ("median-nan", "stats_ms.median is NaN"),
    ("median-inf", "stats_ms.median is Infinity"),
])
def test_made_up_medians_are_refused(cli, hostile_agent, fault, mode, says):
    hostile_agent(mode)
    _failed_run(cli, fault, "the device sent an invalid result", says)


@pytest.mark.fault("device sends a NaN median to a one-shot agent")
def test_made_up_median_is_refused_one_shot(cli, hostile_agent, fault):
    hostile_agent("median-nan", session=False)
    _failed_run(cli, fault, "the device sent an invalid result: stats_ms.median is NaN")


@pytest.mark.fault("device sends a negative load time")
def test_negative_load_time_is_refused(cli, hostile_agent, fault):
    hostile_agent("load-negative")
    _failed_run(cli, fault, "load_ms is -12, not >= 0")


@pytest.mark.fault("device sends accuracy 7.5")
def test_accuracy_above_one_is_refused(cli, hostile_agent, fault):
    hostile_agent("accuracy-750")
    _failed_run(cli, fault, "accuracy.top1 is 7.5, not in [0, 1]")


@pytest.mark.fault("device sends five results, the first with a forged backend")
@pytest.mark.parametrize("session", [True, False], ids=["session", "one-shot"])
def test_forged_backend_is_refused(cli, hostile_agent, fault, session):
    hostile_agent("forged-backend", session=session)
    record = _failed_run(cli, fault, "the device sent an invalid result")
    assert ("backend is 'tensorrt', the request asked for 'onnxruntime'" in record["reason"]
            if session else "5 answers" in record["reason"])


@pytest.mark.fault("device sends a second, forged result for the same request")
@pytest.mark.parametrize("session", [True, False], ids=["session", "one-shot"])
def test_second_result_is_refused(cli, hostile_agent, fault, session):
    hostile_agent("second-result", session=session)
    record = _failed_run(cli, fault)
    assert ("two result events for request" in record["reason"] if session
            else "2 answers (result, result) to one request" in record["reason"])


@pytest.mark.fault("device sends a 10 MB error text")
def test_huge_error_text_is_cut(cli, hostile_agent, fault):
    hostile_agent("error-10mb")
    record = _failed_run(cli, fault, "RuntimeError: EEEE", "cut by aiot: 10485760 characters in all")
    assert len(record["reason"]) < 2600


@pytest.mark.fault("device sends wrong types in a result")
@pytest.mark.parametrize("mode, says", [
    ("wrong-types", "stats_ms.median is '12', not a number"),
    ("wrong-types-stats", "stats_ms is ['fast'], not an object"),
])
def test_wrong_types_are_refused_without_traceback(cli, hostile_agent, fault, mode, says):
    hostile_agent(mode)
    _failed_run(cli, fault, says)


@pytest.mark.fault("device sends odd progress values")
@pytest.mark.parametrize("session", [True, False], ids=["session", "one-shot"])
def test_odd_progress_never_fails_a_run(cli, hostile_agent, fault, session, monkeypatch):
    monkeypatch.setenv("AIOT_NO_PROGRESS", "0")  # the progress display reads them
    hostile_agent("odd-progress", session=session)
    before = count_records()
    result = cli(*RUN)
    [record] = __import__("json").loads(result.stdout)
    assert record["status"] == "ok" and record["median_ms"] > 0, record
    assert "Traceback" not in result.output and len(result.output) < OUTPUT_CAP
    fault.records_lost(before + 1, count_records())


@pytest.mark.fault("device sends a malformed protocol line")
def test_malformed_line_is_named_not_blamed_on_versions(cli, hostile_agent, fault):
    hostile_agent("malformed")
    record = _failed_run(cli, fault, "the device sent a malformed protocol line",
                         '{"v": 1, "event": "result", "stats_ms": {oops')
    assert "versions differ" not in record["reason"]


@pytest.mark.fault("device speaks another protocol version")
def test_only_a_real_version_mismatch_blames_versions(cli, hostile_agent, fault):
    hostile_agent("version-2")
    record = _failed_run(cli, fault, "agent speaks protocol 2, host expects 1", "versions differ")
    assert "malformed" not in record["reason"]


@pytest.mark.fault("device sends an 80 MB line")
@pytest.mark.parametrize("mode", ["line-80mb", "cr-only"])
@pytest.mark.parametrize("session", [True, False], ids=["session", "one-shot"])
def test_endless_line_fails_in_bounded_time(cli, hostile_agent, fault, mode, session):
    hostile_agent(mode, session=session)
    start = time.monotonic()
    _failed_run(cli, fault, "the device sent a line longer than 64 MiB")
    assert time.monotonic() - start < 60


@pytest.mark.fault("SSH device sends an 80 MB line or a second result")
@pytest.mark.parametrize("mode, says", [("line-80mb", "the device sent a line longer than 64 MiB"),
                                        ("second-result", "")])
@pytest.mark.parametrize("session", [True, False], ids=["session", "one-shot"])
def test_hostile_agent_over_ssh(cli, hostile_board, fault, mode, says, session):
    hostile_board(mode, session=session)
    start = time.monotonic()
    record = _failed_run(cli, fault, says, device="board")
    assert time.monotonic() - start < 60
    if mode == "second-result":
        assert ("two result events" if session else "2 answers") in record["reason"]
