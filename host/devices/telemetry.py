"""Device state around a run: CPU temperatures, CPU frequencies and the battery.

One shell round trip reads the kernel files through any Transport; parsing happens here on the
host with the probe's parsers, so local, SSH and ADB devices share it. A file the device lacks
(VMs, containers, macOS, a kernel that hides a zone) leaves its field empty or None: telemetry
never fails a run.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Protocol

from aiot.host.transports.base import Transport
from aiot.host.transports.probe import _PROBE_SCRIPT, _sections, parse_power_supplies, parse_thermal

# Thermal-zone types that name a CPU sensor across vendors: Qualcomm ``cpu-1-0-usr``, ``cpuss-0``,
# MediaTek ``mtktscpu``, Raspberry Pi ``cpu-thermal``, Intel ``x86_pkg_temp``, Google Tensor and
# Exynos ``BIG``/``MID``/``LITTLE``, Rockchip ``bigcore0-thermal`` and ``soc-thermal``. A bare
# ``soc`` is left out: on Qualcomm phones it is the battery's state-of-charge limit, not a sensor.
_CPU_ZONE = re.compile(
    r"cpu|x86_pkg_temp|coretemp|cluster|^(big|mid|little|prime)$|(big|mid|little)core"
    r"|soc[-_](thermal|max)",
    re.IGNORECASE,
)

# Per core: current frequency and the policy cap (``scaling_max_freq``), which thermal
# throttling lowers; then the probe's own thermal and power sections, so its parsers read them.
TELEMETRY_SCRIPT = r"""
echo '@@cpufreq'
for d in /sys/devices/system/cpu/cpu[0-9]*; do
  [ -d "$d" ] || continue
  cur=$(cat "$d/cpufreq/scaling_cur_freq" 2>/dev/null)
  cap=$(cat "$d/cpufreq/scaling_max_freq" 2>/dev/null)
  echo "${d##*/cpu} ${cur:--} ${cap:--}"
done
""" + _PROBE_SCRIPT[_PROBE_SCRIPT.index("echo '@@thermal'"):_PROBE_SCRIPT.index("echo '@@getprop'")]


@dataclass(frozen=True)
class Telemetry:
    """One reading of the device's state.

    Args:
        timestamp: host wall-clock time of the reading, Unix seconds.
        cpu_temps_c: CPU temperature per thermal zone, °C, keyed by the zone's type (its
            ``thermal_zoneN`` name when the type is missing or repeats). Zones whose type names
            a CPU sensor are kept when the device has any; otherwise every zone with a reading
            except battery zones (a Pi-like board with one unnamed SoC sensor still counts).
        cpu_temp_max_c: the hottest of ``cpu_temps_c``, or None without any.
        cpu_freq_khz: current frequency per online core, kHz.
        cpu_cap_khz: the frequency cap per core (``scaling_max_freq``), kHz; thermal throttling
            lowers it, while the current frequency of an idle core follows the governor.
        battery_pct: charge of the first battery, percent.
        battery_temp_c: its temperature, °C.
        battery_status: its status as the kernel says it (``Charging``, ``Discharging``, ``Full``).
    """

    timestamp: float
    cpu_temps_c: dict[str, float] = field(default_factory=dict)
    cpu_temp_max_c: float | None = None
    cpu_freq_khz: dict[int, int] = field(default_factory=dict)
    cpu_cap_khz: dict[int, int] = field(default_factory=dict)
    battery_pct: int | None = None
    battery_temp_c: float | None = None
    battery_status: str | None = None

    def to_dict(self) -> dict:
        """A JSON-ready copy (core numbers become string keys, as JSON needs)."""
        return {
            "timestamp": self.timestamp, "cpu_temps_c": dict(self.cpu_temps_c),
            "cpu_temp_max_c": self.cpu_temp_max_c,
            "cpu_freq_khz": {str(k): v for k, v in self.cpu_freq_khz.items()},
            "cpu_cap_khz": {str(k): v for k, v in self.cpu_cap_khz.items()},
            "battery_pct": self.battery_pct, "battery_temp_c": self.battery_temp_c,
            "battery_status": self.battery_status,
        }


class TelemetrySource(Protocol):
    """Anything that reads telemetry now: ``functools.partial(read_telemetry, transport)`` or a
    scripted fake in tests."""

    def __call__(self) -> Telemetry: ...


def cpu_temperatures(zones: list[dict]) -> dict[str, float]:
    """CPU temperatures by zone label from :func:`~aiot.host.transports.probe.parse_thermal` zones.

    CPU-named zones win when present; otherwise every read zone except battery ones.
    """
    read = [z for z in zones if z["temp_c"] is not None]
    chosen = [z for z in read if _CPU_ZONE.search(z["type"] or "")]
    if not chosen:
        chosen = [z for z in read if "batt" not in (z["type"] or "").lower()]
    temps: dict[str, float] = {}
    for zone in chosen:
        label = zone["type"] or zone["zone"]
        temps[zone["zone"] if label in temps else label] = zone["temp_c"]
    return temps


def parse_cpufreq(lines: list[str]) -> tuple[dict[int, int], dict[int, int]]:
    """Current frequency and cap per core from ``core cur cap`` lines; ``-`` means unreadable."""
    cur: dict[int, int] = {}
    cap: dict[int, int] = {}
    for line in lines:
        parts = line.split()
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        core = int(parts[0])
        if parts[1].isdigit():
            cur[core] = int(parts[1])
        if parts[2].isdigit():
            cap[core] = int(parts[2])
    return cur, cap


def parse_telemetry(text: str, now: float) -> Telemetry:
    """Telemetry from the script's output, stamped ``now``; pure, so recorded outputs test it."""
    sec = _sections(text)
    temps = cpu_temperatures(parse_thermal(sec.get("thermal", [])))
    cur, cap = parse_cpufreq(sec.get("cpufreq", []))
    batteries = [s for s in parse_power_supplies(sec.get("power", []))
                 if (s["type"] or "").lower() == "battery"]
    battery = batteries[0] if batteries else {}
    return Telemetry(
        timestamp=now, cpu_temps_c=temps, cpu_temp_max_c=max(temps.values(), default=None),
        cpu_freq_khz=cur, cpu_cap_khz=cap, battery_pct=battery.get("capacity_pct"),
        battery_temp_c=battery.get("temp_c"), battery_status=battery.get("status"),
    )


def read_telemetry(transport: Transport, timeout: float = 15.0) -> Telemetry:
    """The device's state now, in one shell round trip.

    Raises:
        TransportError: the device is unreachable or did not answer within ``timeout``.
    """
    result = transport.shell(["sh", "-c", TELEMETRY_SCRIPT], timeout=timeout)
    return parse_telemetry(result.stdout, time.time())
