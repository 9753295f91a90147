"""The VALID / INVALID verdict of a run and its named reasons."""

from __future__ import annotations

from aiot.host.validity import INVALID, VALID, emulated, judge

GOOD = {"stats_ms": {"count": 60}, "stability": {"target_cv": None, "cv": 0.01, "stable": None}}
PHONE = {"labels": {}, "android_props": {"ro.product.model": "Pixel 7"}}


def test_a_clean_run_is_valid():
    assert judge(GOOD, 50, PHONE) == {"verdict": VALID, "reasons": []}


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
