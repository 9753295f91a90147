"""Is a measurement defensible? A VALID / INVALID verdict with named reasons, on every run.

A run is INVALID when any of these holds (each becomes one reason):

* **too few samples**: the timed loop ended (``max_s``) before ``min_runs`` iterations;
* **CV above target**: repeat-until-stable was asked for (``target_cv``) and the spread of
  the samples never came down to it;
* **throttling detected**: the device's CPU temperature rose or a core's frequency fell
  during the run (see :func:`aiot.host.cooldown.detect_throttling`);
* **device state changed**: e.g. the charger was plugged in or out during the run;
* **emulated device**: an ``aiot emulator`` device (inventory label ``emulated``, or the
  emulated ADB device's ``ro.aiot.emulated`` property) times this host, not a phone.

The verdict is stored with the record (column ``validity``, details in the result), so a
report can leave invalid runs out or show them flagged.
"""

from __future__ import annotations

VALID, INVALID = "VALID", "INVALID"


def emulated(device_info: dict) -> bool:
    """Whether the device is one of aiot's emulated devices."""
    labels = device_info.get("labels") or {}
    props = device_info.get("android_props") or {}
    return bool(labels.get("emulated")) or props.get("ro.aiot.emulated") == "1"


def sample_reasons(result: dict, min_runs: int) -> list[str]:
    """Reasons from the timed loop itself: sample count and stability."""
    reasons = []
    count = (result.get("stats_ms") or {}).get("count")
    if count is not None and count < min_runs:
        reasons.append(f"too few samples: {count} < min_runs {min_runs} (max_s ended the loop)")
    stability = result.get("stability") or {}
    if stability.get("target_cv") is not None and stability.get("stable") is False:
        reasons.append(f"CV above target: {stability.get('cv', float('nan')):.3f} > "
                       f"{stability['target_cv']:.3f} after {count} samples")
    return reasons


def judge(result: dict, min_runs: int, device_info: dict, throttling: list[str] | None = None,
          state_changes: list[str] | None = None) -> dict:
    """The verdict of one finished run.

    Args:
        result: the agent's (or native tool's) result dict.
        min_runs: the run's requested minimum of timed iterations.
        device_info: the device facts the run recorded (labels, Android properties).
        throttling: reasons from telemetry taken before and after the run.
        state_changes: reasons from the device state (battery) before and after.

    Returns:
        ``{"verdict": "VALID" | "INVALID", "reasons": [...]}``.
    """
    reasons = sample_reasons(result, min_runs)
    reasons += [f"throttling detected: {r}" for r in throttling or []]
    reasons += [f"device state changed: {r}" for r in state_changes or []]
    if emulated(device_info):
        reasons.append("emulated device: the timings are this host's, not the device's")
    return {"verdict": INVALID if reasons else VALID, "reasons": reasons}
