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


#: The busiest other processes a load reading names (what to close on a busy device).
TOP = 3


def _process_ticks(proc: str = "/proc") -> dict:
    """``{pid: (command name, utime + stime ticks)}`` of every process whose ``stat`` this
    one may read (a phone's shell sees few or none): a few milliseconds, outside the loop."""
    found = {}
    try:
        pids = [name for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return found
    for pid in pids:
        try:
            with open(os.path.join(proc, pid, "stat"), encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError:
            continue  # ended meanwhile, or hidden
        name, _, rest = text.partition(" (")[2].rpartition(") ")
        fields = rest.split()
        try:
            found[int(pid)] = (name, int(fields[11]) + int(fields[12]))  # utime, stime
        except (IndexError, ValueError):
            continue
    return found


def snapshot(path: str = PROC_STAT) -> dict:
    """One reading: monotonic time, the kernel's tick counters, this process's CPU seconds,
    and each process's CPU ticks (where ``/proc/stat`` is readable, so a load is judged)."""
    times = os.times()
    ticks = _cpu_ticks(path)
    return {"t": time.monotonic(), "ticks": ticks, "own_s": times.user + times.system,
            "procs": _process_ticks() if ticks is not None else {}}


def _top_processes(before: dict, after: dict, wall: float) -> list:
    """The :data:`TOP` other processes that used the most CPU between two readings:
    ``[{"pid", "name", "cpus"}]`` (average CPUs), busiest first, those above 0.05 only."""
    try:
        per_second = os.sysconf("SC_CLK_TCK")
    except (AttributeError, ValueError, OSError):
        per_second = 100
    own = os.getpid()
    used = []
    for pid, (name, ticks) in (after.get("procs") or {}).items():
        earlier = (before.get("procs") or {}).get(pid)
        if pid == own or earlier is None or earlier[0] != name:
            continue
        cpus = (ticks - earlier[1]) / per_second / wall
        if cpus > 0.05:
            used.append({"pid": pid, "name": name, "cpus": round(cpus, 2)})
    top = sorted(used, key=lambda p: -p["cpus"])[:TOP]
    for found in top:  # "python" says little: its command line says which (read for 3 only)
        found["name"] = _command(found["pid"]) or found["name"]
    return top


def _command(pid: int, proc: str = "/proc") -> str | None:
    """``python -m pytest``: a process's first words (program by its base name), or None."""
    try:
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as fh:
            words = fh.read(4096).split(b"\0")
    except OSError:
        return None
    words = [w.decode("utf-8", "replace") for w in words if w][:3]
    if not words:
        return None
    words[0] = os.path.basename(words[0])
    return " ".join(" ".join(words).split())[:60]  # one line: a -c script has newlines


def between(before: dict, after: dict) -> dict:
    """The load during the interval of two :func:`snapshot` readings.

    Returns ``online_cpus``, ``busy_cpus`` (average CPUs busy, everyone), ``own_cpus`` (this
    process), ``other_cpus`` (the rest, never below 0), ``seconds`` and ``loadavg`` (1, 5 and
    15 minutes, read at the end); fields that cannot be known are None. ``top``, where
    processes were readable, names the busiest others (:func:`_top_processes`).
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
    top = _top_processes(before, after, wall)
    if top:
        load["top"] = top
    return load


def _kernel_cpus(path: str = PROC_STAT) -> int | None:
    """The CPUs ``/proc/stat`` sums over (its ``cpuN`` lines: the online ones)."""
    try:
        with open(path, encoding="ascii") as fh:
            return sum(1 for line in fh if line.startswith("cpu") and line[3:4].isdigit()) or None
    except OSError:
        return None
