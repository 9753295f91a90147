"""The timing audit's rule (host/engine/validity.timing_reasons) on results built by hand:
invoke times against the timed loop's wall, and a profile's operator total against the
median; a consistent run, a sub-millisecond one included, passes."""

from __future__ import annotations

from aiot.device_agent.stats import summarize_ms
from aiot.host.engine.validity import judge, timing_reasons


def _result(samples_ns: list[int], wall_ms: float, profile_ms: float | None = None) -> dict:
    start = 1_800_000_000.0
    result = {"samples_ns": samples_ns, "stats_ms": summarize_ms(samples_ns),
              "measure_start_unix_s": start, "measure_end_unix_s": start + wall_ms / 1e3}
    if profile_ms is not None:
        result["profile"] = {"available": True, "total_ms": profile_ms}
    return result


def test_a_consistent_run_passes_with_its_loop_overhead():
    assert timing_reasons(_result([2_000_000] * 50, wall_ms=100.4)) == []
    # 8 µs invokes with 4 µs of loop between them: a third of the wall is overhead, not a lie
    assert timing_reasons(_result([8_000] * 1000, wall_ms=12.0)) == []
    # a short loop whose one progress line took 2 ms: a fixed cost, not a lie
    assert timing_reasons(_result([40_000] * 5, wall_ms=2.2)) == []


def test_invoke_times_above_the_wall_are_implausible():
    (why,) = timing_reasons(_result([2_000_000] * 50, wall_ms=60.0))
    assert why == ("timing implausible: the 50 invoke times add up to 100.000 ms, more than "
                   "the timed loop's own 60.000 ms of wall time")


def test_a_time_taken_before_the_work_finished_is_implausible():
    # LiteRT #9453: 274 µs reported for runs that took 16 ms each
    (why,) = timing_reasons(_result([274_000] * 30, wall_ms=30 * 16.0))
    assert "add up to 8.220 ms of the timed loop's 480.000 ms (2%)" in why
    assert "15.726 ms per iteration is accounted for by nothing" in why


def test_a_profile_far_above_the_median_is_implausible():
    (why,) = timing_reasons(_result([274_000] * 30, wall_ms=8.3, profile_ms=16.0))
    assert why == ("timing implausible: the profiler saw the operators take 16.000 ms per "
                   "inference, 58.4× the run's median of 0.274 ms")
    assert timing_reasons(_result([2_000_000] * 30, wall_ms=60.1, profile_ms=2.5)) == []


def test_the_audit_is_part_of_every_verdict():
    verdict = judge(_result([2_000_000] * 50, wall_ms=60.0), min_runs=1, device_info={})
    assert verdict["verdict"] == "INVALID"
    assert any(r.startswith("timing implausible") for r in verdict["reasons"])
