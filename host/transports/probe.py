"""Probe a Linux-like device (this machine, a board, a phone) through any Transport.

One shell round trip prints sections of kernel files; parsing happens here on the host,
so the same code serves local, SSH and ADB devices.
"""

from __future__ import annotations

from dataclasses import dataclass

import re

from aiot.host.transports.base import Transport
from aiot.host.transports.socs import lookup

# Android properties read when ``getprop`` exists; they win over kernel files where both say.
ANDROID_PROPS = (
    "ro.product.model", "ro.product.manufacturer", "ro.board.platform", "ro.soc.manufacturer",
    "ro.soc.model", "ro.hardware", "ro.product.cpu.abi", "ro.build.version.release",
    "ro.build.version.sdk",
)

# Each section starts with a marker line; missing files simply yield empty sections.
_PROBE_SCRIPT = r"""
echo '@@uname'; uname -s -r -m 2>/dev/null
echo '@@cpuinfo'; cat /proc/cpuinfo 2>/dev/null
echo '@@meminfo'; cat /proc/meminfo 2>/dev/null
echo '@@os'; cat /etc/os-release 2>/dev/null
echo '@@cpufreq'
for d in /sys/devices/system/cpu/cpu[0-9]*; do
  n=${d##*/cpu}
  max=$(cat "$d/cpufreq/cpuinfo_max_freq" 2>/dev/null)
  min=$(cat "$d/cpufreq/cpuinfo_min_freq" 2>/dev/null)
  cur=$(cat "$d/cpufreq/scaling_cur_freq" 2>/dev/null)
  echo "$n ${max:--} ${min:--} ${cur:--}"
done
echo '@@devicetree'; cat /proc/device-tree/model 2>/dev/null | tr -d '\0'; echo
echo '@@compatible'; cat /proc/device-tree/compatible 2>/dev/null | tr '\0' '\n'
echo '@@thermal'
for z in /sys/class/thermal/thermal_zone*; do
  [ -r "$z/temp" ] || continue
  printf '%s\t%s\t%s\n' "${z##*/}" "$(cat "$z/type" 2>/dev/null)" "$(cat "$z/temp" 2>/dev/null)"
done
echo '@@power'
for p in /sys/class/power_supply/*; do
  [ -d "$p" ] || continue
  printf '%s\t%s\t%s\t%s\t%s\n' "${p##*/}" "$(cat "$p/type" 2>/dev/null)" \
    "$(cat "$p/capacity" 2>/dev/null)" "$(cat "$p/status" 2>/dev/null)" "$(cat "$p/temp" 2>/dev/null)"
done
echo '@@getprop'
if command -v getprop >/dev/null 2>&1; then
  for k in ANDROID_PROPS; do echo "[$k]: [$(getprop "$k")]"; done
fi
echo '@@online'; cat /sys/devices/system/cpu/online 2>/dev/null
""".replace("ANDROID_PROPS", " ".join(ANDROID_PROPS))


def _sections(text: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("@@"):
            current = line[2:].strip()
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    return sections


def parse_cpuinfo(lines: list[str]) -> dict:
    """CPU model name (x86 ``model name``, ARM ``Hardware``/``CPU part``) and processor count.

    ``hardware`` is the ARM ``Hardware`` line alone: a SoC name on older kernels.
    """
    fields: dict[str, str] = {}
    processors = 0
    for line in lines:
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "processor":
            processors += 1
        fields.setdefault(key, value)
    model = fields.get("model name") or fields.get("Hardware") or fields.get("Model") or ""
    if not model and "CPU part" in fields:
        model = f"ARM part {fields['CPU part']} (implementer {fields.get('CPU implementer', '?')})"
    return {"cpu_model": model or "unknown", "processors": processors,
            "hardware": fields.get("Hardware") or None}


def parse_clusters(lines: list[str]) -> list[dict]:
    """Group cores by maximum frequency into clusters, fastest first.

    Cores without cpufreq (VMs, containers) form one cluster with unknown frequency.
    """
    by_max: dict[int | None, list[dict]] = {}
    for line in lines:
        parts = line.split()
        if len(parts) != 4 or not parts[0].isdigit():
            continue
        core, mx, mn, cur = parts
        to_int = lambda s: int(s) if s.isdigit() else None  # noqa: E731
        by_max.setdefault(to_int(mx), []).append(
            {"core": int(core), "min_khz": to_int(mn), "cur_khz": to_int(cur)}
        )
    clusters = []
    for max_khz in sorted(by_max, key=lambda k: -(k or 0)):
        cores = sorted(by_max[max_khz], key=lambda c: c["core"])
        mins = [c["min_khz"] for c in cores if c["min_khz"]]
        clusters.append({
            "cores": [c["core"] for c in cores],
            "max_khz": max_khz,
            "min_khz": min(mins) if mins else None,
        })
    names = _cluster_names(len(clusters))
    for cluster, name in zip(clusters, names):
        cluster["name"] = name
    return clusters


def _cluster_names(n: int) -> list[str]:
    if n == 1:
        return ["all"]
    if n == 2:
        return ["big", "little"]
    return ["prime"] + ["big"] * (n - 2) + ["little"]


def parse_meminfo(lines: list[str]) -> dict:
    """Total and available memory in MiB."""
    values = {}
    for line in lines:
        m = re.match(r"(\w+):\s+(\d+)\s*kB", line)
        if m:
            values[m.group(1)] = int(m.group(2)) // 1024
    return {"mem_total_mib": values.get("MemTotal"), "mem_available_mib": values.get("MemAvailable")}


def parse_os_release(lines: list[str]) -> str | None:
    for line in lines:
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return None


def parse_getprop(lines: list[str]) -> dict[str, str]:
    """Android properties from ``getprop`` output (``[key]: [value]``); empty values are dropped."""
    props = {}
    for line in lines:
        m = re.match(r"\[([^\]]+)\]: \[(.*)\]\s*$", line)
        if m and m.group(2).strip():
            props[m.group(1)] = m.group(2).strip()
    return props


def _to_int(text: str) -> int | None:
    text = text.strip()
    return int(text) if re.fullmatch(r"-?\d+", text) else None


def kernel_celsius(raw: str) -> float | None:
    """A thermal-zone reading in °C.

    The sysfs ABI says millidegrees; some older Android kernels report whole degrees, and no
    real sensor reads 200 °C or a millidegree value that small, so magnitude tells them apart.
    """
    value = _to_int(raw)
    if value is None:
        return None
    return round(value / 1000, 1) if abs(value) >= 200 else float(value)


def parse_thermal(lines: list[str]) -> list[dict]:
    """Thermal zones (``zone<TAB>type<TAB>temp`` lines) in zone order, temperatures in °C."""
    zones = []
    for line in lines:
        parts = line.split("\t")
        if len(parts) == 3 and parts[0].strip():
            zone, kind, temp = (p.strip() for p in parts)
            zones.append({"zone": zone, "type": kind or None, "temp_c": kernel_celsius(temp)})
    return sorted(zones, key=lambda z: _to_int(re.sub(r"\D", "", z["zone"]) or "0"))


def parse_power_supplies(lines: list[str]) -> list[dict]:
    """Batteries, USB and mains supplies (``name<TAB>type<TAB>capacity<TAB>status<TAB>temp``).

    ``capacity`` is percent charge; ``temp`` is tenths of a degree per the power_supply ABI.
    """
    supplies = []
    for line in lines:
        parts = line.split("\t")
        if len(parts) == 5 and parts[0].strip():
            name, kind, capacity, status, temp = (p.strip() for p in parts)
            tenths = _to_int(temp)
            supplies.append({
                "name": name, "type": kind or None, "capacity_pct": _to_int(capacity),
                "status": status or None, "temp_c": None if tenths is None else tenths / 10,
            })
    return supplies


def detect_soc(props: dict[str, str], compatible: list[str], hardware: str | None) -> dict:
    """The SoC, its maker and its marketing name, from the most to the least reliable source.

    Android properties (``ro.soc.model``, ``ro.board.platform``, ``ro.hardware``) first, then the
    device tree's ``compatible`` list, whose last entry names the SoC (``brcm,bcm2711``), then the
    ``Hardware`` line of /proc/cpuinfo. ``soc_name`` is the marketing name where
    :mod:`aiot.host.transports.socs` knows any of these names (``SM8550`` → Snapdragon 8 Gen 2), else None.
    """
    maker = props.get("ro.soc.manufacturer")
    entries = [c.strip() for c in compatible if c.strip()]
    keys = ("ro.soc.model", "ro.board.platform", "ro.hardware")
    known = lookup(*(props.get(k) for k in keys), *reversed(entries), hardware)
    name = {"soc_name": known.name if known else None}
    for key in keys:
        if props.get(key):
            return {"soc": props[key], "soc_manufacturer": maker, **name}
    if entries:
        vendor, _, soc = entries[-1].rpartition(",")
        return {"soc": soc, "soc_manufacturer": maker or vendor or None, **name}
    return {"soc": hardware or None, "soc_manufacturer": maker, **name}


def android_facts(props: dict[str, str]) -> dict:
    """Model, maker, ABI and Android version from properties; only the keys that are set."""
    release, sdk = props.get("ro.build.version.release"), props.get("ro.build.version.sdk", "")
    facts = {
        "model": props.get("ro.product.model"),
        "manufacturer": props.get("ro.product.manufacturer"),
        "abi": props.get("ro.product.cpu.abi"),
        "android_version": release,
        "android_sdk": _to_int(sdk),
        "distribution": f"Android {release}" if release else None,
    }
    return {k: v for k, v in facts.items() if v is not None}


def parse_cpu_list(text: str) -> int | None:
    """How many CPUs a kernel CPU list names (``0-3,6`` → 5), or None when it is not one."""
    count = 0
    for part in text.strip().split(","):
        low, dash, high = part.partition("-")
        if not low.strip().isdigit() or (dash and not high.strip().isdigit()):
            return None
        count += int(high) - int(low) + 1 if dash else 1
    return count or None


def parse_probe(text: str) -> dict:
    """Facts from the probe script's output; pure, so recorded outputs make the tests."""
    sec = _sections(text)
    uname = (sec.get("uname") or [""])[0].split()
    cpu = parse_cpuinfo(sec.get("cpuinfo", []))
    clusters = parse_clusters(sec.get("cpufreq", []))
    board = " ".join(sec.get("devicetree", [])).strip() or None
    props = parse_getprop(sec.get("getprop", []))
    facts = {
        "os": uname[0] if uname else None,
        "kernel": uname[1] if len(uname) > 1 else None,
        "abi": uname[2] if len(uname) > 2 else None,
        "distribution": parse_os_release(sec.get("os", [])),
        "cpu_model": cpu["cpu_model"],
        "board": board,
        "model": board,
        "manufacturer": None,
        **detect_soc(props, sec.get("compatible", []), cpu["hardware"]),
        "cores": sum(len(c["cores"]) for c in clusters) or cpu["processors"],
        "clusters": clusters,
        # Online now: a phone parks cores (hotplug), and a thread count above them oversubscribes.
        "online_cores": parse_cpu_list(" ".join(sec.get("online", []))),
        **parse_meminfo(sec.get("meminfo", [])),
        "thermal_zones": parse_thermal(sec.get("thermal", [])),
        "power_supplies": parse_power_supplies(sec.get("power", [])),
        "android_version": None,
        "android_sdk": None,
    }
    facts.update(android_facts(props))
    if props:
        facts["android_props"] = props
    return facts


def probe_linux(transport: Transport) -> dict:
    """Hardware and OS facts of a Linux or Android device, from one shell round trip."""
    result = transport.shell(["sh", "-c", _PROBE_SCRIPT], timeout=30)
    return parse_probe(result.stdout)


@dataclass(frozen=True)
class DeviceFacts:
    """The facts of a device that decide how many threads a run may use, read once from its
    probed ``device_info`` (as :func:`parse_probe` makes it and records store it): the one
    answer to "threads against cores" for the campaign's skip, preflight's warning and the
    validity verdict.

    Attributes:
        cores: every core the device has (hotplugged ones too).
        online_cores: the cores online when it was probed (a phone parks some), or None.
    """

    cores: int | None
    online_cores: int | None

    @classmethod
    def of(cls, device_info: dict | None) -> DeviceFacts:
        """The facts of a probed ``device_info`` (missing or malformed counts: None)."""
        info = device_info or {}

        def count(key: str) -> int | None:
            value = info.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
                else None

        return cls(count("cores"), count("online_cores"))

    def usable_cpus(self, cpus: list[int] | None = None) -> int | None:
        """The CPUs a run may use: those it is pinned to (its ``--cluster``), else the cores
        online, else every core; None when the device did not say."""
        if cpus:
            return len(cpus)
        return self.online_cores or self.cores

    def lacks_cores_for(self, threads: int) -> bool:
        """Whether the device has fewer cores in all than ``threads`` (such a run is skipped,
        not measured); False when it did not say."""
        return self.cores is not None and self.cores < threads


def emulated(device_info: dict) -> bool:
    """Whether the device is one of aiot's emulated devices."""
    labels = device_info.get("labels") or {}
    props = device_info.get("android_props") or {}
    return bool(labels.get("emulated")) or props.get("ro.aiot.emulated") == "1"
