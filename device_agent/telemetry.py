"""The device's CPU frequencies, thermal zones and power supplies, read from sysfs in Python.

The host reads telemetry with one shell script (``aiot.host.devices.telemetry.TELEMETRY_SCRIPT``)
where no agent session is open. A session answers the same question without a shell round
trip or a ``cat`` per file (eight cores and a dozen zones are ~40 forks on a phone), and
prints exactly the script's sections, so the host keeps one parser for both.
"""

from __future__ import annotations

import glob
import os
import re

CPU_DIRS = "/sys/devices/system/cpu/cpu[0-9]*"
THERMAL_ZONES = "/sys/class/thermal/thermal_zone*"
POWER_SUPPLIES = "/sys/class/power_supply/*"


def _read(path: str) -> str:
    """A sysfs file's text without trailing newlines, or "" when it cannot be read (as the
    script's ``$(cat f 2>/dev/null)``)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().rstrip("\n")
    except OSError:
        return ""


def _cpu_number(path: str) -> str:
    return os.path.basename(path)[len("cpu") :]


def telemetry_text(root: str = "") -> str:
    """The ``@@cpufreq``, ``@@thermal`` and ``@@power`` sections, line for line as the host's
    shell script prints them. ``root`` prefixes every path (tests point it at a fake sysfs)."""
    lines = ["@@cpufreq"]
    for cpu in sorted(glob.glob(root + CPU_DIRS)):
        if not re.fullmatch(r"cpu\d+", os.path.basename(cpu)) or not os.path.isdir(cpu):
            continue
        cur = _read(f"{cpu}/cpufreq/scaling_cur_freq") or "-"
        cap = _read(f"{cpu}/cpufreq/scaling_max_freq") or "-"
        lines.append(f"{_cpu_number(cpu)} {cur} {cap}")
    lines.append("@@thermal")
    for zone in sorted(glob.glob(root + THERMAL_ZONES)):
        if not os.access(f"{zone}/temp", os.R_OK):
            continue
        lines.append(
            "\t".join((os.path.basename(zone), _read(f"{zone}/type"), _read(f"{zone}/temp")))
        )
    lines.append("@@power")
    for supply in sorted(glob.glob(root + POWER_SUPPLIES)):
        if not os.path.isdir(supply):
            continue
        fields = [_read(f"{supply}/{name}") for name in ("type", "capacity", "status", "temp")]
        lines.append("\t".join((os.path.basename(supply), *fields)))
    return "\n".join(lines) + "\n"
