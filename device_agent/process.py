"""This process's CPUs and memory: pinning it to CPUs, and its resident set."""

from __future__ import annotations

import os
import resource
import sys

from .signature import SpecError


def pin(cpus) -> list[int] | None:
    """Restrict this process (and the runtime threads it starts later) to ``cpus``.

    Called before the model is loaded, so every runtime thread inherits the mask. Returns
    the CPUs the process may use afterwards, as the kernel reports them.
    """
    if cpus is None:
        return None
    if not hasattr(os, "sched_setaffinity"):
        raise SpecError("this OS cannot pin a process to CPUs (no sched_setaffinity)")
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as exc:
        raise SpecError(f"cannot pin to CPUs {cpus}: {exc}") from None
    return sorted(os.sched_getaffinity(0))


def peak_rss_kb() -> int:
    """This process's high-water resident set (``ru_maxrss``) in KiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # macOS reports bytes


def current_rss_kb() -> int | None:
    """The resident set now (``VmRSS`` in /proc/self/status), or None where there is no procfs."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])  # "VmRSS:   12345 kB"
    except (OSError, ValueError, IndexError):
        return None
    return None
