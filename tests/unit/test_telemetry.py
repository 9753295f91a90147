import json

from aiot.host.devices import telemetry
from aiot.host.devices.telemetry import (
    Telemetry,
    cpu_temperatures,
    parse_cpufreq,
    parse_telemetry,
    read_telemetry,
)
from aiot.host.transports.local import LocalTransport

# --- Recorded outputs of TELEMETRY_SCRIPT: a phone, a Raspberry Pi 4, an x86 VM ---------------

# Snapdragon-865-like: cores 0-3 little, 4-6 big, 7 prime; core 7 is capped (throttled).
PHONE = """
@@cpufreq
0 1804800 1804800
1 300000 1804800
2 300000 1804800
3 300000 1804800
4 710400 2419200
5 710400 2419200
6 710400 2419200
7 844800 1708800
@@thermal
thermal_zone0\taoss0-usr\t38100
thermal_zone1\tcpu-0-0-usr\t39400
thermal_zone2\tcpu-0-1-usr\t39800
thermal_zone3\tcpu-1-0-usr\t44600
thermal_zone4\tcpu-1-1-usr\t45100
thermal_zone5\tgpuss-0-usr\t37500
thermal_zone6\tsoc\t85
thermal_zone7\tbattery\t31000
thermal_zone8\tcpu-1-0-usr\t44900
@@power
battery\tBattery\t85\tDischarging\t312
usb\tUSB\t\t\t
"""

PI4 = """
@@cpufreq
0 600000 1800000
1 600000 1800000
2 1500000 1800000
3 600000 1800000
@@thermal
thermal_zone0\tcpu-thermal\t48686
@@power
"""

VM = """
@@cpufreq
@@thermal
@@power
"""


def test_phone_cpu_zones_frequencies_and_battery():
    t = parse_telemetry(PHONE, now=1700000000.0)
    assert t.timestamp == 1700000000.0
    # CPU zones only: not aoss, gpu, the "soc" charge-limit zone or the battery; a repeated type
    # is kept under its zone name.
    assert t.cpu_temps_c == {"cpu-0-0-usr": 39.4, "cpu-0-1-usr": 39.8, "cpu-1-0-usr": 44.6,
                             "cpu-1-1-usr": 45.1, "thermal_zone8": 44.9}
    assert t.cpu_temp_max_c == 45.1
    assert t.cpu_freq_khz[0] == 1804800 and t.cpu_freq_khz[7] == 844800 and len(t.cpu_freq_khz) == 8
    assert t.cpu_cap_khz[4] == 2419200 and t.cpu_cap_khz[7] == 1708800
    assert (t.battery_pct, t.battery_temp_c, t.battery_status) == (85, 31.2, "Discharging")


def test_pi_single_cpu_zone_and_no_battery():
    t = parse_telemetry(PI4, now=1.0)
    assert t.cpu_temps_c == {"cpu-thermal": 48.7} and t.cpu_temp_max_c == 48.7
    assert t.cpu_freq_khz == {0: 600000, 1: 600000, 2: 1500000, 3: 600000}
    assert set(t.cpu_cap_khz.values()) == {1800000}
    assert (t.battery_pct, t.battery_temp_c, t.battery_status) == (None, None, None)


def test_vm_and_empty_output_give_empty_fields():
    for text in (VM, ""):
        t = parse_telemetry(text, now=2.0)
        assert t == Telemetry(timestamp=2.0)
        assert (t.cpu_temps_c, t.cpu_temp_max_c, t.cpu_freq_khz, t.cpu_cap_khz) == ({}, None, {}, {})


def test_without_cpu_named_zones_every_zone_but_the_battery_counts():
    zones = [{"zone": "thermal_zone0", "type": "soc_dts0", "temp_c": 52.0},
             {"zone": "thermal_zone1", "type": None, "temp_c": 50.5},
             {"zone": "thermal_zone2", "type": "battery", "temp_c": 30.0},
             {"zone": "thermal_zone3", "type": "skin", "temp_c": None}]
    assert cpu_temperatures(zones) == {"soc_dts0": 52.0, "thermal_zone1": 50.5}
    tensor = [{"zone": f"thermal_zone{i}", "type": kind, "temp_c": 40.0 + i}
              for i, kind in enumerate(["BIG", "MID", "LITTLE", "G3D", "TPU"])]
    assert list(cpu_temperatures(tensor)) == ["BIG", "MID", "LITTLE"]


def test_cpufreq_lines_with_unreadable_files():
    cur, cap = parse_cpufreq(["0 1000 2000", "1 - 2000", "2 - -", "[0-9]* - -", "garbage", ""])
    assert cur == {0: 1000} and cap == {0: 2000, 1: 2000}


def test_to_dict_is_json_ready():
    d = parse_telemetry(PHONE, now=5.0).to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["cpu_freq_khz"]["7"] == 844800 and d["battery_status"] == "Discharging"


def test_script_reads_a_fake_sysfs(tmp_path, monkeypatch):
    """The shell half: the real script against fake cpufreq, thermal and power folders."""
    for n, cur in enumerate(["1200000", None]):
        freq = tmp_path / "cpu" / f"cpu{n}" / "cpufreq"
        freq.mkdir(parents=True)
        (freq / "scaling_max_freq").write_text("1800000\n")
        if cur:
            (freq / "scaling_cur_freq").write_text(cur + "\n")
    (tmp_path / "cpu" / "cpufreq").mkdir()  # not a core
    zone = tmp_path / "thermal" / "thermal_zone0"
    zone.mkdir(parents=True)
    (zone / "type").write_text("cpu thermal\n")
    (zone / "temp").write_text("51234\n")
    bat = tmp_path / "power" / "battery"
    bat.mkdir(parents=True)
    for name, value in {"type": "Battery", "capacity": "77", "status": "Charging", "temp": "298"}.items():
        (bat / name).write_text(value + "\n")
    script = telemetry.TELEMETRY_SCRIPT.replace("/sys/devices/system/cpu", str(tmp_path / "cpu"))
    script = script.replace("/sys/class/thermal", str(tmp_path / "thermal"))
    monkeypatch.setattr(telemetry, "TELEMETRY_SCRIPT", script.replace("/sys/class/power_supply",
                                                                      str(tmp_path / "power")))
    t = read_telemetry(LocalTransport())
    assert t.cpu_freq_khz == {0: 1200000} and t.cpu_cap_khz == {0: 1800000, 1: 1800000}
    assert t.cpu_temps_c == {"cpu thermal": 51.2}
    assert (t.battery_pct, t.battery_temp_c, t.battery_status) == (77, 29.8, "Charging")


def test_real_local_telemetry_reads_without_error():
    t = read_telemetry(LocalTransport())
    assert isinstance(t, Telemetry) and t.timestamp > 0
