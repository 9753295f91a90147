"""How many threads PyTorch work on this host (training, the robustness suites) should use.

PyTorch takes every CPU by default. On a busy host that is the slowest choice there is: each
small operator ends in a barrier that waits for the thread the scheduler has parked behind the
other work. Measured on a 2-core host at load 6: a tiny_cnn training step took 189–225 ms on
one thread and 449–724 ms on two. So aiot gives PyTorch the CPUs that are idle when the
command starts (at least one), logs it when that is fewer than all (a notice on stderr
would be a second line under every one-line error of a busy host), and takes the user's
count from ``AIOT_HOST_THREADS`` when set. Decided once per process: later on, the load
average counts aiot's own work.
"""

from __future__ import annotations

import logging
import os
from functools import cache

from aiot.core import environment
from aiot.core.errors import UsageError

log = logging.getLogger(__name__)

#: The variable that fixes the count (a positive integer).
ENV = "AIOT_HOST_THREADS"


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the system has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def idle_threads(usable: int, load: float) -> int:
    """Threads for ``usable`` CPUs at a 1-minute load average of ``load``: the idle ones,
    rounded, at least one."""
    return max(1, min(usable, int(usable - load + 0.5)))


@cache
def host_threads() -> int:
    """The thread count for PyTorch work in this process (see the module)."""
    usable = usable_cpus()
    chosen = environment.get(ENV, "").strip()
    if chosen:
        if not chosen.isdigit() or int(chosen) < 1:
            raise UsageError(f"{ENV} must be a positive integer, got {chosen!r}",
                             f"e.g. {ENV}={usable}, or unset it to use the idle CPUs")
        return int(chosen)
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this system: PyTorch's own default
        return usable
    threads = idle_threads(usable, load)
    if threads < usable:
        log.info("this host is busy (load %.1f on %d CPUs): PyTorch work here uses %d "
                 "thread(s) (%s to choose)", load, usable, threads, ENV)
    return threads
