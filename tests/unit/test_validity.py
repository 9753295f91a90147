"""The VALID / INVALID verdict of a run and its named reasons."""

from __future__ import annotations

from aiot.host.engine.validity import INVALID, VALID, emulated, judge

GOOD = {"stats_ms": {"count": 60}, "stability": {"target_cv": None, "cv": 0.01, "stable": None}}
PHONE = {"labels": {}, "android_props": {"ro.product.model": "Pixel 7"}}


def test_a_clean_run_is_valid():
    verdict = judge(GOOD, 50, PHONE)
    assert (verdict["verdict"], verdict["reasons"]) == (VALID, [])


def test_each_problem_is_a_named_reason():
    result = {"stats_ms": {"count": 12},
              "stability": {"target_cv": 0.02, "cv": 0.08, "stable": False}}
    verdict = judge(result, 50, {"labels": {"emulated": "ssh"}},
                    throttling=["CPU temperature rose 7.5 °C during the run (41.0 → 48.5)"],
                    state_changes=["battery status changed: Discharging → Charging"])
    assert verdict["verdict"] == INVALID
    reasons = verdict["reasons"]
    assert reasons[0] == "too few samples: 12 < min_runs 50 (max_s ended the loop)"
    assert reasons[1] == "CV above target: 0.080 > 0.020 after 12 samples"
    assert reasons[2].startswith("throttling detected: CPU temperature rose")
    assert reasons[3] == "device state changed: battery status changed: Discharging → Charging"
    assert reasons[4].startswith("emulated device")


def test_stability_met_or_not_asked_is_fine():
    met = {"stats_ms": {"count": 80}, "stability": {"target_cv": 0.02, "cv": 0.01, "stable": True}}
    assert judge(met, 50, PHONE)["verdict"] == VALID
    assert judge({"stats_ms": {"count": 80}}, 50, PHONE)["verdict"] == VALID  # native tools


def test_emulated_devices_are_recognised_by_label_or_property():
    assert emulated({"labels": {"emulated": "adb"}})
    assert emulated({"android_props": {"ro.aiot.emulated": "1"}})
    assert not emulated(PHONE) and not emulated({})


# -- the default checks: threads above cores, a busy device, CV, sample floor ---------------------

import pytest  # noqa: E402

from aiot.core.errors import UsageError  # noqa: E402
from aiot.device_agent import cpuload  # noqa: E402
from aiot.host.engine.validity import ValidityPolicy, short_reasons, threads_warning  # noqa: E402

DEFAULTS = ValidityPolicy()  # what a user gets: the suite's AIOT_VALIDITY turns some off
TWO_CORES = {"labels": {}, "cores": 2, "online_cores": 2}
QUIET = {"online_cpus": 2, "busy_cpus": 1.1, "own_cpus": 1.0, "other_cpus": 0.1,
         "loadavg": [1.2, 1.0, 0.9], "seconds": 2.0}


def _result(count=60, robust_cv=0.02, load=QUIET, threads=1):
    return {"threads": threads, "stats_ms": {"count": count, "robust_cv": robust_cv, "cv": robust_cv},
            "stability": {"target_cv": None, "stable": None}, "load": load}


def test_a_quiet_run_within_the_defaults_is_valid():
    assert judge(_result(), 50, TWO_CORES, policy=DEFAULTS) == {
        "verdict": VALID, "reasons": [],
        "limits": {"cv": 0.1, "load": 0.5, "samples": 10, "threads": True, "tail": 3.0,
                   "speed": 0.25}}


def test_threads_above_the_online_cores_are_invalid_and_named():
    verdict = judge(_result(threads=4), 50, TWO_CORES, threads=4, policy=DEFAULTS)
    assert verdict["verdict"] == INVALID
    assert verdict["reasons"] == ["threads above online cores: 4 threads > 2 online cores, so the "
                                  "threads take turns on the cores and the run times the scheduler"]
    # The agent's own count (a cgroup, a parked core) wins over the probe's.
    narrowed = judge(_result(threads=2, load={**QUIET, "online_cpus": 1}), 50, TWO_CORES,
                     threads=2, policy=DEFAULTS)
    assert narrowed["reasons"][0].startswith("threads above online cores: 2 threads > 1 online")
    # A run pinned to a cluster has that cluster's cores.
    pinned = judge(_result(threads=2), 50, {"cores": 8}, threads=2, cpus=[4], policy=DEFAULTS)
    assert "2 threads > 1 CPUs of its cluster" in pinned["reasons"][0]
    off = ValidityPolicy(threads=False)
    assert judge(_result(threads=4), 50, TWO_CORES, threads=4, policy=off)["verdict"] == VALID


def test_a_busy_device_is_invalid_with_the_numbers():
    busy = {**QUIET, "busy_cpus": 2.0, "own_cpus": 0.3, "other_cpus": 1.7}
    verdict = judge(_result(load=busy), 50, TWO_CORES, policy=DEFAULTS)
    assert verdict["reasons"] == ["device busy: other processes kept 1.70 CPUs busy while the run "
                                  "was timed (limit 0.5; 2.00 busy in all). To fix: close what "
                                  "runs, or judge with a looser limit, stored and shown with each "
                                  "result (--validity load=1.7, or AIOT_VALIDITY=load=1.7)"]
    assert judge(_result(load=busy), 50, TWO_CORES, policy=ValidityPolicy(load=2.0))["verdict"] == VALID


def test_without_cpu_counters_the_load_average_judges_a_core_more_loosely():
    hidden = {"online_cpus": 8, "busy_cpus": None, "own_cpus": 1.0, "other_cpus": None,
              "loadavg": [1.9, 1.0, 0.5]}
    assert judge(_result(load=hidden), 50, TWO_CORES, policy=DEFAULTS)["verdict"] == VALID
    loaded = {**hidden, "loadavg": [6.5, 3.0, 1.0]}
    (why,) = judge(_result(load=loaded), 50, TWO_CORES, policy=DEFAULTS)["reasons"]
    assert why.startswith("device busy: load average 6.50 with 1 thread(s)")


def test_a_cv_just_above_its_limit_reads_above_it():
    # 0.1004 > 0.1 printed to three places read "0.100 > 0.100": a contradiction.
    (why,) = judge(_result(robust_cv=0.1004), 50, TWO_CORES, policy=DEFAULTS)["reasons"]
    assert why.startswith("CV above limit: robust CV 0.1004 > 0.1000 over 60 samples"), why


def test_cv_above_the_default_limit_and_too_few_samples():
    noisy = judge(_result(robust_cv=0.27), 50, TWO_CORES, policy=DEFAULTS)
    assert noisy["reasons"][0].startswith("CV above limit: robust CV 0.270 > 0.100 over 60 samples")
    few = judge(_result(count=5), 3, TWO_CORES, policy=DEFAULTS)
    assert few["reasons"][0].startswith("too few samples: 5 < 10")
    # Native tools print a mean and a std only.
    native = judge({"stats_ms": {"count": 50, "mean": 10.0, "std": 3.0}}, 50, TWO_CORES, policy=DEFAULTS)
    assert native["reasons"][0].startswith("CV above limit: CV 0.300 > 0.100")


def test_the_policy_comes_from_the_environment(monkeypatch):
    assert ValidityPolicy.from_env("cv=0.2, load=off ,samples=5,threads=off") == ValidityPolicy(
        cv=0.2, load=None, samples=5, threads=False)
    monkeypatch.setenv("AIOT_VALIDITY", "cv=0.3")
    assert ValidityPolicy.from_env().cv == 0.3 and ValidityPolicy.from_env().load == 0.5
    with pytest.raises(UsageError, match="unknown check 'noise'"):
        ValidityPolicy.from_env("noise=1")
    with pytest.raises(UsageError, match="cv=high is not a number"):
        ValidityPolicy.from_env("cv=high")


def test_the_warning_before_a_sweep_names_the_oversubscribing_counts():
    line = threads_warning("local", [1, 2, 4, 8], TWO_CORES, policy=DEFAULTS)
    assert line.startswith("local has 2 online cores: the runs at 4, 8 threads oversubscribe them")
    assert threads_warning("local", [1, 2], TWO_CORES, policy=DEFAULTS) is None
    assert threads_warning("local", [8], TWO_CORES, policy=ValidityPolicy(threads=False)) is None


def test_short_reasons_name_each_kind_once():
    assert short_reasons(["device busy: a", "CV above limit: b", "device busy: c"]) == \
        "device busy; CV above limit"


def _stat(tmp_path, name, busy, idle, cpus=2):
    path = tmp_path / name
    lines = [f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0"]
    lines += [f"cpu{i} 0 0 0 0 0 0 0 0 0 0" for i in range(cpus)]
    path.write_text("\n".join(lines) + "\nintr 0\n")
    return str(path)


def test_cpuload_splits_the_busy_cpus_into_the_runs_and_the_others(tmp_path, monkeypatch):
    before = {"t": 10.0, "ticks": cpuload._cpu_ticks(_stat(tmp_path, "a", 100, 100)), "own_s": 1.0}
    after = {"t": 12.0, "ticks": cpuload._cpu_ticks(_stat(tmp_path, "b", 450, 150)), "own_s": 2.0}
    monkeypatch.setattr(cpuload, "_kernel_cpus", lambda path=None: 2)
    load = cpuload.between(before, after)
    # 350 of 400 ticks busy on 2 CPUs: 1.75 CPUs, of which this process 0.5 (1 s of CPU in 2 s).
    assert load["busy_cpus"] == 1.75 and load["own_cpus"] == 0.5 and load["other_cpus"] == 1.25
    hidden = cpuload.between({**before, "ticks": None}, after)
    assert hidden["busy_cpus"] is None and hidden["other_cpus"] is None and hidden["own_cpus"] == 0.5
    assert cpuload._cpu_ticks(str(tmp_path / "missing")) is None


def test_cpuload_on_this_machine_sees_its_own_busy_loop():
    before = cpuload.snapshot()
    end = before["t"] + 0.3
    while cpuload.time.monotonic() < end:
        pass
    load = cpuload.between(before, cpuload.snapshot())
    assert load["online_cpus"] >= 1 and 0 < load["own_cpus"] <= 1.05
    if load["busy_cpus"] is not None:  # /proc/stat readable (Linux)
        assert load["busy_cpus"] >= load["own_cpus"] - 0.1 and load["other_cpus"] >= 0


# -- the limits a verdict used: stored, shown, given as an option (issue 39) -------------------

from aiot.host.engine.validity import limit_changes, limits_text, verdict_text  # noqa: E402


def test_a_busy_reason_names_the_busiest_processes_and_the_way_out():
    top = [{"pid": 812, "name": "cc1plus", "cpus": 1.2}, {"pid": 90, "name": "chrome", "cpus": 0.4}]
    busy = {**QUIET, "busy_cpus": 2.0, "own_cpus": 0.3, "other_cpus": 1.7, "top": top}
    (why,) = judge(_result(load=busy), 50, TWO_CORES, policy=DEFAULTS)["reasons"]
    assert "busiest: cc1plus (pid 812) 1.20 CPUs, chrome (pid 90) 0.40 CPUs" in why
    assert "close what runs" in why and "--validity load=1.7" in why


def test_the_option_overrides_the_environment_key_by_key(monkeypatch):
    monkeypatch.setenv("AIOT_VALIDITY", "cv=0.3,load=1")
    policy = ValidityPolicy.from_env(option="load=2")
    assert (policy.cv, policy.load) == (0.3, 2.0)
    with pytest.raises(UsageError, match="--validity: unknown check 'lod'"):
        ValidityPolicy.from_env(option="lod=2")


def test_a_verdict_under_relaxed_limits_is_never_a_plain_valid():
    busy = {**QUIET, "busy_cpus": 2.0, "own_cpus": 0.3, "other_cpus": 1.7}
    verdict = judge(_result(load=busy), 50, TWO_CORES, policy=ValidityPolicy(load=2.0))
    assert verdict["verdict"] == VALID and verdict["limits"]["load"] == 2.0
    assert verdict_text(verdict) == "VALID (relaxed: load≤2)"
    strict = judge(_result(), 50, TWO_CORES, policy=ValidityPolicy(load=0.2))
    assert verdict_text(strict) == "VALID"  # stricter than the default is no relaxation
    assert limit_changes(strict["limits"]) == ["load≤0.2"]
    assert limits_text(verdict["limits"]) == (
        "cv≤0.1, load≤2, samples≥10, threads on, tail≤3, speed≤0.25 (not the defaults: load≤2)")
    assert verdict_text({"verdict": VALID, "reasons": []}) == "VALID"  # records from before


def test_a_p90_hundreds_of_times_the_median_fails_under_relaxed_load_and_cv():
    stats = {"count": 60, "robust_cv": 0.02, "cv": 3.0, "median": 1.0, "p90": 725.0}
    result = {**_result(), "stats_ms": stats}
    loose = ValidityPolicy.from_env("load=off,cv=off")
    verdict = judge(result, 50, TWO_CORES, policy=loose)
    assert verdict["verdict"] == INVALID
    assert verdict["reasons"][0].startswith("long tail: p90 725 ms is 725.0× the median 1 ms")


def test_one_device_fact_answers_threads_against_cores():
    from aiot.host.transports.probe import DeviceFacts

    phone = DeviceFacts.of({"cores": 8, "online_cores": 6})
    assert phone.usable_cpus() == 6 and phone.usable_cpus([4, 5, 6, 7]) == 4
    assert phone.lacks_cores_for(12) and not phone.lacks_cores_for(8)
    unknown = DeviceFacts.of({"cores": "8", "online_cores": True})  # a device's word, checked
    assert unknown.usable_cpus() is None and not unknown.lacks_cores_for(64)


# -- the CPU's own speed around the timed loop: a reference kernel (issue 54) ------------------

from aiot.device_agent import speedref  # noqa: E402


def test_a_cpu_that_changed_speed_while_the_run_was_timed_is_invalid_with_both_readings():
    slower = judge({**_result(), "speed": {"kernel": speedref.KERNEL, "before_ms": 0.6,
                                           "after_ms": 0.9}}, 50, TWO_CORES, policy=DEFAULTS)
    (why,) = slower["reasons"]
    assert why.startswith("speed changed: a reference kernel took 0.6 ms before the timed loop "
                          "and 0.9 ms after it (50 % slower; limit 25 %)")
    assert "--validity speed=" in why
    faster = judge({**_result(), "speed": {"before_ms": 0.9, "after_ms": 0.6}}, 50, TWO_CORES,
                   policy=DEFAULTS)
    assert "(50 % faster; limit 25 %)" in faster["reasons"][0]
    steady = {**_result(), "speed": {"before_ms": 0.6, "after_ms": 0.72}}  # 20 %: within
    assert judge(steady, 50, TWO_CORES, policy=DEFAULTS)["verdict"] == VALID
    # No readings (an older agent, a device without NumPy) and a check turned off judge nothing.
    assert judge({**_result(), "speed": None}, 50, TWO_CORES, policy=DEFAULTS)["verdict"] == VALID
    off = ValidityPolicy.from_env("speed=off")
    assert judge({**_result(), "speed": {"before_ms": 0.6, "after_ms": 0.9}}, 50, TWO_CORES,
                 policy=off)["verdict"] == VALID


def test_the_speed_limit_just_crossed_reads_above_it():
    from aiot.host.engine.validity import speed_reason

    why = speed_reason({"before_ms": 1.0, "after_ms": 1.2504}, 0.25)
    assert "(25.04 % slower; limit 25.00 %)" in why
    assert speed_reason({"before_ms": 0, "after_ms": 1.0}, 0.25) is None  # no division by zero
    # A limit below 1 % reads as itself, not as "limit 0 %".
    assert "(3.2 % faster; limit 0.5 %)" in speed_reason({"before_ms": 0.382, "after_ms": 0.37},
                                                          0.005)


def test_the_reference_kernel_reads_this_cpu_and_its_block_names_the_kernel():
    first, second = speedref.reading(), speedref.reading()
    assert first is not None and first > 0 and second > 0
    assert speedref.around(first, second) == {"kernel": speedref.KERNEL, "before_ms": first,
                                              "after_ms": second}
    assert speedref.around(None, second) is None
    # Placed once, the same for every reading of the process (where the allocator put them was
    # the kernel's own noise), no two at the same offset in a page (4K aliasing).
    import numpy as np

    placed = speedref._placed(np)
    assert [v.ctypes.data for v in speedref._placed(np)] == [v.ctypes.data for v in placed]
    assert sorted(v.ctypes.data % speedref.PAGE for v in placed) == [0, 1024, 2048]
    assert all(v.size == speedref.SIZE and v.dtype == np.float32 for v in placed)


def test_the_validity_option_names_every_key_the_policy_takes():
    """The help text is written out (so --help imports no engine): it must keep up."""
    from dataclasses import fields

    from aiot.host.cli.measure import Validity

    from aiot.core.environment import VARIABLES

    text = Validity.__metadata__[0].help
    assert all(f.name in text for f in fields(ValidityPolicy))
    default = next(v for v in VARIABLES if v.name == "AIOT_VALIDITY").default
    assert all(f.name in default for f in fields(ValidityPolicy))
