"""``aiot results compare`` (a CI gate) and ``aiot results top`` over hand-filled stores."""

import json
import os
from pathlib import Path

import pytest

from aiot.device_agent.stats import summarize_ms
from aiot.host.store import open_store

SHA = "ab" * 32


def samples(center_ms: float, spread_ms: float) -> list[int]:
    """105 latencies in ns spread evenly over center ± spread: their median is the center."""
    return [int((center_ms + (i % 21 - 10) / 10 * spread_ms) * 1e6) for i in range(105)]


def store_run(store, sweep, center=10.0, spread=0.05, status="ok", model="tiny_cnn", fmt="onnx",
              threads=1, sha=SHA, runtime="1.20", validity="VALID", **spec_extra):
    spec = {"device": "local", "model": model, "format": fmt, "threads": threads, **spec_extra}
    provenance = {"device": {"cpu_model": "x86", "cores": 8},
                  "runtime": {"backend": "onnxruntime", "version": runtime}}
    r = store.begin("latency", spec, provenance, sweep_id=sweep, device="local", model=model,
                    format=fmt, threads=threads)
    if status != "ok":
        store.finish(r.id, status, reason="agent crashed")
        return r.id
    stats = summarize_ms(samples(center, spread))
    store.finish(r.id, "ok", result={"stats_ms": stats}, artifact_sha256=sha, size_bytes=4096,
                 median_ms=stats["median"], p90_ms=stats["p90"], validity=validity)
    return r.id


@pytest.fixture
def results():
    """The store the CLI reads (the conftest points AIOT_RESULTS_DIR at a tmp folder)."""
    with open_store(Path(os.environ["AIOT_RESULTS_DIR"])) as store:
        yield store


@pytest.fixture
def baseline(results):
    store_run(results, "base", 10.0)
    store_run(results, "base", 20.0, threads=4)
    return results


def test_injected_ten_percent_slowdown_fails_the_gate(cli, baseline):
    store_run(baseline, "cand", 10.0)
    slow = store_run(baseline, "cand", 22.0, threads=4)
    result = cli("results", "compare", "base", "cand", "--fail-on", "median:5%", code=1)
    assert "gate failed (median:5%): 1 run(s)" in result.stderr
    assert (f"tiny_cnn · onnx · 4t @ local (B {slow[:8]}, artifact abababab): median +10.0% > 5%"
            in result.stderr)
    assert result.stderr.splitlines()[-1] == ("gate failed (median:5%): 1 run(s) failed; 2 pair(s) "
                                              "compared, 0 judged on INVALID runs")
    assert "slower" in result.stdout and "+10.0%" in result.stdout
    cli("results", "compare", "base", "cand", code=1)  # median:5% is the default gate
    cli("results", "compare", "base", "cand", "--fail-on", "median:15%")


def test_one_percent_within_noise_passes(cli, results):
    store_run(results, "base", 10.0, spread=1.0)
    store_run(results, "cand", 10.1, spread=1.0)
    result = cli("results", "compare", "base", "cand", "--fail-on", "median:0.5%")
    assert "within noise" in result.stdout and "gate passed (median:0.5%)" in result.stderr


def test_export_file_as_baseline(cli, baseline, tmp_path):
    exported = tmp_path / "base.json"
    cli("results", "export", "--sweep", "base", "-o", str(exported))
    store_run(baseline, "cand", 11.0)
    store_run(baseline, "cand", 20.0, threads=4)
    data = json.loads(cli("results", "compare", str(exported), "cand", "--json", code=1).stdout)
    assert data["a"] == {"name": str(exported), "source": "file", "records": 2}
    assert data["b"]["source"] == "sweep" and not data["passed"]
    assert data["failing"] == ["tiny_cnn · onnx · 1t @ local"]
    rows = {r["key"]["threads"]: r for r in data["rows"]}
    assert (rows[1]["status"], rows[1]["marker"]) == ("slower", "+")
    assert rows[1]["failures"] == ["median +10.0% > 5%"]
    assert rows[4]["status"] == "unchanged"


def test_another_artifact_is_compared_and_shows_both_shas(cli, results):
    """The user's model changed (another sha256): that is what the gate is for."""
    store_run(results, "base", 10.0)
    slow = store_run(results, "cand", 12.0, sha="cd" * 32)
    result = cli("results", "compare", "base", "cand", code=1)
    assert "│ + │ slower" in result.stdout and "│ x │" not in result.stdout
    assert "abababab" in result.stdout and "cdcdcdcd" in result.stdout
    assert "another artifact" in result.stdout
    assert (f"tiny_cnn · onnx · 1t @ local (B {slow[:8]}, artifact abababab → cdcdcdcd): "
            "median +20.0% > 5%") in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "gate failed (median:5%): 1 run(s) failed; 1 pair(s) compared (1 of another artifact), "
        "0 judged on INVALID runs")
    data = json.loads(cli("results", "compare", "base", "cand", "--json", code=1).stdout)
    [row] = data["rows"]
    assert (row["a_sha256"], row["b_sha256"], row["other_artifact"]) == (SHA, "cd" * 32, True)
    assert data["other_artifacts"] == [row["label"]] and data["compared"] == 1
    # The flag that once compared them is accepted, does nothing, and fails nothing less.
    for flags in (["--other-artifacts"], ["--allow-missing"],
                  ["--other-artifacts", "--allow-missing"]):
        again = cli("results", "compare", "base", "cand", *flags, code=1)
        assert "gate failed" in again.stderr.splitlines()[-1]


def test_another_host_is_not_comparable_and_no_flag_passes_it(cli, results, monkeypatch):
    from aiot.host.store import identity

    monkeypatch.setenv(identity.HOST_ENV, "ci-a")
    store_run(results, "base", 10.0)
    monkeypatch.setenv(identity.HOST_ENV, "ci-b")
    store_run(results, "cand", 10.0)
    for flags in ([], ["--allow-missing"], ["--other-artifacts"]):
        result = cli("results", "compare", "base", "cand", *flags, code=3)
        assert "host ci-a vs ci-b (another machine)" in result.stdout
        assert "B is incomplete, nothing was compared: 1 pair(s) not comparable" in result.stderr
        assert "AIOT_HOST_ID" in result.stderr and "--allow-missing" not in result.stderr


def test_newly_failing_fails_and_environment_differences_warn(cli, results):
    a = store_run(results, "base", 10.0)
    store_run(results, "base", 10.0, fmt="tflite")
    b = store_run(results, "cand", 10.0, runtime="1.21")
    store_run(results, "cand", status="failed", fmt="tflite")
    result = cli("results", "compare", f"{a[:8]}", f"{b[:8]}")  # record ids: runtime only differs
    assert "warning: environments differ: runtime.version (1 of 1)" in result.stderr
    result = cli("results", "compare", "base", "cand", code=1)
    assert "newly failing" in result.stdout
    assert "tiny_cnn · tflite · 1t @ local" in result.stderr
    assert "newly failed: agent crashed" in result.stderr


@pytest.mark.parametrize("args, says", [
    (["base", "nosuch"], "error: 'nosuch' is not a file, a sweep id or a record id"),
    (["base", "base", "--fail-on", "median:5"], "error: bad --fail-on 'median:5'"),
    (["base", "base", "--fail-on", "speed:5%"], "unknown --fail-on metric 'speed'"),
])
def test_usage_errors_exit_2_in_one_line(cli, baseline, args, says):
    result = cli("results", "compare", *args, code=2)
    assert says in result.stderr and "Traceback" not in result.output and result.stdout == ""


# -- top ---------------------------------------------------------------------------------------

def test_top_latency_ranks_the_best_valid_run_per_configuration(cli, results):
    store_run(results, "s", 12.0)
    best = store_run(results, "s", 10.0)
    store_run(results, "s", 5.0, validity="INVALID")
    four = store_run(results, "s", 4.0, threads=4)
    tflite = store_run(results, "s", 8.0, fmt="tflite")
    board = cli.json("results", "top", "--by", "latency")
    assert [(s["rank"], s["record_id"]) for s in board] == [(1, four), (2, tflite), (3, best)]
    only = cli.json("results", "top", "--threads", "1", "--format", "onnx")
    assert [s["record_id"] for s in only] == [best]
    assert len(cli.json("results", "top", "--limit", "1")) == 1
    out = cli("results", "top").stdout
    assert "fastest VALID run" in out and best[:8] in out and "agent" in out


def test_top_om_infer_ranks_binarizations(cli, results):
    store_run(results, "s", 10.0, model="resnet18", fmt="tflite")
    store_run(results, "s", 2.0, model="resnet18", fmt="lce", binarize="bnn")
    store_run(results, "s", 5.0, model="resnet18", fmt="dabnn", binarize="reactnet")
    board = cli.json("results", "top", "--by", "om-infer")
    assert [(s["rank"], s["algorithm"], s["speedup"]) for s in board] == [
        (1, "bnn", pytest.approx(5.0, rel=1e-3)), (2, "reactnet", pytest.approx(2.0, rel=1e-3))]
    dabnn = cli.json("results", "top", "--by", "om-infer", "-f", "dabnn")
    assert [s["format"] for s in dabnn] == ["dabnn"]


def test_top_vips_ranks_devices(cli, results):
    for device, center in (("pi4", 100.0), ("pixel", 50.0)):
        spec = {"device": device, "model": "resnet50", "format": "tflite", "threads": 4}
        r = results.begin("latency", spec, {}, device=device, model="resnet50", format="tflite",
                          threads=4)
        results.finish(r.id, "ok", result={"stats_ms": {"mean": center, "median": center}},
                       median_ms=center, accuracy=0.75, validity="VALID")
    board = cli.json("results", "top", "--by", "vips")
    assert [(s["rank"], s["device"]) for s in board] == [(1, "pixel"), (2, "pi4")]
    assert board[0]["vips"] == pytest.approx(0.75 / 0.05)


def test_top_errors_and_empty_store(cli):
    assert "unknown leaderboard 'speed'" in cli("results", "top", "--by", "speed", code=2).stderr
    assert cli.json("results", "top") == []
    assert "nothing to rank by latency" in cli("results", "top").stderr


def test_compare_json_is_plain(cli, baseline):
    store_run(baseline, "cand", 10.0)
    data = json.loads(cli("results", "compare", "base", "cand", "--json", "--allow-missing").stdout)
    assert data["checks"] == ["median:5%"] and data["passed"] and data["incomplete"] is None
    assert data["counts"] == {"only in A": 1, "unchanged": 1}
    assert data["missing"] == ["tiny_cnn · onnx · 4t @ local"]


def test_compare_table_says_why_a_side_is_invalid_and_which_device_is_emulated(cli, results):
    store_run(results, "base", 10.0)
    r = results.begin("latency", {"device": "local", "model": "tiny_cnn", "format": "onnx", "threads": 1},
                      {"device": {"cpu_model": "x86", "cores": 8, "labels": {"emulated": "ssh"}},
                       "runtime": {"backend": "onnxruntime", "version": "1.20"}},
                      sweep_id="cand", device="local", model="tiny_cnn", format="onnx", threads=1)
    stats = summarize_ms(samples(10.0, 0.05))
    results.finish(r.id, "ok", artifact_sha256=SHA, size_bytes=4096, median_ms=stats["median"],
                   p90_ms=stats["p90"], validity="INVALID",
                   result={"stats_ms": stats, "validity": {"verdict": "INVALID", "reasons": [
                       "emulated device: the timings are this host's, not the device's"]}})
    out = cli("results", "compare", "base", "cand").stdout
    assert "B INVALID: emulated device" in out and "@ local (emulated)" in out
    verdict = cli("results", "compare", "base", "cand").stderr.splitlines()[-1]
    assert verdict.endswith("1 pair(s) compared, 1 judged on INVALID runs")
    strict = cli("results", "compare", "base", "cand", "--fail-on-invalid", code=1)
    assert "B INVALID: emulated device" in strict.stderr
    assert json.loads(cli("results", "compare", "base", "cand", "--json").stdout)["invalid"] == [
        "tiny_cnn · onnx · 1t @ local"]


def test_junit_and_markdown_reports(cli, baseline, tmp_path, monkeypatch):
    """One test case per configuration; the job summary appended to, never replaced."""
    import xml.etree.ElementTree as ET

    store_run(baseline, "cand", 12.0)  # 1t: +20%, fails; 4t: only in A
    store_run(baseline, "cand", 10.0, model="new\x1bnet")  # only in B, a control character
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    junit = tmp_path / "out" / "gate.xml"
    junit.parent.mkdir()
    result = cli("results", "compare", "base", "cand", "--junit", str(junit), "--markdown",
                 str(summary), code=1)
    assert f"wrote the JUnit report to {junit}" in result.stderr
    suite = ET.parse(junit).getroot().find("testsuite")
    assert {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "3", "failures": "1", "errors": "1", "skipped": "1"}
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["tiny_cnn · onnx · 1t @ local"].find("failure").get("message") == (
        "median +20.0% > 5%")
    assert cases["tiny_cnn · onnx · 4t @ local"].find("error").get("type") == "missing"
    assert cases["new?net · onnx · 1t @ local"].find("skipped") is not None
    assert cases["tiny_cnn · onnx · 1t @ local"].get("classname") == "tiny_cnn.onnx"
    text = summary.read_text()  # --markdown named the job summary itself: appended once
    assert text.startswith("earlier step\n### aiot results compare: gate failed (median:5%)")
    assert text.count("### aiot results compare") == 1 and "| `<` | only in A |" in text
    assert "new?net" in text and "\x1b" not in text
    store = Path(os.environ["AIOT_RESULTS_DIR"]) / "aiot.sqlite"
    refused = cli("results", "compare", "base", "cand", "--junit", str(store), code=2)
    assert "is aiot's result store" in refused.stderr
    same = cli("results", "compare", "base", "cand", "--junit", str(junit), "--markdown",
               str(junit), code=2)
    assert "--junit and --markdown name the same file" in same.stderr
