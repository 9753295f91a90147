"""The host side of ``--via app``: the am instrument spec and status parsing, via in run specs
and keys, the shell-vs-app comparison, and which phone commands the emulator's pm/am answer."""

from __future__ import annotations

import pytest

from aiot.core.errors import UsageError
from aiot.host.app.instrument import (
    StatusParser,
    decode_spec,
    encode_spec,
    instrument_argv,
    unescape,
)
from aiot.host.store.compare import compare, compare_by
from tests.unit.test_compare import rec

AM_OUTPUT = """\
INSTRUMENTATION_STATUS: aiot={"v": 1, "event": "progress", "phase": "timed", "done": 1, "total": 3}
INSTRUMENTATION_STATUS_CODE: 1
INSTRUMENTATION_STATUS: aiot=a human line = with an equals sign
INSTRUMENTATION_STATUS_CODE: 1
INSTRUMENTATION_STATUS: aiot_more=1
INSTRUMENTATION_STATUS: aiot={"v": 1, "event": "res
INSTRUMENTATION_STATUS_CODE: 1
INSTRUMENTATION_STATUS: aiot=ult"}
INSTRUMENTATION_STATUS_CODE: 1
INSTRUMENTATION_RESULT: aiot_cgroup=0::/uid_10234/pid_4711\\n1:cpuset:/top-app
INSTRUMENTATION_RESULT: aiot_cpuset=/top-app
INSTRUMENTATION_RESULT: aiot_exit=0
INSTRUMENTATION_RESULT: aiot_foreground=1
INSTRUMENTATION_RESULT: aiot_lines=3
INSTRUMENTATION_RESULT: aiot_reason=exited
INSTRUMENTATION_RESULT: aiot_stderr=warn: a\\\\b\\nsecond line
INSTRUMENTATION_CODE: -1
"""


def test_status_lines_become_the_agents_lines_and_the_result_its_outcome():
    lines: list[str] = []
    parser = StatusParser(lines.append)
    for line in AM_OUTPUT.splitlines():
        parser.feed(line)
    assert lines == ['{"v": 1, "event": "progress", "phase": "timed", "done": 1, "total": 3}',
                     "a human line = with an equals sign", '{"v": 1, "event": "result"}']
    outcome = parser.outcome()
    assert (outcome["reason"], outcome["exit"], outcome["foreground"]) == ("exited", 0, True)
    assert outcome["cpuset"] == "/top-app" and outcome["cgroup"].endswith("cpuset:/top-app")
    assert outcome["stderr"] == "warn: a\\b\nsecond line" and parser.code == -1
    assert parser.failure is None and parser.other == [] and outcome["emulated"] is False


def test_failure_and_crash_lines_are_kept():
    parser = StatusParser(lambda line: None)
    for line in ("INSTRUMENTATION_FAILED: org.aiot.agent/.AgentInstrumentation",
                 "android.util.AndroidException: something"):
        parser.feed(line)
    assert parser.failure.startswith("INSTRUMENTATION_FAILED") and parser.other
    assert parser.outcome()["reason"] is None


def test_spec_round_trip_and_argv():
    spec = encode_spec(["/data/local/tmp/aiot/py", "-m", "device_agent", "run", "a b'c"],
                       {"PYTHONPATH": "/x"}, "/data/local/tmp/aiot", 12.5)
    assert decode_spec(spec) == {"argv": ["/data/local/tmp/aiot/py", "-m", "device_agent", "run", "a b'c"],
                                 "env": {"PYTHONPATH": "/x"}, "cwd": "/data/local/tmp/aiot",
                                 "timeout_ms": 12500}
    assert instrument_argv(spec) == ["am", "instrument", "-w", "-r", "-e", "spec", spec,
                                     "org.aiot.agent/org.aiot.agent.AgentInstrumentation"]
    assert "foreground" in instrument_argv(spec, foreground=False)
    assert unescape("a\\nb\\\\n") == "a\nb\\n"


def test_via_is_in_the_spec_only_for_app_runs():
    from dataclasses import replace

    from aiot.host.engine.campaign import run_key
    from aiot.host.engine.runs import RunRequest

    shell = RunRequest("phone", "tiny_cnn", "tflite", 1)
    app = replace(shell, via="app")
    assert "via" not in shell.to_spec() and app.to_spec()["via"] == "app"
    assert run_key(shell) != run_key(app) and app.label().endswith("1t via app @ phone")


def test_compare_by_via_pairs_shell_and_app_runs_of_one_set():
    shell = [rec(10.0, threads=t) for t in (1, 2)]
    app = [rec(8.0, threads=t, via="app") for t in (1, 2)]
    other = rec(20.0, model="mobilenet_v2")  # shell only
    result = compare_by([*shell, *app, other], "via", [])
    statuses = sorted((row.key["model"], row.key["threads"], row.status) for row in result.rows)
    assert statuses == [("mobilenet_v2", 1, "only in A"), ("resnet18", 1, "faster"),
                        ("resnet18", 2, "faster")]
    row = next(r for r in result.rows if r.status == "faster")
    assert "via" not in row.key and row.metrics["median"]["change"] == pytest.approx(-0.2, abs=0.02)
    assert not result.failing
    # Across two sets, a shell and an app run of the same thing are different runs.
    assert [r.status for r in compare([shell[0]], [app[0]], []).rows] == ["only in A", "only in B"]
    with pytest.raises(UsageError, match="unknown --by"):
        compare_by([], "cluster", [])


@pytest.mark.parametrize(("command", "handled"), [
    ("pm install -r /data/local/tmp/aiot/blobs/x/aiot-agent.apk", True),
    ("am instrument -w -r -e spec 'ab+c=' org.aiot.agent/org.aiot.agent.AgentInstrumentation", True),
    ("am force-stop org.aiot.agent", True),
    ("run-as org.aiot.agent sh -c 'set -e; mkdir -p files; echo done'", True),
    ("run-as org.aiot.agent ls; rm -rf /", False),
    ("pm list packages; rm -rf /", False),
    ("sh -c 'pm list packages'", False),
    ("uname -m", False),
    ("pm 'unterminated", False),
])
def test_emulated_phone_answers_only_plain_pm_am_and_run_as(command, handled):
    from aiot.host.emulator.android_apps import handles

    assert handles(command) is handled


def test_build_from_an_installed_aiot_says_it_needs_the_checkout(monkeypatch):
    from aiot.core import paths
    from aiot.host.app.build import sources_dir

    monkeypatch.setattr(paths, "source_root", lambda: None)
    with pytest.raises(UsageError, match="needs an aiot source checkout"):
        sources_dir()


def test_version_code_grows_with_the_version():
    from aiot.host.app.build import version_code

    assert version_code("0.1.0") == 100 and version_code("1.2.3") == 10203
    assert version_code("0.0.0") == 1 and version_code("2.0.0rc1") == 20000
