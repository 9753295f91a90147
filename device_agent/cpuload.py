"""How busy the device's CPUs were while a run was timed, and how much of that was the run.

Two readings, one before and one after the timed loop (outside it): the kernel's CPU time
counters (``/proc/stat``, all CPUs together) and this process's own CPU time (``os.times``,
every thread of it, the runtime's thread pool included). Their difference over the loop's
wall time is the load that was *not* this run: another app, a compile, a second benchmark.
A phone's shell or an app's sandbox may hide ``/proc/stat``; the 1-minute load average is
then what is left (it lags, so the host judges it more loosely). Nothing here fails a run.
"""

from __future__ import annotations

import os
import time

PROC_STAT = "/proc/stat"


def _cpu_ticks(path: str = PROC_STAT) -> tuple[int, int] | None:
    """``(busy, total)`` clock ticks of all CPUs since boot, or None where unreadable.

    Idle and I/O wait are idle; guest time is already inside user time, so it is left out
    of the total (as ``top`` does).
    """
    try:
        with open(path, encoding="ascii") as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    try:
        values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    except ValueError:
        return None
    values += [0] * (8 - len(values))
    total = sum(values)
    return total - values[3] - values[4], total


def _load_average() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def online_cpus() -> int | None:
    """The CPUs this process may run on (its affinity, which cgroups and pinning narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def snapshot(path: str = PROC_STAT) -> dict:
    """One reading: monotonic time, the kernel's tick counters, this process's CPU seconds."""
    times = os.times()
    return {"t": time.monotonic(), "ticks": _cpu_ticks(path), "own_s": times.user + times.system}


def between(before: dict, after: dict) -> dict:
    """The load during the interval of two :func:`snapshot` readings.

    Returns ``online_cpus``, ``busy_cpus`` (average CPUs busy, everyone), ``own_cpus`` (this
    process), ``other_cpus`` (the rest, never below 0), ``seconds`` and ``loadavg`` (1, 5 and
    15 minutes, read at the end); fields that cannot be known are None.
    """
    wall = after["t"] - before["t"]
    load = {"online_cpus": online_cpus(), "seconds": round(wall, 3), "busy_cpus": None,
            "own_cpus": None, "other_cpus": None, "loadavg": _load_average()}
    if wall <= 0:
        return load
    own = (after["own_s"] - before["own_s"]) / wall
    load["own_cpus"] = round(own, 3)
    if before["ticks"] is None or after["ticks"] is None:
        return load
    busy_ticks = after["ticks"][0] - before["ticks"][0]
    total_ticks = after["ticks"][1] - before["ticks"][1]
    if total_ticks <= 0:
        return load
    # Ticks over all CPUs: the busy share times the CPUs the kernel counts is CPUs busy.
    counted = _kernel_cpus() or load["online_cpus"] or 1
    busy = busy_ticks / total_ticks * counted
    load["busy_cpus"] = round(busy, 3)
    load["other_cpus"] = round(max(0.0, busy - own), 3)
    return load


def _kernel_cpus(path: str = PROC_STAT) -> int | None:
    """The CPUs ``/proc/stat`` sums over (its ``cpuN`` lines: the online ones)."""
    try:
        with open(path, encoding="ascii") as fh:
            return sum(1 for line in fh if line.startswith("cpu") and line[3:4].isdigit()) or None
    except OSError:
        return None
