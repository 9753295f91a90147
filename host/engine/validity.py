"""Is a measurement defensible? A VALID / INVALID verdict with named reasons, on every run.

A run is INVALID when any of these holds (each becomes one reason):

* **too few samples**: the timed loop ended (``max_s``) before ``min_runs`` iterations;
* **CV above target**: repeat-until-stable was asked for (``target_cv``) and the spread of
  the samples never came down to it;
* **throttling detected**: the device's CPU temperature rose or a core's frequency fell
  during the run (see :func:`aiot.host.engine.cooldown.detect_throttling`);
* **device state changed**: e.g. the charger was plugged in or out during the run;
* **emulated device**: an ``aiot emulator`` device (inventory label ``emulated``, or the
  emulated ADB device's ``ro.aiot.emulated`` property) times this host, not a phone;
* **threads above online cores**: more threads than the CPUs the run may use (the device's
  online cores, or its ``--cluster``) time the scheduler, not the model (warned before the run);
* **device busy**: other processes kept CPUs busy while the run was timed (the agent's
  ``load`` reading: ``/proc/stat`` less its own CPU time; else the load average);
* **speed changed**: a fixed reference kernel (the agent's ``speedref``) took more than a
  limit (25 %) longer, or shorter, just after the timed loop than just before it: the CPU's
  speed changed while the model was timed, which the load counters do not see (a neighbour
  virtual machine, a frequency step).
* **CV above limit**: the samples' robust CV (1.4826·MAD/median) is above a default limit,
  whether or not ``--target-cv`` was asked for;
* **too few samples**: fewer than a floor (10) even where ``--min-runs`` asked for fewer.

* **long tail**: the p90 is more than a limit (3×) times the median (the robust CV ignores
  a slow tenth of the samples; this check does not).
* **timing implausible**: the numbers a run reports do not add up (:func:`timing_reasons`):
  its invoke times sum to more than the timed loop's own wall time, or to much less of it
  than the loop's overhead can explain, or the runtime's profiler saw the operators take
  several times the median a run reports (a time taken before asynchronous work finished,
  as LiteRT #9453 reported 274 µs for a 16 ms run). Not a judgement call: no limit to relax.

Those with a limit have defaults a person can change for a noisy lab, in ``AIOT_VALIDITY``
or ``--validity`` (run, sweep): ``cv=0.2,load=1.5,samples=5,threads=off,tail=5,speed=0.5``
(``off`` turns a check off); see :class:`ValidityPolicy`. Every verdict stores the limits it
used, and one judged under looser limits than the defaults shows as ``VALID (relaxed: …)``.

The verdict is stored with the record (column ``validity``, details in the result), so a
report can leave invalid runs out or show them flagged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from aiot.core import environment
from aiot.core.errors import UsageError
from aiot.host.transports.probe import DeviceFacts, emulated  # a device's facts, judged here

VALID, INVALID = "VALID", "INVALID"
ENV = "AIOT_VALIDITY"


@dataclass(frozen=True)
class ValidityPolicy:
    """The limits of the checks whose thresholds are a judgement call (None: not checked).

    Args:
        cv: the highest robust CV of a VALID run's samples (0.10: a median whose samples
            spread by more than 10 % is not a number to compare devices by).
        load: the most CPUs other processes may keep busy, on average, while a run is timed.
        samples: the fewest timed samples of a VALID run (a median of fewer says little).
        threads: whether more threads than online cores make a run INVALID.
        tail: the highest p90 / median of a VALID run. The robust CV does not see a slow tenth
            of the samples (the MAD ignores them); this does, so a relaxed ``cv`` or ``load``
            never lets a run whose p90 is hundreds of times its median pass.
        speed: the most the reference kernel's time after the timed loop may differ from its
            time before it, as a share of the faster of the two.
    """

    cv: float | None = 0.10
    load: float | None = 0.5
    samples: int | None = 10
    threads: bool = True
    tail: float | None = 3.0
    speed: float | None = 0.25

    @classmethod
    def from_env(cls, text: str | None = None, option: str | None = None) -> ValidityPolicy:
        """The defaults, changed by ``AIOT_VALIDITY`` (or ``text``), then by ``option`` (the
        ``--validity`` of run and sweep, the same grammar): ``key=value`` pairs,
        comma-separated, ``off`` for a check left out.

        Raises:
            UsageError: an unknown key or a value that is not a number.
        """
        text = environment.get(ENV, "") if text is None else text
        return cls()._with(text, ENV)._with(option or "", "--validity")

    def _with(self, text: str, source: str) -> ValidityPolicy:
        policy = self
        known = {f.name for f in fields(self)}
        for pair in filter(None, (p.strip() for p in text.split(","))):
            key, _, value = (t.strip().lower() for t in pair.partition("="))
            if key not in known:
                raise UsageError(f"{source}: unknown check '{key}'",
                                 f"use {', '.join(sorted(known))}, e.g. {_example(source)}")
            policy = replace(policy, **{key: _value(key, value, source)})
        return policy

    def limits(self) -> dict:
        """The limits as stored with every verdict (None: the check was off)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def relaxed(self) -> list[str]:
        """``["load≤2", "cv off"]``: each limit looser than the default (a stricter one is
        not a relaxation: a VALID under it is a plain VALID)."""
        return relaxed_limits(self.limits())


def relaxed_limits(limits: dict | None) -> list[str]:
    """:meth:`ValidityPolicy.relaxed` of stored ``limits`` (a record's verdict)."""
    default = ValidityPolicy()
    found = []
    for key, value in (limits or {}).items():
        base = getattr(default, key, None)
        if key == "threads":
            if base and not value:
                found.append("threads off")
        elif value is None and base is not None:
            found.append(f"{key} off")
        elif value is not None and base is not None and (
                value < base if key == "samples" else value > base):
            found.append(_limit(key, value))
    return found


def verdict_text(validity: dict | None) -> str | None:
    """``VALID``, ``VALID (relaxed: load≤2, cv off)`` or ``INVALID`` of a stored verdict:
    a run judged under relaxed limits is never shown as a plain VALID."""
    if not validity:
        return None
    relaxed = relaxed_limits(validity.get("limits"))
    if validity.get("verdict") == VALID and relaxed:
        return f"VALID (relaxed: {', '.join(relaxed)})"
    return validity.get("verdict")


def limit_changes(limits: dict | None) -> list[str]:
    """``["load≤2", "cv off"]``: each stored limit that is not the default (looser or
    stricter), for a footnote saying which limits judged the runs shown."""
    default = ValidityPolicy().limits()
    found = []
    for key, value in (limits or {}).items():
        if key in default and value != default[key]:
            found.append(_limit(key, value))
    return found


def _limit(key: str, value) -> str:
    """``load≤2``, ``samples≥10``, ``cv off``, ``threads on``: one limit as shown."""
    if key == "threads" or value is None:
        return f"{key} {'on' if value else 'off'}"
    return f"{key}{'≥' if key == 'samples' else '≤'}{value:g}"


def limits_text(limits: dict) -> str:
    """``cv≤0.1, load≤0.5, samples≥10, threads on, tail≤3`` of stored limits, with
    ``(not the defaults: …)`` where some differ."""
    shown = [_limit(key, value) for key, value in limits.items()]
    changed = limit_changes(limits)
    return ", ".join(shown) + (f" (not the defaults: {', '.join(changed)})" if changed else "")


def _example(source: str) -> str:
    return f"{ENV}=cv=0.2,load=off" if source == ENV else "--validity load=2,cv=0.2"


def _value(key: str, value: str, source: str = ENV):
    off = value in ("off", "none", "no", "false", "0") if key == "threads" else value in ("off", "none")
    if key == "threads":
        return not off
    if off:
        return None
    try:
        number = int(value) if key == "samples" else float(value)
    except ValueError:
        raise UsageError(f"{source}: {key}={value} is not a number",
                         f"e.g. {source}{'=' if source == ENV else ' '}"
                         f"{key}={'10' if key == 'samples' else '0.2'}, or {key}=off") from None
    if number < 0:
        raise UsageError(f"{source}: {key} must not be negative, got {value}")
    return number


def sample_reasons(result: dict, min_runs: int, policy: ValidityPolicy | None = None) -> list[str]:
    """Reasons from the timed loop itself: sample count and stability."""
    policy = policy or ValidityPolicy()
    reasons = []
    stats = result.get("stats_ms") or {}
    count = stats.get("count")
    if count is not None and count < min_runs:
        reasons.append(f"too few samples: {count} < min_runs {min_runs} (max_s ended the loop)")
    elif count is not None and policy.samples is not None and count < policy.samples:
        reasons.append(f"too few samples: {count} < {policy.samples}, too few for a median to "
                       f"compare by (--min-runs {policy.samples} or more)")
    stability = result.get("stability") or {}
    if stability.get("target_cv") is not None and stability.get("stable") is False:
        cv, target = apart(stability.get("cv", float("nan")), stability["target_cv"])
        reasons.append(f"CV above target: {cv} > {target} after {count} samples")
    elif policy.cv is not None and (count or 0) >= 2:
        cv, which = _cv(stats)
        if cv is not None and cv > policy.cv:
            shown, limit = apart(cv, policy.cv)
            reasons.append(f"CV above limit: {which} {shown} > {limit} "
                           f"over {count} samples (a noisy device or run; --validity cv=… or "
                           f"{ENV}=cv=… sets the limit)")
    if why := tail_reason(stats, policy.tail):
        reasons.append(why)
    return reasons


def apart(value: float, limit: float, digits: int = 3) -> tuple[str, str]:
    """``value`` and ``limit`` with as many decimals (``digits`` at least) as it takes for
    them to read differently: a CV of 0.1004 over a limit of 0.1 reads ``0.1004 > 0.1000``,
    not ``0.100 > 0.100``."""
    for places in range(digits, 10):
        shown, bound = f"{value:.{places}f}", f"{limit:.{places}f}"
        if shown != bound:
            return shown, bound
    return f"{value:.{digits}f}", f"{limit:.{digits}f}"


def tail_reason(stats: dict, limit: float | None) -> str | None:
    """Why the slow tenth of the samples makes the median no number to compare by, or None."""
    median, p90 = stats.get("median"), stats.get("p90")
    if limit is None or not median or p90 is None or p90 <= limit * median:
        return None
    ratio, _ = apart(p90 / median, limit, 1)
    return (f"long tail: p90 {p90:.3g} ms is {ratio}× the median {median:.3g} ms "
            f"(limit {limit:g}×): a tenth of the runs were stalled (--validity tail=… sets it)")


def _cv(stats: dict) -> tuple[float | None, str]:
    """The robust CV where the samples are known, else std / mean (native tools' numbers)."""
    if stats.get("robust_cv") is not None:
        return stats["robust_cv"], "robust CV"
    if stats.get("cv") is not None:
        return stats["cv"], "CV"
    mean, std = stats.get("mean"), stats.get("std")
    if mean and std is not None:
        return std / mean, "CV"
    return None, "CV"


def speed_reason(speed: dict | None, limit: float | None) -> str | None:
    """Why the CPU's speed changed while the run was timed (its reference kernel's readings
    on each side of the timed loop, ``result.speed``), or None (also without readings)."""
    if not isinstance(speed, dict) or limit is None:
        return None
    before, after = speed.get("before_ms"), speed.get("after_ms")
    if not isinstance(before, (int, float)) or not isinstance(after, (int, float)) \
            or min(before, after) <= 0:
        return None
    change = max(before, after) / min(before, after) - 1
    if change <= limit:
        return None
    # As many decimals as the limit has (25 %, 0.5 %), more where the two would read alike.
    shown, bound = apart(change * 100, limit * 100, len(f"{limit * 100:g}".partition(".")[2]))
    slower = "slower" if after > before else "faster"
    return (f"speed changed: a reference kernel took {before:.3g} ms before the timed loop and "
            f"{after:.3g} ms after it ({shown} % {slower}; limit {bound} %): the CPU's speed "
            "changed while the model was timed, which the load counters do not see (another "
            "virtual machine, a frequency step; --validity speed=… sets it)")


def threads_reason(threads: int | None, usable: int | None, pinned: bool = False) -> str | None:
    """Why ``threads`` oversubscribe ``usable`` CPUs, or None when they do not."""
    if not threads or not usable or threads <= usable:
        return None
    where = "CPUs of its cluster" if pinned else "online cores"
    return (f"threads above online cores: {threads} threads > {usable} {where}, so the "
            "threads take turns on the cores and the run times the scheduler")


def load_reason(load: dict | None, threads: int | None, limit: float | None) -> str | None:
    """Why the device was too busy while the run was timed, or None (also without a reading)."""
    if not load or limit is None:
        return None
    other = load.get("other_cpus")
    if other is not None:
        if other <= limit:
            return None
        return (f"device busy: other processes kept {other:.2f} CPUs busy while the run was "
                f"timed (limit {limit:g}; {load.get('busy_cpus', 0):.2f} busy in all)"
                f"{_busiest(load.get('top'))}. {_busy_fix(max(other, limit))}")
    average = (load.get("loadavg") or [None])[0]
    # The 1-minute average lags and counts this run's threads: judged a core more loosely.
    if average is None or average - (threads or 1) <= max(limit, 1.0):
        return None
    return (f"device busy: load average {average:.2f} with {threads or 1} thread(s) of this run "
            f"(limit {max(limit, 1.0):g} more; the device hides its CPU counters). "
            f"{_busy_fix(average - (threads or 1))}")


def _busiest(top: list | None) -> str:
    """``; busiest: python (pid 812) 1.20 CPUs, …``: who kept the device busy, if known."""
    if not top:
        return ""
    return "; busiest: " + ", ".join(f"{p['name']} (pid {p['pid']}) {p['cpus']:.2f} CPUs"
                                     for p in top)


def _busy_fix(measured: float) -> str:
    """What to do about a busy device, in the reason itself (the way out is not hidden)."""
    allowed = math.ceil(measured * 10) / 10
    return (f"To fix: close what runs, or judge with a looser limit, stored and shown with each "
            f"result (--validity load={allowed:g}, or {ENV}=load={allowed:g})")


def threads_warning(device: str, threads: list[int], device_info: dict,
                    cpus: list[int] | None = None, policy: ValidityPolicy | None = None) -> str | None:
    """The line said before a sweep whose thread counts oversubscribe a device's cores."""
    policy = policy or ValidityPolicy.from_env()
    usable = DeviceFacts.of(device_info).usable_cpus(cpus)
    over = sorted({t for t in threads if threads_reason(t, usable)})
    if not over or not policy.threads:
        return None
    counts = ", ".join(map(str, over))
    return (f"{device} has {usable} online cores: the runs at {counts} threads oversubscribe them "
            f"and will be marked INVALID (--validity threads=off measures them as VALID, "
            "relaxed)")


#: The timing audit's limits (:func:`timing_reasons`). Between two invokes the loop reads the
#: clock, appends a sample and, every 5 % of the samples, checks the CV: microseconds, which
#: on a sub-millisecond model can still be a large share of the wall time; and it writes a
#: progress line four times a second (a millisecond or two on a loaded host, measured: 1.96
#: ms in a 5-sample loop of 2.2 ms). So a loop whose invokes cover less than ``COVERED_MIN``
#: of its wall is implausible only where the time nothing accounts for is also above
#: ``GAP_MS_MIN`` per iteration and ``UNACCOUNTED_MS_MIN`` in all.
COVERED_MIN = 0.5
GAP_MS_MIN = 0.02
UNACCOUNTED_MS_MIN = 10.0
#: The invoke times may exceed the loop's wall by clock rounding only (the wall is sent as
#: epoch seconds of float precision): this much, in ms, plus 0.1 %.
OVER_MS = 0.5
#: A profile's operator time per inference above this many times the run's median (and by
#: more than ``PROFILE_GAP_MS``) says the timed invokes did not wait for the work they timed.
#: A profiler costs tens of µs per operator call (PyTorch's autograd profiler on a .ptl), so a
#: sub-millisecond model's profile can be a few times its median and a millisecond or two
#: longer without anything wrong (measured: a tiny_cnn sweep on a loaded 2-core host); LiteRT
#: #9453's was 58× and 16 ms.
PROFILE_OVER = 5.0
PROFILE_GAP_MS = 5.0


def timing_reasons(result: dict) -> list[str]:
    """The timing audit of one run: its per-invoke times against the timed loop's own wall
    time (``measure_start_unix_s`` to ``measure_end_unix_s``, the agent's clock) and against
    its profile's operator total; one ``timing implausible: …`` reason per disagreement, with
    both numbers. Results without a loop wall (a native tool's) are not audited by it."""
    samples = result.get("samples_ns") or []
    start, end = result.get("measure_start_unix_s"), result.get("measure_end_unix_s")
    reasons = []
    if samples and isinstance(start, (int, float)) and isinstance(end, (int, float)):
        wall_ms, invoked_ms = (end - start) * 1e3, sum(samples) / 1e6
        gap_ms = (wall_ms - invoked_ms) / len(samples)
        if invoked_ms > wall_ms * 1.001 + OVER_MS:
            reasons.append(f"timing implausible: the {len(samples)} invoke times add up to "
                           f"{invoked_ms:.3f} ms, more than the timed loop's own "
                           f"{wall_ms:.3f} ms of wall time")
        elif invoked_ms < COVERED_MIN * wall_ms and gap_ms > GAP_MS_MIN \
                and wall_ms - invoked_ms > UNACCOUNTED_MS_MIN:
            reasons.append(f"timing implausible: the {len(samples)} invoke times add up to "
                           f"{invoked_ms:.3f} ms of the timed loop's {wall_ms:.3f} ms "
                           f"({invoked_ms / wall_ms:.0%}); {gap_ms:.3f} ms per iteration "
                           "is accounted for by nothing")
    median = (result.get("stats_ms") or {}).get("median")
    profile = result.get("profile") if isinstance(result.get("profile"), dict) else {}
    total = profile.get("total_ms") if profile.get("available") else None
    if isinstance(total, (int, float)) and isinstance(median, (int, float)) and median > 0 \
            and total > PROFILE_OVER * median and total - median > PROFILE_GAP_MS:
        reasons.append(f"timing implausible: the profiler saw the operators take {total:.3f} ms "
                       f"per inference, {total / median:.1f}× the run's median of "
                       f"{median:.3f} ms")
    return reasons


def short_reasons(reasons: list[str]) -> str:
    """``device busy; CV above limit``: each reason's name, for a table cell."""
    return "; ".join(dict.fromkeys(r.partition(":")[0] for r in reasons))


#: The reasons that tell of the machine's moment, not of the run: measured again later, the
#: same run may well be VALID (an emulated device or an implausible timing would not be).
OF_THE_MOMENT = frozenset({"device busy", "speed changed", "CV above limit", "CV above target",
                           "long tail", "throttling detected", "device state changed"})


def of_the_moment(reasons: list[str]) -> bool:
    """Whether a run is INVALID for reasons of :data:`OF_THE_MOMENT` alone."""
    return bool(reasons) and all(r.partition(":")[0] in OF_THE_MOMENT for r in reasons)


def judge(result: dict, min_runs: int, device_info: dict, throttling: list[str] | None = None,
          state_changes: list[str] | None = None, threads: int | None = None,
          cpus: list[int] | None = None, policy: ValidityPolicy | None = None) -> dict:
    """The verdict of one finished run.

    Args:
        result: the agent's (or native tool's) result dict.
        min_runs: the run's requested minimum of timed iterations.
        device_info: the device facts the run recorded (labels, Android properties, cores).
        throttling: reasons from telemetry taken before and after the run.
        state_changes: reasons from the device state (battery) before and after.
        threads: the run's thread count (default: the result's).
        cpus: the CPUs the run was pinned to, if it was.
        policy: the limits (default: :meth:`ValidityPolicy.from_env`).

    Returns:
        ``{"verdict": "VALID" | "INVALID", "reasons": [...], "limits": {...}}``: the limits
        the verdict used (:meth:`ValidityPolicy.limits`), so a run judged under relaxed ones
        is shown as such (:func:`verdict_text`).
    """
    policy = policy or ValidityPolicy.from_env()
    threads = threads or result.get("threads")
    load = result.get("load") or None
    reasons = []
    # The agent's own count of the CPUs it may use wins over the probe's (a cgroup narrows it).
    facts = DeviceFacts.of(device_info)
    usable = facts.usable_cpus(cpus) if cpus or not load else (
        load.get("online_cpus") or facts.usable_cpus())
    if policy.threads and (why := threads_reason(threads, usable, pinned=bool(cpus))):
        reasons.append(why)
    if why := load_reason(load, threads, policy.load):
        reasons.append(why)
    reasons += sample_reasons(result, min_runs, policy)
    if why := speed_reason(result.get("speed"), policy.speed):
        reasons.append(why)
    reasons += timing_reasons(result)
    reasons += [f"throttling detected: {r}" for r in throttling or []]
    reasons += [f"device state changed: {r}" for r in state_changes or []]
    if emulated(device_info):
        reasons.append("emulated device: the timings are this host's, not the device's")
    return {"verdict": INVALID if reasons else VALID, "reasons": reasons,
            "limits": policy.limits()}


def _stored_policy(limits) -> ValidityPolicy | None:
    """The policy a stored verdict's ``limits`` name, or None where they are not limits a
    policy holds (missing, another type, a negative or non-finite number)."""
    if not isinstance(limits, dict) or not limits:
        return None
    known = {f.name: f for f in fields(ValidityPolicy)}
    given = {}
    for key, value in limits.items():
        if key not in known:
            continue
        if key == "threads":
            if not isinstance(value, bool):
                return None
        elif value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                    or not math.isfinite(value) or value < 0):
            return None
        given[key] = value
    return ValidityPolicy(**given)


def _of(value, kind: type) -> list:
    """``value`` if it is a list of ``kind`` items, else an empty list."""
    return value if isinstance(value, list) and all(isinstance(v, kind) for v in value) else []


def judge_record(record: dict) -> dict | None:
    """The verdict of a stored record (another host's, or an export file's: an import's)
    judged again here from its own numbers, as :func:`judge` judged it when it was measured:
    its result, its spec's ``min_runs``, the device, telemetry and pinning its provenance
    names, under the limits its stored verdict names (those it was judged by; else this
    host's, ``AIOT_VALIDITY``). None for a record that has no verdict: not an ok latency run
    with statistics. What the record says its verdict was is not read.

    The throttling and state changes are the reasons its host found in the telemetry around
    the run (``provenance.device_state``), read as the record states them.
    """
    result = record.get("result")
    if (record.get("kind") != "latency" or record.get("status") != "ok"
            or not isinstance(result, dict) or not isinstance(result.get("stats_ms"), dict)):
        return None
    spec = record.get("spec") if isinstance(record.get("spec"), dict) else {}
    params = spec.get("params") if isinstance(spec.get("params"), dict) else {}
    min_runs = params.get("min_runs")
    prov = record.get("provenance") if isinstance(record.get("provenance"), dict) else {}
    device = prov.get("device") if isinstance(prov.get("device"), dict) else {}
    state = prov.get("device_state") if isinstance(prov.get("device_state"), dict) else {}
    affinity = prov.get("affinity") if isinstance(prov.get("affinity"), dict) else {}
    stored = result.get("validity") if isinstance(result.get("validity"), dict) else {}
    threads = record.get("threads")
    return judge(result, min_runs if isinstance(min_runs, int) and min_runs >= 1 else 1, device,
                 throttling=_of(state.get("throttling"), str),
                 state_changes=_of(state.get("changes"), str),
                 threads=threads if isinstance(threads, int) else None,
                 cpus=_of(affinity.get("cpus"), int) or None,
                 policy=_stored_policy(stored.get("limits")) or ValidityPolicy.from_env())
