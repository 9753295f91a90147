"""Probe a Linux-like device (this machine, a board, a phone) through any Transport.

One shell round trip prints sections of kernel files; parsing happens here on the host,
so the same code serves local, SSH and ADB devices.
"""

from __future__ import annotations

import re

from aiot.host.transports.base import Transport

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
"""


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
    """CPU model name (x86 ``model name``, ARM ``Hardware``/``CPU part``) and processor count."""
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
    return {"cpu_model": model or "unknown", "processors": processors}


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


def probe_linux(transport: Transport) -> dict:
    """Hardware and OS facts of a Linux or Android device, from one shell round trip."""
    result = transport.shell(["sh", "-c", _PROBE_SCRIPT], timeout=30)
    sec = _sections(result.stdout)
    uname = (sec.get("uname") or [""])[0].split()
    cpu = parse_cpuinfo(sec.get("cpuinfo", []))
    clusters = parse_clusters(sec.get("cpufreq", []))
    cores = sum(len(c["cores"]) for c in clusters) or cpu["processors"]
    board = " ".join(sec.get("devicetree", [])).strip() or None
    return {
        "os": uname[0] if uname else None,
        "kernel": uname[1] if len(uname) > 1 else None,
        "abi": uname[2] if len(uname) > 2 else None,
        "distribution": parse_os_release(sec.get("os", [])),
        "cpu_model": cpu["cpu_model"],
        "board": board,
        "cores": cores,
        "clusters": clusters,
        **parse_meminfo(sec.get("meminfo", [])),
    }
