"""The campaign benchmark's arithmetic: on-device time, efficiency, CV and the attribution of a
run's wall time (bench/campaign.py is a script, loaded here from its file)."""

from __future__ import annotations

import pytest

from tests.helpers import load_bench_script


@pytest.fixture(scope="module")
def bench():
    return load_bench_script("campaign")


RESULT = {"load_ms": 200.0, "first_inference_ms": 50.0, "warmup": {"count": 5, "seconds": 0.5},
          "measure_start_unix_s": 1003.0, "measure_end_unix_s": 1006.0}


def test_on_device_time_is_load_first_inference_warmup_and_timed_span(bench):
    assert bench.on_device_s(RESULT) == pytest.approx(0.2 + 0.05 + 0.5 + 3.0)
    assert bench.on_device_s({"load_ms": 10.0}) == pytest.approx(0.01)  # no loop, no warm-up


def test_efficiency_leaves_deliberate_cooldown_out(bench):
    assert bench.efficiency(9.0, 10.0) == pytest.approx(0.9)
    assert bench.efficiency(9.0, 20.0, cooldown=10.0) == pytest.approx(0.9)
    assert bench.efficiency(1.0, 5.0, cooldown=5.0) is None


def test_cv_is_sample_stdev_over_mean(bench):
    assert bench.cv([1.0, 1.0, 1.0]) == 0.0
    assert bench.cv([1.0, 3.0]) == pytest.approx(2 ** 0.5 / 2)
    assert bench.cv([1.0]) is None


def test_parse_counts(bench):
    assert bench.parse_counts("1, 4,16") == [1, 4, 16]
    for bad in ("", "0,4", "x"):
        with pytest.raises(ValueError):
            bench.parse_counts(bad)


def test_cooldown_wait_from_provenance(bench):
    assert bench.cooldown_waited_s({"device_state": {"cooldown": {"waited_s": 2.5}}}) == 2.5
    assert bench.cooldown_waited_s({"device_state": {"cooldown": None}}) == 0.0
    assert bench.cooldown_waited_s({}) == 0.0


def _entry(start=1000.0):
    return {"start": start, "end": 1006.4,
            "stages": {"cool-down": 1000.1, "convert": 1001.1, "push": 1001.2, "measure": 1001.5},
            "phases": {"load": 1002.0, "warmup": 1002.3, "measure": 1003.0}}


def test_run_segments_sum_to_the_run_and_split_the_gate(bench):
    parts = bench.run_segments(_entry(), RESULT, waited_s=0.6, first=True)
    assert sum(parts.values()) == pytest.approx(6.4)
    assert parts["setup"] == pytest.approx(0.1)
    assert parts["cool-down (deliberate)"] == pytest.approx(0.6)
    assert parts["cool-down gate"] == pytest.approx(0.4)
    assert parts["convert check"] == pytest.approx(0.1)
    assert parts["connect/deploy/hello"] == pytest.approx(0.3) and "artifact push" not in parts
    assert parts["agent start"] == pytest.approx(0.5)
    assert parts["on-device"] == pytest.approx(3.75)
    assert parts["agent untimed"] == pytest.approx(4.0 - 3.75)
    assert parts["result → stored"] == pytest.approx(0.4)
    later = bench.run_segments(_entry(), RESULT, waited_s=0.0, first=False)
    assert later["artifact push"] == pytest.approx(0.3) and "connect/deploy/hello" not in later


def test_a_run_without_its_events_is_unattributed(bench):
    entry = {**_entry(), "phases": {}}
    assert bench.run_segments(entry, RESULT, 0.0, True) == {"unattributed": pytest.approx(6.4)}
    assert bench.run_segments(_entry(), None, 0.0, True) == {"unattributed": pytest.approx(6.4)}


def test_device_attribution_gives_the_gaps_to_the_engine_and_the_tail_apart(bench):
    first, second = _entry(1000.0), {**_entry(1000.0), "start": 1006.5, "end": 1012.9}
    second["stages"] = {k: v + 6.5 for k, v in first["stages"].items()}
    second["phases"] = {k: v + 6.5 for k, v in first["phases"].items()}
    later = {**RESULT, "measure_start_unix_s": 1009.5, "measure_end_unix_s": 1012.5}
    totals = bench.device_attribution([first, second], [RESULT, later], [0.0, 0.0], 999.8, 1013.0)
    assert sum(totals.values()) == pytest.approx(13.2)
    assert totals["engine"] == pytest.approx(0.2 + 0.1)
    assert totals["after last run"] == pytest.approx(0.1)
    assert totals["on-device"] == pytest.approx(2 * 3.75)
    assert set(totals) == set(bench.SEGMENTS)


def test_busy_share(bench):
    assert bench.busy_share((100, 1000), (150, 1100)) == pytest.approx(0.5)
    assert bench.busy_share(None, (1, 2)) is None
    assert bench.busy_share((1, 2), (1, 2)) is None


def test_stat_cpu_ticks_sums_own_and_reaped_children_time(bench):
    line = "4242 (sshd: a) b) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 3 20 10 20 0 1 0 99 0 0"
    assert bench.stat_cpu_ticks(line) == 7 + 3 + 20 + 10
