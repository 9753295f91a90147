"""Cool-down gated on the device's own state, and the named reasons a run was not clean.

Before a run, :func:`wait_for_cooldown` polls telemetry until the CPU is back near the cool
:class:`Baseline` taken at the start of a campaign: temperature within a margin and every core's
frequency cap restored. It returns at once when the device is already cool, so there is no fixed
sleep to tune. After a run, :func:`detect_throttling` and :func:`device_state_changes` name what
went wrong, for the run's validity verdict.

The frequency signal is the per-core cap (``scaling_max_freq``), not the current frequency: the
kernel's thermal framework throttles by lowering the cap, while an idle core's current frequency
follows the governor and says nothing about heat. A device with neither a CPU temperature nor a
cap (a VM, a container, macOS) cannot be gated: gating returns ``reached=True`` with the reason
``"no telemetry"`` and detection names nothing.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from aiot.core.errors import UsageError
from aiot.host.devices.telemetry import Telemetry, TelemetrySource

NO_TELEMETRY = "no telemetry"


@dataclass(frozen=True)
class CooldownPolicy:
    """When the device counts as cool, and how long to wait for it.

    Args:
        temp_margin_c: the hottest CPU zone may sit this many °C above the baseline.
        freq_ratio: every core's frequency cap must be at least this share of its baseline cap.
        poll_s: seconds between telemetry reads while waiting.
        max_wait_s: give up after this many seconds (the run then goes ahead, flagged).
        settle_polls: consecutive cool polls needed once the device was found hot, so a brief dip
            during cooling does not count; a device cool at the first poll needs no more.
        max_rise_c: a run that heats the CPU by more than this many °C is flagged.
    """

    temp_margin_c: float = 2.0
    freq_ratio: float = 0.95
    poll_s: float = 1.0
    max_wait_s: float = 120.0
    settle_polls: int = 2
    max_rise_c: float = 5.0

    def __post_init__(self) -> None:
        if not 0 < self.freq_ratio <= 1:
            raise UsageError(f"freq_ratio must be in (0, 1], got {self.freq_ratio}")
        if self.poll_s <= 0 or self.max_wait_s < 0 or self.settle_polls < 1:
            raise UsageError("poll_s must be > 0, max_wait_s ≥ 0 and settle_polls ≥ 1")


@dataclass(frozen=True)
class Baseline:
    """The cool state a campaign returns to before each run.

    Args:
        temp_c: median over the samples of the hottest CPU zone, or None without sensors.
        cap_khz: per core, the highest frequency cap seen over the samples.
        samples: how many readings it was taken from.
    """

    temp_c: float | None
    cap_khz: dict[int, int]
    samples: int

    @classmethod
    def capture(cls, source: TelemetrySource, samples: int = 3) -> Baseline:
        """Read ``samples`` telemetry readings back to back, on an idle, cool device."""
        if samples < 1:
            raise UsageError(f"a baseline needs at least one sample, got {samples}")
        readings = [source() for _ in range(samples)]
        temps = [t.cpu_temp_max_c for t in readings if t.cpu_temp_max_c is not None]
        caps: dict[int, int] = {}
        for reading in readings:
            for core, khz in reading.cpu_cap_khz.items():
                caps[core] = max(khz, caps.get(core, 0))
        return cls(statistics.median(temps) if temps else None, caps, samples)

    def to_dict(self) -> dict:
        return {"temp_c": self.temp_c, "cap_khz": {str(k): v for k, v in self.cap_khz.items()},
                "samples": self.samples}


@dataclass(frozen=True)
class CooldownResult:
    """How a wait for cool-down went.

    Args:
        waited_s: seconds from the first to the last poll.
        reached: the device was cool (or could not be judged: ``reason == "no telemetry"``).
        reason: why it was not reached, or ``"no telemetry"``; None when cool.
        before: the first reading; after: the last one.
        polls: telemetry reads made.
    """

    waited_s: float
    reached: bool
    reason: str | None
    before: Telemetry
    after: Telemetry
    polls: int

    def to_dict(self) -> dict:
        return {"waited_s": round(self.waited_s, 3), "reached": self.reached, "reason": self.reason,
                "polls": self.polls, "before": self.before.to_dict(), "after": self.after.to_dict()}


def _comparable(t: Telemetry, baseline: Baseline) -> bool:
    temps = t.cpu_temp_max_c is not None and baseline.temp_c is not None
    return temps or bool(t.cpu_cap_khz.keys() & baseline.cap_khz.keys())


def _low_caps(t: Telemetry, baseline: Baseline, ratio: float) -> dict[int, float]:
    """Cores whose cap is below ``ratio`` of the baseline's, with their share of it."""
    shares = {core: t.cpu_cap_khz[core] / khz for core, khz in baseline.cap_khz.items()
              if core in t.cpu_cap_khz and khz > 0}
    return {core: share for core, share in sorted(shares.items()) if share < ratio}


def _cores(cores: list[int]) -> str:
    return f"core {cores[0]}" if len(cores) == 1 else "cores " + ", ".join(map(str, cores))


def _cap_reasons(low: dict[int, float]) -> list[str]:
    """One reason per percentage, so a throttled cluster reads as one line."""
    by_pct: dict[int, list[int]] = {}
    for core, share in low.items():
        by_pct.setdefault(round(share * 100), []).append(core)
    return [f"{_cores(cores)} frequency fell to {pct} % of baseline"
            for pct, cores in by_pct.items()]


def hot_reasons(t: Telemetry, baseline: Baseline, policy: CooldownPolicy) -> list[str]:
    """Why ``t`` is not cool against ``baseline``; empty when it is."""
    reasons = []
    limit = None if baseline.temp_c is None else baseline.temp_c + policy.temp_margin_c
    if limit is not None and t.cpu_temp_max_c is not None and t.cpu_temp_max_c > limit:
        reasons.append(f"CPU temperature {t.cpu_temp_max_c:.1f} °C is above baseline "
                       f"{baseline.temp_c:.1f} + {policy.temp_margin_c:g} °C")
    return reasons + _cap_reasons(_low_caps(t, baseline, policy.freq_ratio))


def wait_for_cooldown(
    source: TelemetrySource, baseline: Baseline, policy: CooldownPolicy,
    clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
) -> CooldownResult:
    """Poll ``source`` until the device is cool against ``baseline``, or ``max_wait_s`` passes.

    Returns at the first poll when the device is already cool. Once it was found hot, it needs
    ``settle_polls`` consecutive cool polls. A device without comparable telemetry returns at
    once with ``reached=True, reason="no telemetry"``.
    """
    start = clock()
    before = after = source()
    if not _comparable(before, baseline):
        return CooldownResult(0.0, True, NO_TELEMETRY, before, after, 1)
    polls, good, hot = 1, 0, False
    while True:
        reasons = hot_reasons(after, baseline, policy)
        hot = hot or bool(reasons)
        good = 0 if reasons else good + 1
        if good >= (policy.settle_polls if hot else 1):
            return CooldownResult(clock() - start, True, None, before, after, polls)
        elapsed = clock() - start
        if elapsed >= policy.max_wait_s:
            why = "; ".join(reasons) or f"cool for {good} of {policy.settle_polls} polls"
            return CooldownResult(elapsed, False, f"not cool after {elapsed:.0f} s: {why}",
                                  before, after, polls)
        sleep(min(policy.poll_s, policy.max_wait_s - elapsed))
        after = source()
        polls += 1


def detect_throttling(before: Telemetry, after: Telemetry, baseline: Baseline,
                      policy: CooldownPolicy) -> list[str]:
    """Named signs that a run between ``before`` and ``after`` was thermally limited.

    Flags a CPU temperature rise above ``max_rise_c`` and frequency caps below ``freq_ratio`` of
    the baseline after the run. Empty when the run looks clean or there is no telemetry.
    """
    reasons = []
    t0, t1 = before.cpu_temp_max_c, after.cpu_temp_max_c
    if t0 is not None and t1 is not None and t1 - t0 > policy.max_rise_c:
        reasons.append(
            f"CPU temperature rose {t1 - t0:.1f} °C during the run ({t0:.1f} → {t1:.1f})")
    return reasons + _cap_reasons(_low_caps(after, baseline, policy.freq_ratio))


def device_state_changes(before: Telemetry, after: Telemetry,
                         max_battery_drop_pct: float = 5.0) -> list[str]:
    """Changes of power state during a run that can change its speed; empty when none.

    Names a charger plugged or pulled (battery status ``Discharging`` on one side only; ``Charging``
    → ``Full`` stays on the charger and is not named) and a battery level drop of more than
    ``max_battery_drop_pct`` percentage points.
    """
    changes = []
    s0, s1 = before.battery_status, after.battery_status
    if _on_charger(s0) is not None and _on_charger(s1) not in (None, _on_charger(s0)):
        changes.append(f"battery status changed: {s0} → {s1}")
    p0, p1 = before.battery_pct, after.battery_pct
    if p0 is not None and p1 is not None and p0 - p1 > max_battery_drop_pct:
        changes.append(f"battery level dropped from {p0} % to {p1} %")
    return changes


def _on_charger(status: str | None) -> bool | None:
    """Whether a battery status means a charger is attached; None when it does not say."""
    status = (status or "").strip().lower()
    if status == "discharging":
        return False
    return True if status in ("charging", "full", "not charging") else None
