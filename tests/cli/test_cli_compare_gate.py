"""``aiot results compare`` as the CI gate on a user's model that changes: three commits of
one model file swept on ``local`` (tests/changed_model.py), the first exported as the
baseline; the 8x slower commit fails the gate whatever flags are given, a comment-only commit
passes, and the JUnit and Markdown reports say so."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tests.changed_model import (  # noqa: F401 (changed_model: a fixture)
    assert_fails_whatever_flags,
    changed_model,
    compare,
)

pytestmark = pytest.mark.slow  # three real sweeps (conversions included): about 25 s


def test_a_changed_model_8x_slower_fails_the_gate_whatever_flags(cli, changed_model, tmp_path,
                                                                  monkeypatch):
    commits = changed_model
    assert commits.medians["slow"] > 4 * commits.medians["v1"], commits.medians  # ~8x measured
    assert commits.shas["slow"] != commits.shas["v1"]
    summary = tmp_path / "step-summary.md"
    summary.write_text("an earlier step's summary\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    junit, md = tmp_path / "gate.xml", tmp_path / "gate.md"
    result = compare(cli, commits, "slow", "--junit", str(junit), "--markdown", str(md), code=1)
    a_sha, b_sha = commits.shas["v1"][:8], commits.shas["slow"][:8]
    assert "│ + │ slower" in result.stdout and a_sha in result.stdout and b_sha in result.stdout
    assert "│ x │" not in result.stdout and "not comparable" not in result.stderr
    data = json.loads(compare(cli, commits, "slow", "--json", code=1).stdout)
    [row] = data["rows"]
    assert (row["status"], row["other_artifact"]) == ("slower", True)
    assert (row["a_sha256"], row["b_sha256"]) == (commits.shas["v1"], commits.shas["slow"])
    assert row["metrics"]["median"]["change"] > 3 and data["invalid"] == []
    assert "  mynet.py:make · onnx · 1t @ local (B " in result.stderr
    assert f"artifact {a_sha} → {b_sha}): median +" in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "gate failed (median:20%): 1 run(s) failed; 1 pair(s) compared (1 of another "
        "artifact), 0 judged on INVALID runs")
    assert "--allow-missing" not in result.output and "--other-artifacts" not in result.output

    root = ET.parse(junit).getroot()  # what GitLab's and Jenkins' test reports read
    assert (root.tag, root.get("tests"), root.get("failures")) == ("testsuites", "1", "1")
    [suite] = root
    assert (suite.tag, suite.get("name"), suite.get("skipped")) == ("testsuite",
                                                                      "aiot results compare", "0")
    [case] = suite.findall("testcase")
    assert case.get("classname") == "mynet.py:make.onnx"
    assert case.get("name") == "mynet.py:make · onnx · 1t @ local"
    failure = case.find("failure")
    assert failure.get("message").startswith("median +") and "> 20%" in failure.get("message")
    assert f"artifact A {a_sha}, B {b_sha}" in case.find("system-out").text

    text = md.read_text()
    assert "**gate failed (median:20%)**" in text and f"`{a_sha}` | `{b_sha}`" in text
    assert "| `+` | slower | mynet.py:make · onnx · 1t @ local |" in text
    assert summary.read_text() == "an earlier step's summary\n" + text + "\n"  # appended

    assert_fails_whatever_flags(cli, commits, "slow", result, tmp_path)


def test_a_comment_only_change_passes(cli, changed_model, tmp_path):
    commits = changed_model
    junit = tmp_path / "gate.xml"
    result = compare(cli, commits, "comment", "--junit", str(junit), code=0)
    verdict = result.stderr.splitlines()[-1]
    assert verdict.startswith("gate passed (median:20%): ") and "1 pair(s) compared" in verdict
    [case] = ET.parse(junit).getroot().iter("testcase")
    assert case.find("failure") is None and case.find("error") is None
    # The same artifact, or another one if the converter's bytes differ: shown either way.
    assert commits.shas["comment"][:8] in result.stdout
