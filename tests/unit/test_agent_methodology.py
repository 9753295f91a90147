"""The agent's measurement methodology: robust statistics, repeat-until-stable, the memory pass,
and the null test backend with its converter."""

import json
import math
import statistics
import subprocess
import sys

import pytest

from aiot.device_agent import agent as agent_mod
from aiot.device_agent import process, protocol
from aiot.device_agent import stats as st
from aiot.device_agent.backends import ArtifactLoadError
from aiot.device_agent.signature import SpecError
from aiot.device_agent.spec import RunSpec


def _ns(values_ms):
    return [round(v * 1e6) for v in values_ms]


# --- statistics ---------------------------------------------------------------------------

def test_mad_and_robust_cv_ignore_one_spike():
    s = st.summarize_ms(_ns([1, 2, 3, 4, 100]))
    # |x - 3| = 2, 1, 0, 1, 97 → median 1
    assert s["median"] == 3.0 and s["mad"] == 1.0
    assert s["robust_cv"] == pytest.approx(1.4826 / 3)
    assert s["cv"] > 1.5  # std / mean is dominated by the spike


def test_trimmed_mean_cuts_ten_percent_each_side():
    values = [float(v) for v in range(1, 10)] + [100.0]
    trimmed = st.summarize_ms(_ns(values))["trimmed_mean"]  # 1 and 100 are cut
    assert trimmed == pytest.approx(statistics.fmean(range(2, 10)))
    few = [1.0, 2.0, 3.0, 4.0, 100.0]  # fewer than 10: nothing is cut
    assert st.summarize_ms(_ns(few))["trimmed_mean"] == pytest.approx(statistics.fmean(few))


def _coverage(n, lower):
    """P(x(l) <= median < x(n+1-l)) = 1 - 2 P(B <= l - 1), B ~ Binomial(n, 1/2)."""
    return 1 - 2 * sum(math.comb(n, k) for k in range(lower)) / 2**n


def test_median_ci_ranks_for_ten_samples():
    assert st.median_ci_ranks(10) == (2, 9)
    assert _coverage(10, 2) == pytest.approx(1 - 22 / 1024) and _coverage(10, 2) >= 0.95
    assert _coverage(10, 3) < 0.95  # rank 3 would be narrower but too unsure
    values = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0, 4.0, 6.0, 10.0]
    ci = st.summarize_ms(_ns(values))["median_ci"]
    assert ci == {"level": 0.95, "low": 2.0, "high": 9.0, "ranks": [2, 9]}


def test_median_ci_needs_six_samples():
    assert [st.median_ci_ranks(n) for n in range(6)] == [None] * 6
    assert st.median_ci_ranks(6) == (1, 6) and _coverage(6, 1) == pytest.approx(1 - 2 / 64)
    assert st.summarize_ms(_ns([1, 2, 3, 4, 5]))["median_ci"] is None


@pytest.mark.parametrize("n", [*range(6, 120), 1000, 4321])
def test_median_ci_rank_is_the_largest_with_enough_coverage(n):
    lower, upper = st.median_ci_ranks(n)
    assert upper == n + 1 - lower
    assert _coverage(n, lower) >= 0.95 > _coverage(n, lower + 1)


@pytest.mark.parametrize("n", [6, 500, 9_999, 10_000, 10_001, 20_000])
def test_float_tail_agrees_with_the_exact_one(n):
    assert st._lower_rank_float(n, 0.025) == st._lower_rank_exact(n, 0.025)


def test_tukey_outliers_point_into_the_raw_samples():
    values = [10, 11, 12, 10, 11, 50, 11, 1, 12, 10]
    s = st.summarize_ms(_ns(values))
    # sorted: 1 10 10 10 11 11 11 12 12 50 → q1 = 10, q3 = 11.75, fences 7.375 and 14.375
    assert s["q1"] == 10.0 and s["q3"] == pytest.approx(11.75)
    assert s["outliers"]["fences"] == pytest.approx([7.375, 14.375])
    assert {k: s["outliers"][k] for k in ("count", "low", "high", "indices")} == {
        "count": 2, "low": 1, "high": 1, "indices": [5, 7]}


def test_outlier_indices_are_capped():
    values = [1.0] * 1000 + [100.0] * 150
    out = st.summarize_ms(_ns(values))["outliers"]
    assert out["count"] == out["high"] == 150 and out["low"] == 0
    assert out["indices"] == list(range(1000, 1000 + st.OUTLIER_INDEX_CAP))


def test_summary_keeps_every_earlier_key_and_is_json():
    s = st.summarize_ms(_ns([3, 1, 2, 5, 4, 6, 8, 7]))
    assert {"count", "min", "max", "mean", "std", "median", "q1", "q3", "iqr", "p90", "p99",
            "cv"} <= set(s)
    assert json.loads(json.dumps(s, allow_nan=False)) == s


# --- repeat-until-stable with the null backend ----------------------------------------------

def _null_artifact(path, sleep_ms=0.2, outputs=10):
    path.write_text(json.dumps({"format": "aiot-null", "sleep_ms": sleep_ms,
                                "input_shape": [1, 1, 4, 4], "outputs": outputs}))
    return str(path)


def _run(tmp_path, sleep_ms=0.2, **over):
    spec = {"v": 1, "backend": "null", "artifact": _null_artifact(tmp_path / "m.json", sleep_ms),
            "warmup_runs": 1, "warmup_min_s": 0.0, "min_runs": 5, "min_s": 0.0, "max_s": 30.0}
    spec.update(over)
    return agent_mod.run(RunSpec.from_wire(spec))


def test_without_target_the_minimum_ends_the_run(tmp_path):
    res = _run(tmp_path)
    assert res["stability"] == {"target_cv": None, "cv": res["stats_ms"]["robust_cv"],
                                "cv_metric": "robust_cv", "stable": None, "stopped_by": "min_runs"}
    assert len(res["samples_ns"]) == 5 and res["output"]["size"] == 10
    assert min(res["samples_ns"]) >= 0.2e6  # each inference sleeps 0.2 ms


def test_target_met_at_the_minimum(tmp_path):
    res = _run(tmp_path, min_runs=20, target_cv=10.0)
    assert res["stability"]["stopped_by"] == "min_runs" and res["stability"]["stable"] is True
    assert len(res["samples_ns"]) == 20


def test_target_cv_extends_the_run_until_met(tmp_path):
    # Below MIN_CV_SAMPLES the CV is not judged, so 3 runs become 10 even with a loose target.
    res = _run(tmp_path, min_runs=3, target_cv=10.0)
    assert len(res["samples_ns"]) == agent_mod.MIN_CV_SAMPLES
    assert res["stability"]["stopped_by"] == "target_cv" and res["stability"]["stable"] is True


def test_unreachable_target_stops_at_max_runs(tmp_path):
    res = _run(tmp_path, target_cv=1e-12, max_runs=15)
    assert len(res["samples_ns"]) == 15
    assert res["stability"]["stopped_by"] == "max_runs" and res["stability"]["stable"] is False
    assert res["stability"]["target_cv"] == 1e-12


def test_unreachable_target_stops_at_max_s(tmp_path):
    res = _run(tmp_path, sleep_ms=1.0, target_cv=1e-12, max_s=0.1)
    assert res["stability"]["stopped_by"] == "max_s" and res["stability"]["stable"] is False
    assert 5 <= len(res["samples_ns"]) <= 100  # each iteration sleeps at least 1 ms


def test_max_runs_caps_even_without_a_target(tmp_path):
    res = _run(tmp_path, min_s=10.0, max_runs=8)
    assert len(res["samples_ns"]) == 8 and res["stability"]["stopped_by"] == "max_runs"


def test_max_s_can_end_the_run_before_min_runs(tmp_path):
    res = _run(tmp_path, min_runs=100_000, max_s=0.05)
    assert res["stability"]["stopped_by"] == "max_s" and len(res["samples_ns"]) < 100_000


@pytest.mark.parametrize(("over", "match"), [
    ({"target_cv": 0}, "'target_cv' must be a number > 0"),
    ({"target_cv": -0.1}, "'target_cv'"),
    ({"target_cv": "0.05"}, "'target_cv'"),
    ({"target_cv": True}, "'target_cv'"),
    ({"target_cv": float("inf")}, "'target_cv'"),
    ({"max_runs": 0}, "'max_runs' must be a positive integer or null"),
    ({"max_runs": 12.5}, "'max_runs'"),
    ({"max_runs": True}, "'max_runs'"),
    ({"min_runs": 50, "max_runs": 10}, r"'max_runs' \(10\) is below 'min_runs' \(50\)"),
])
def test_run_spec_refuses_bad_stability_keys(over, match):
    spec = {"v": 1, "backend": "null", "artifact": "m.json", **over}
    with pytest.raises(SpecError, match=match):
        RunSpec.from_wire(spec)


def test_stability_keys_default_to_off():
    spec = RunSpec.from_wire({"v": 1, "backend": "null", "artifact": "m.json"})
    assert spec.target_cv is None and spec.max_runs is None


def test_null_backend_refuses_a_foreign_artifact(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "aiot-null", "sleep_ms": -1, "input_shape": [1],
                               "outputs": 1}))
    spec = RunSpec.from_wire({"v": 1, "backend": "null", "artifact": str(bad)})
    with pytest.raises(ArtifactLoadError, match="sleep_ms"):
        agent_mod.run(spec)


# --- the memory command ------------------------------------------------------------------

def _agent(tmp_path, command, spec):
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    proc = subprocess.run([sys.executable, "-m", "aiot.device_agent", command, str(spec_file)],
                          capture_output=True, text=True, timeout=120)
    messages = [m for m in map(protocol.decode, proc.stdout.splitlines()) if m]
    return proc.returncode, messages[-1]


def test_memory_command_reports_rss_in_a_fresh_process(tmp_path):
    code, msg = _agent(tmp_path, "memory", {"v": 1, "backend": "null",
                                            "artifact": _null_artifact(tmp_path / "m.json")})
    assert code == 0 and msg["event"] == "memory", msg
    assert set(msg) - {"v", "event"} == {"backend", "runtime_version", "threads", "runs",
                                         "rss_before_load_kb", "rss_after_load_kb", "peak_rss_kb"}
    assert msg["backend"] == "null" and msg["runs"] == 3 and msg["peak_rss_kb"] > 0
    if sys.platform.startswith("linux"):
        assert 0 < msg["rss_before_load_kb"] and 0 < msg["rss_after_load_kb"] <= msg["peak_rss_kb"]


def test_memory_command_refuses_bad_runs(tmp_path):
    code, msg = _agent(tmp_path, "memory", {"v": 1, "backend": "null", "runs": 0,
                                            "artifact": _null_artifact(tmp_path / "m.json")})
    assert code == 3 and msg["event"] == "error" and "'runs'" in msg["message"]


def test_current_rss_is_none_without_procfs(monkeypatch):
    def no_proc(*_a, **_k):
        raise FileNotFoundError("/proc/self/status")

    monkeypatch.setattr(process, "open", no_proc, raising=False)
    assert process.current_rss_kb() is None


# --- the null converter, end to end ------------------------------------------------------

def test_null_format_is_registered_and_available_but_not_listed():
    # users never see it (convert --list, --format all: tests/cli/test_cli_first_contact.py);
    # the suite uses it by name
    from aiot.converters import get_converter

    null = get_converter("null")
    assert null.internal and null.availability().ok and null.backend == "null"
    assert "TEST" in null.description


def test_null_conversion_skips_parity_and_runs_on_the_agent(tmp_path):
    pytest.importorskip("torch")
    from aiot.converters.api import convert_model
    from aiot.converters.sidecar import read_sidecar
    from aiot.host.devices.agent_client import AgentSession
    from aiot.host.devices.deploy import push_file
    from aiot.host.transports.local import LocalTransport

    res = convert_model("tiny_cnn", "null", tmp_path / "art", options={"sleep_ms": "0.5"},
                        dataset_samples=0)
    assert res.artifact.name == "tiny_cnn.sleep_ms-0.5.null.json" and res.parity is None
    assert json.loads(res.artifact.read_text()) == {
        "format": "aiot-null", "sleep_ms": 0.5, "input_shape": [1, 1, 28, 28], "outputs": 10}
    sidecar = read_sidecar(res.artifact)
    assert sidecar["parity"] is None and sidecar["backend"] == "null"
    assert sidecar["converter"]["options"] == {"sleep_ms": "0.5"}
    with AgentSession(LocalTransport(root=tmp_path / "dev")) as session:
        remote = push_file(session.transport, res.artifact).remote
        out = session.run({"v": 1, "backend": "null", "artifact": remote, "warmup_runs": 1,
                           "warmup_min_s": 0.0, "min_runs": 3, "min_s": 0.0, "target_cv": 5.0})
    assert out["backend"] == "null" and out["input_shape"] == [1, 1, 28, 28]
    assert out["stability"]["stopped_by"] == "target_cv" and out["stats_ms"]["median"] >= 0.5


def test_null_converter_refuses_a_bad_sleep(tmp_path):
    from aiot.converters.api import convert_model
    from aiot.core.errors import UsageError

    with pytest.raises(UsageError, match="sleep_ms"):
        convert_model("tiny_cnn", "null", tmp_path, options={"sleep_ms": "-1"})
