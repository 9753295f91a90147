"""Comparing result sets: matching, noise, statuses, thresholds, set resolution, leaderboard."""

import json

import pytest

from aiot.core.errors import UsageError
from aiot.device_agent.stats import summarize_ms
from aiot.host.store import RunRecord, open_store
from aiot.host.store.compare import (
    Check,
    compare,
    latency_board,
    load_export,
    parse_check,
    representatives,
    resolve_set,
)

_ids = iter(range(10_000))
SHA = "ab" * 32


def samples(center_ms: float, spread_ms: float, n: int = 100) -> list[int]:
    """``n`` latencies in ns spread evenly over center ± spread (deterministic)."""
    return [int((center_ms + (i % 21 - 10) / 10 * spread_ms) * 1e6) for i in range(n)]


def rec(median=10.0, spread=0.05, status="ok", device="pi4", model="resnet18", fmt="tflite",
        threads=1, sha=SHA, created="2025-01-01T00:00:00+00:00", facts=None, runtime=None,
        validity="VALID", reason=None, ci=True, **spec_extra):
    """A finished latency record; ``median`` None: a native tool that prints a mean only."""
    spec = {"device": device, "model": model, "format": fmt, "threads": threads,
            "params": {"min_runs": 50}, **spec_extra}
    result = stats = None
    if status == "ok":
        stats = summarize_ms(samples(median or 10.0, spread))
        if not ci:
            stats["median_ci"] = None
        if median is None:
            stats = {"mean": stats["mean"]}
        result = {"stats_ms": stats}
    provenance = {"device": facts or {"cpu_model": "Cortex-A72", "cores": 4},
                  "runtime": runtime or {"backend": "litert", "version": "1.0"}}
    return RunRecord(id=f"{next(_ids):08d}{'0' * 24}", kind="latency", status=status,
                     created_at=created, spec=spec, provenance=provenance, device=device,
                     model=model, format=fmt, threads=threads, reason=reason,
                     artifact_sha256=sha, size_bytes=1000,
                     median_ms=stats.get("median") if stats else None,
                     p90_ms=stats.get("p90") if stats else None, validity=validity, result=result)


def one_row(a, b, *checks, **kwargs):
    result = compare([a], [b], [parse_check(c) for c in checks or ("median:5%",)], **kwargs)
    [row] = result.rows
    return row, result


# -- thresholds --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, check", [
    ("median:5%", Check("median", 5.0, "%")), ("5%", Check("median", 5.0, "%")),
    ("p90:2.5%", Check("p90", 2.5, "%")), ("load:3ms", Check("load", 3.0, "ms")),
    ("accuracy:1pp", Check("accuracy", 1.0, "pp")), ("Size:10%", Check("size", 10.0, "%")),
])
def test_parse_check(text, check):
    assert parse_check(text) == check and str(check) == str(parse_check(str(check)))


@pytest.mark.parametrize("text, says", [
    ("median", "bad --fail-on"), ("fast:5%", "unknown --fail-on metric 'fast'"),
    ("accuracy:1%", "accuracy takes pp"), ("size:3ms", "size takes %"),
    ("median:1pp", "takes % or ms"),
])
def test_parse_check_rejects(text, says):
    with pytest.raises(UsageError, match=says):
        parse_check(text)


def test_check_failure_directions():
    assert Check("median", 5, "%").failure(10.0, 10.6) == "median +6.0% > 5%"
    assert Check("median", 5, "%").failure(10.0, 10.4) is None
    assert Check("median", 5, "%").failure(10.0, 5.0) is None  # faster never fails
    assert Check("load", 2, "ms").failure(10.0, 12.5) == "load +2.5ms > 2ms"
    assert Check("accuracy", 1, "pp").failure(0.75, 0.735) == "accuracy -1.50pp > 1pp"
    assert Check("accuracy", 1, "pp").failure(0.75, 0.80) is None
    assert Check("median", 5, "%").failure(None, 12.0) is None


# -- matching, noise and statuses --------------------------------------------------------------

def test_ten_percent_slowdown_with_tight_cis_fails():
    row, result = one_row(rec(10.0), rec(11.0))
    assert (row.status, row.marker, row.noise, row.stat) == ("slower", "+", False, "median")
    assert row.failures == ["median +10.0% > 5%"]
    assert row.metrics["median"]["change"] == pytest.approx(0.1, abs=1e-3)
    assert result.failing == [row] and not result.to_dict()["passed"]


def test_overlapping_cis_are_noise_and_never_fail_a_median_check():
    row, result = one_row(rec(10.0, spread=1.0), rec(10.1, spread=1.0), "median:0.5%")
    assert (row.status, row.marker, row.noise) == ("within noise", "~", True)
    assert row.failures == [] and result.to_dict()["passed"]


def test_without_cis_a_change_is_taken_at_face_value():
    row, _ = one_row(rec(10.0, spread=1.0, ci=False), rec(10.3, spread=1.0), "median:2%")
    assert row.noise is None and row.status == "slower" and row.failures == ["median +3.0% > 2%"]


def test_faster_and_unchanged():
    assert one_row(rec(10.0), rec(9.0))[0].status == "faster"
    assert one_row(rec(10.0), rec(10.0))[0].status == "unchanged"


def test_other_metrics_are_gated_on_their_threshold_alone():
    a, b = rec(10.0, spread=1.0), rec(10.0, spread=1.0)
    b.size_bytes = 1200
    row, _ = one_row(a, b, "median:5%", "size:10%")
    assert row.status == "unchanged" and row.failures == ["size +20.0% > 10%"]


def test_mean_only_runs_compare_their_means():
    row, _ = one_row(rec(None), rec(None, spread=0.05), "median:5%")
    assert row.stat == "mean" and row.status == "unchanged"
    slower = rec(None)
    slower.result["stats_ms"]["mean"] *= 1.2
    row, _ = one_row(rec(None), slower)
    assert row.status == "slower" and row.failures == ["mean +20.0% > 5%"]


def test_accuracy_drop_in_points_only_on_the_same_dataset():
    a, b = rec(dataset="imagenet_val"), rec(dataset="imagenet_val")
    a.accuracy, b.accuracy = 0.76, 0.74
    assert one_row(a, b, "accuracy:1pp")[0].failures == ["accuracy -2.00pp > 1pp"]
    b.spec["dataset"] = "cifar10"
    row, _ = one_row(a, b, "accuracy:1pp")
    assert row.failures == [] and row.metrics["accuracy"]["a"] is None


@pytest.mark.parametrize("a_status, b_status, status, fails", [
    ("ok", "failed", "newly failing", True), ("ok", "skipped", "newly failing", True),
    ("failed", "ok", "fixed", False), ("failed", "failed", "still failing", False),
])
def test_status_transitions(a_status, b_status, status, fails):
    row, _ = one_row(rec(status=a_status, reason="boom"), rec(status=b_status, reason="bang"))
    assert row.status == status and bool(row.failures) == fails
    if fails:
        assert row.failures == [f"newly {b_status}: bang"]


def test_another_artifact_is_the_comparison():
    """The user's model changed (another sha256): compared and judged, both shas on the row."""
    a, b = rec(10.0), rec(12.0, sha="cd" * 32)
    row, result = one_row(a, b)
    assert (row.status, row.marker, row.failures) == ("slower", "+", ["median +20.0% > 5%"])
    assert (row.a_sha256, row.b_sha256, row.other_artifact) == (SHA, "cd" * 32, True)
    assert row.artifacts() == "abababab → cdcdcdcd"
    assert result.other_artifacts == [row] and not result.passed
    data = result.to_dict()
    assert data["other_artifacts"] == [row.label()] and data["rows"][0]["other_artifact"]
    assert data["verdict"] == ("gate failed (median:5%): 1 run(s) failed; 1 pair(s) compared "
                               "(1 of another artifact), 0 judged on INVALID runs")
    same, _ = one_row(a, rec(10.0))
    assert not same.other_artifact and same.artifacts() == "abababab"


def test_not_comparable_pairs_make_b_incomplete_whatever_is_allowed():
    a, other_cpu = rec(10.0), rec(10.0, facts={"cpu_model": "Cortex-A76", "cores": 4})
    result = compare([a], [other_cpu], [parse_check("median:5%")])
    result.allow_missing = True  # B covering part of A is no excuse for another machine
    assert result.incomplete == ("nothing was compared: 1 pair(s) not comparable "
                                 "(device.cpu_model Cortex-A72 vs Cortex-A76)")
    both = compare([a, rec(threads=4)], [rec(10.0), rec(threads=4, facts={"cores": 8})], [])
    both.allow_missing = True
    assert both.incomplete.startswith("1 run(s) of A have only a not comparable run in B")
    missing = compare([a, rec(threads=4)], [rec(10.0)], [])
    assert missing.incomplete == "1 run(s) of A missing from B"
    missing.allow_missing = True
    assert missing.incomplete is None and missing.passed


def test_fail_on_invalid_fails_pairs_judged_on_invalid_runs():
    b = rec(10.0, validity="INVALID")
    b.result["validity"] = {"reasons": ["device busy: load 3.1", "CV above limit: 12 %"]}
    result = compare([rec(10.0)], [b], [parse_check("median:5%")])
    assert result.passed and len(result.invalid) == 1
    assert result.verdict()[1].endswith("1 pair(s) compared, 1 judged on INVALID runs")
    strict = compare([rec(10.0)], [b], [parse_check("median:5%")], fail_on_invalid=True)
    [row] = strict.failing
    assert row.failures == ["B INVALID: device busy, CV above limit"] and not strict.passed
    assert strict.to_dict()["invalid"] == [row.label()]


def test_other_hardware_is_not_comparable_other_software_is_warned_about():
    a = rec(10.0)
    other_cpu = rec(11.0, facts={"cpu_model": "Cortex-A76", "cores": 4})
    row, _ = one_row(a, other_cpu)
    assert row.status == "not comparable"
    assert row.reason == "device.cpu_model Cortex-A72 vs Cortex-A76"
    newer_runtime = rec(10.0, runtime={"backend": "litert", "version": "1.1"})
    newer_runtime.spec["params"] = {"min_runs": 100}
    row, result = one_row(a, newer_runtime)
    assert row.status == "unchanged"
    assert row.environment == ["runtime.version 1.0 vs 1.1", "params.min_runs 50 vs 100"]
    assert result.warnings == [
        "environments differ: runtime.version (1 of 1), params.min_runs (1 of 1)"]


def test_unmatched_runs_pair_across_devices_as_not_comparable():
    result = compare([rec(device="pi4"), rec(threads=4)], [rec(device="pixel")], [])
    statuses = {(r.key["device"], r.key["threads"]): (r.status, r.reason) for r in result.rows}
    assert statuses == {("pi4", 1): ("not comparable", "device pi4 vs pixel"),
                        ("pi4", 4): ("only in A", None)}


def test_only_in_one_set_and_nothing_compared():
    result = compare([rec(model="a")], [rec(model="b")], [parse_check("median:5%")])
    assert [(r.status, r.marker) for r in result.rows] == [("only in A", "<"), ("only in B", ">")]
    assert result.warnings == ["no run of A matches a run of B: nothing was compared"]
    assert not result.failing


def test_key_includes_native_delegate_binarize_and_cluster():
    base = rec()
    for extra in ({"native": "benchmark_model"}, {"delegate": "nnapi"}, {"binarize": "bnn"},
                  {"cluster": "big"}):
        statuses = [r.status for r in compare([base], [rec(**extra)], []).rows]
        assert statuses == ["only in A", "only in B"], extra


def test_representative_is_the_newest_ok_record():
    old_ok = rec(10.0, created="2025-01-01T00:00:00+00:00")
    new_ok = rec(11.0, created="2025-01-02T00:00:00+00:00")
    newer_failed = rec(status="failed", created="2025-01-03T00:00:00+00:00")
    pending = rec(status="pending", created="2025-01-04T00:00:00+00:00")
    [chosen] = representatives([newer_failed, old_ok, new_ok, pending]).values()
    assert chosen is new_ok
    [chosen] = representatives([rec(status="failed"), newer_failed]).values()
    assert chosen is newer_failed


def test_invalid_runs_are_compared_and_flagged():
    row, result = one_row(rec(10.0), rec(11.0, validity="INVALID"))
    assert row.invalid == ["B"] and row.failures
    assert any("INVALID" in w for w in result.warnings)


# -- result sets -------------------------------------------------------------------------------

@pytest.fixture
def store(tmp_path):
    with open_store(tmp_path / "results") as s:
        yield s


def _stored(store, sweep, status="ok"):
    r = store.begin("latency", {"device": "pi4", "model": "m", "format": "onnx", "threads": 1}, {},
                    sweep_id=sweep, device="pi4", model="m", format="onnx", threads=1)
    if status != "pending":
        store.finish(r.id, status, median_ms=10.0, result={"stats_ms": {"median": 10.0}})
    return r.id


def test_sets_resolve_file_then_sweep_then_record_ids(store, tmp_path):
    first = _stored(store, "4f2a9c01aa55")
    _stored(store, "4f2a9c01aa55.20250101T000000")
    other = _stored(store, "77b0c0ffee00")
    assert resolve_set("77b0", store).name == "77b0c0ffee00"
    exact = resolve_set("4f2a9c01aa55", store)  # an exact id wins over the ids it prefixes
    assert (exact.source, [r.id for r in exact.records]) == ("sweep", [first])
    with pytest.raises(UsageError, match="sweep id '4f2a' is ambiguous"):
        resolve_set("4f2a", store)
    by_ids = resolve_set(f"{first[:6]}, {other}", store)
    assert by_ids.source == "records" and [r.id for r in by_ids.records] == [first, other]
    export = tmp_path / "77b0c0ffee00"  # a file wins over a sweep of the same name
    export.write_text(json.dumps([r.to_dict() for r in store.query(sweep_id="4f2a9c01aa55")]))
    from_file = resolve_set(str(export), store)
    assert from_file.source == "file" and [r.id for r in from_file.records] == [first]


def test_sets_that_resolve_to_nothing(store, tmp_path):
    _stored(store, "aaaa1111")
    with pytest.raises(UsageError, match="'nosuch' is not a file, a sweep id or a record id"):
        resolve_set("nosuch", store)
    with pytest.raises(UsageError, match="'ffff' is not a latency record id"):
        resolve_set("ffff,eeee", store)
    pending = _stored(store, "bbbb2222", status="pending")
    with pytest.raises(UsageError, match="no finished latency records"):
        resolve_set(pending, store)
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"}')
    with pytest.raises(UsageError, match="is not an aiot results export"):
        load_export(bad)
    bad.write_text("id,sweep_id\n")
    with pytest.raises(UsageError, match="cannot read .* as a results export"):
        load_export(bad)


# -- leaderboard -------------------------------------------------------------------------------

def test_latency_board_keeps_the_fastest_valid_run_per_configuration():
    slow, fast = rec(12.0), rec(10.0)
    invalid = rec(5.0, validity="INVALID")
    failed = rec(status="failed")
    other = rec(8.0, fmt="onnx")
    native_mean = rec(None, fmt="lce", native="lce_benchmark_model")
    native_mean.result["stats_ms"]["mean"] = 11.0
    board = latency_board([slow, fast, invalid, failed, other, native_mean])
    assert [(s.rank, s.record_id, s.stat) for s in board] == [
        (1, other.id, "median"), (2, fast.id, "median"), (3, native_mean.id, "mean")]
    assert board[2].native == "lce_benchmark_model"
