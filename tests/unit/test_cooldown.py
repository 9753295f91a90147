import pytest

from aiot.core.errors import UsageError
from aiot.host.devices.telemetry import Telemetry
from aiot.host.engine.cooldown import (
    NO_TELEMETRY,
    Baseline,
    CooldownPolicy,
    detect_throttling,
    device_state_changes,
    wait_for_cooldown,
)

BIG, PRIME = 2419200, 2841600


def reading(temp=None, caps=None, battery=None, status=None):
    temps = {} if temp is None else {"cpu-1-0-usr": temp}
    return Telemetry(timestamp=0.0, cpu_temps_c=temps, cpu_temp_max_c=temp,
                     cpu_cap_khz={} if caps is None else caps, battery_pct=battery,
                     battery_status=status)


def cool(temp=41.0):
    return reading(temp, {4: BIG, 5: BIG, 7: PRIME})


class Script:
    """A telemetry source that plays readings in order (the last one repeats), with a fake
    clock that only advances when the code under test sleeps."""

    def __init__(self, *readings):
        self.readings, self.now, self.sleeps = list(readings), 100.0, []

    def __call__(self):
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


BASELINE = Baseline(temp_c=41.0, cap_khz={4: BIG, 5: BIG, 7: PRIME}, samples=3)


def wait(script, **policy):
    return wait_for_cooldown(script, BASELINE, CooldownPolicy(**policy), clock=script.clock,
                             sleep=script.sleep)


def test_baseline_is_median_temperature_and_highest_cap_per_core():
    script = Script(reading(40.0, {4: BIG}), reading(43.0, {4: BIG - 1000, 7: PRIME}), reading(41.0))
    baseline = Baseline.capture(script, samples=3)
    assert baseline == Baseline(temp_c=41.0, cap_khz={4: BIG, 7: PRIME}, samples=3)
    assert baseline.to_dict() == {"temp_c": 41.0, "cap_khz": {"4": BIG, "7": PRIME}, "samples": 3}
    with pytest.raises(UsageError):
        Baseline.capture(script, samples=0)


def test_already_cool_returns_at_once_without_sleeping():
    script = Script(cool(42.5))  # within the 2 °C margin
    result = wait(script)
    assert (result.reached, result.reason, result.waited_s, result.polls) == (True, None, 0.0, 1)
    assert script.sleeps == [] and result.before == result.after


def test_cools_after_some_polls_then_settles():
    script = Script(cool(50.0), cool(46.0), cool(42.0), cool(41.5))
    result = wait(script)
    assert result.reached and result.reason is None
    assert result.polls == 4 and result.waited_s == 3.0 and script.sleeps == [1.0, 1.0, 1.0]
    assert result.before.cpu_temp_max_c == 50.0 and result.after.cpu_temp_max_c == 41.5


def test_a_dip_does_not_count_until_settle_polls_in_a_row():
    script = Script(cool(50.0), cool(42.0), cool(44.0), cool(42.0), cool(42.0), cool(42.0))
    assert wait(script, settle_polls=3).polls == 6
    script = Script(cool(50.0), cool(42.0), cool(44.0), cool(42.0), cool(42.0))
    assert wait(script, settle_polls=2).polls == 5


def test_frequency_cap_must_come_back():
    throttled = reading(41.0, {4: BIG, 5: BIG, 7: int(PRIME * 0.6)})
    script = Script(throttled, throttled, cool(), cool())
    result = wait(script)
    assert result.reached and result.polls == 4


def test_never_cools_gives_up_at_max_wait_with_the_reason():
    script = Script(cool(55.0))
    result = wait(script, max_wait_s=10.0, poll_s=3.0)
    assert not result.reached and result.waited_s == 10.0
    assert script.sleeps == [3.0, 3.0, 3.0, 1.0] and result.polls == 5
    assert result.reason == "not cool after 10 s: CPU temperature 55.0 °C is above baseline 41.0 + 2 °C"


def test_gives_up_when_cool_but_not_settled():
    script = Script(cool(55.0), cool(55.0), cool(41.0))
    result = wait(script, max_wait_s=2.0, settle_polls=3)
    assert not result.reached and result.reason == "not cool after 2 s: cool for 1 of 3 polls"


def test_no_telemetry_is_reached_at_once_and_noted():
    script = Script(reading())
    result = wait(script)
    assert (result.reached, result.reason, result.waited_s, script.sleeps) == (True, NO_TELEMETRY, 0.0, [])
    assert detect_throttling(reading(), reading(), Baseline(None, {}, 3), CooldownPolicy()) == []
    assert result.to_dict()["reason"] == "no telemetry"


def test_throttling_reasons():
    after = reading(48.5, {4: int(BIG * 0.62), 5: int(BIG * 0.62), 7: PRIME})
    assert detect_throttling(cool(41.0), after, BASELINE, CooldownPolicy()) == [
        "CPU temperature rose 7.5 °C during the run (41.0 → 48.5)",
        "cores 4, 5 frequency fell to 62 % of baseline",
    ]
    one_core = reading(43.0, {4: BIG, 5: BIG, 7: int(PRIME * 0.8)})
    assert detect_throttling(cool(41.0), one_core, BASELINE, CooldownPolicy()) == [
        "core 7 frequency fell to 80 % of baseline"]


def test_clean_run_and_offline_cores_name_nothing():
    assert detect_throttling(cool(41.0), cool(45.5), BASELINE, CooldownPolicy()) == []
    offline = reading(42.0, {4: BIG})  # cores 5 and 7 unplugged: nothing to compare
    assert detect_throttling(cool(41.0), offline, BASELINE, CooldownPolicy()) == []


def test_device_state_changes():
    before = reading(battery=85, status="Discharging")
    assert device_state_changes(before, reading(battery=83, status="Discharging")) == []
    assert device_state_changes(before, reading(battery=78, status="Charging")) == [
        "battery status changed: Discharging → Charging", "battery level dropped from 85 % to 78 %"]
    on_charger = reading(battery=99, status="Charging")
    assert device_state_changes(on_charger, reading(battery=100, status="Full")) == []
    assert device_state_changes(on_charger, reading(battery=99, status="Unknown")) == []
    assert device_state_changes(reading(), reading()) == []
    assert device_state_changes(before, reading(battery=82), max_battery_drop_pct=2) == [
        "battery level dropped from 85 % to 82 %"]


def test_policy_rejects_nonsense():
    with pytest.raises(UsageError):
        CooldownPolicy(freq_ratio=1.5)
    with pytest.raises(UsageError):
        CooldownPolicy(settle_polls=0)
