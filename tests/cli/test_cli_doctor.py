"""``aiot devices doctor``: a table for people, JSON for scripts, exit 1 when a check failed."""

import json

import pytest


@pytest.fixture
def blocked_workdir(tmp_path, monkeypatch):
    """A local workdir that cannot be created: its parent is a regular file (root or not)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("AIOT_LOCAL_WORKDIR", str(blocker / "device"))


def test_doctor_local_json_all_ok(cli):
    report = cli.json("devices", "doctor", "local")
    assert report["name"] == "local" and report["ok"] is True
    statuses = {c["name"]: c["status"] for c in report["checks"]}
    assert statuses["reachable"] == statuses["python"] == statuses["onnxruntime"] == "ok"
    assert set(report["checks"][0]) == {"name", "ok", "status", "detail", "fix", "warn"}


def test_doctor_table_for_people(cli):
    result = cli("devices", "doctor")
    assert "workdir" in result.stdout and "ai_edge_litert" in result.stdout
    assert "all checks passed" in result.stderr and "all checks passed" not in result.stdout


def test_doctor_failure_shows_the_fix_and_exits_1(cli, blocked_workdir):
    result = cli("devices", "doctor", code=1)
    assert "fail" in result.stdout and "AIOT_LOCAL_WORKDIR" in result.stdout
    assert "checks failed" in result.stderr


def test_doctor_json_on_failure_still_prints_the_report(cli, blocked_workdir):
    report = json.loads(cli("devices", "doctor", "--json", code=1).stdout)
    assert report["ok"] is False
    (workdir,) = [c for c in report["checks"] if c["name"] == "workdir"]
    assert workdir["status"] == "fail" and "AIOT_LOCAL_WORKDIR" in workdir["fix"]


def test_doctor_unknown_device(cli):
    result = cli("devices", "doctor", "pixle", code=2)
    assert "unknown device 'pixle'" in result.stderr and result.stdout == ""
