import pytest

from aiot.host.transports.probe import (
    detect_soc,
    kernel_celsius,
    parse_clusters,
    parse_cpuinfo,
    parse_getprop,
    parse_meminfo,
    parse_os_release,
    parse_power_supplies,
    parse_probe,
    parse_thermal,
)

ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 38.40
CPU implementer\t: 0x41
CPU part\t: 0xd05
processor\t: 1
CPU part\t: 0xd05
Hardware\t: Qualcomm Technologies, Inc SM8250
""".splitlines()

X86_CPUINFO = """processor\t: 0
model name\t: AMD EPYC 7B13
processor\t: 1
model name\t: AMD EPYC 7B13
""".splitlines()


def test_cpuinfo_arm_and_x86():
    soc = "Qualcomm Technologies, Inc SM8250"
    assert parse_cpuinfo(ARM_CPUINFO) == {"cpu_model": soc, "processors": 2, "hardware": soc}
    assert parse_cpuinfo(X86_CPUINFO) == {"cpu_model": "AMD EPYC 7B13", "processors": 2, "hardware": None}
    only_part = [line for line in ARM_CPUINFO if not line.startswith("Hardware")]
    assert parse_cpuinfo(only_part)["cpu_model"] == "ARM part 0xd05 (implementer 0x41)"


def test_clusters_from_cpufreq_snapdragon_865_layout():
    lines = [f"{i} 1804800 300000 1000000" for i in range(4)]
    lines += [f"{i} 2419200 710400 1200000" for i in range(4, 7)]
    lines += ["7 2841600 844800 2000000"]
    clusters = parse_clusters(lines)
    assert [c["name"] for c in clusters] == ["prime", "big", "little"]
    assert [c["cores"] for c in clusters] == [[7], [4, 5, 6], [0, 1, 2, 3]]
    assert clusters[0]["max_khz"] == 2841600 and clusters[2]["min_khz"] == 300000


def test_clusters_without_cpufreq_are_one_group():
    clusters = parse_clusters(["0 - - -", "1 - - -"])
    assert clusters == [{"cores": [0, 1], "max_khz": None, "min_khz": None, "name": "all"}]


def test_meminfo_and_os_release():
    assert parse_meminfo(["MemTotal:       24683520 kB", "MemAvailable:   1048576 kB"]) == {
        "mem_total_mib": 24105, "mem_available_mib": 1024}
    assert parse_os_release(['NAME="Debian"', 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"']) == \
        "Debian GNU/Linux 12 (bookworm)"


# --- Recorded probe outputs: a Pixel-like phone, a Raspberry Pi 4, an x86 VM -----------------

PIXEL_GETPROP = """[ro.product.model]: [Pixel 7]
[ro.product.manufacturer]: [Google]
[ro.board.platform]: [gs201]
[ro.soc.manufacturer]: [Google]
[ro.soc.model]: [GS201]
[ro.hardware]: [panther]
[ro.product.cpu.abi]: [arm64-v8a]
[ro.build.version.release]: [14]
[ro.build.version.sdk]: [34]"""

PIXEL_PROBE = f"""@@uname
Linux 5.10.177-android13-4-00003-g5ae1a4a4a2c6-ab10871213 aarch64
@@cpuinfo
processor\t: 0
CPU implementer\t: 0x41
CPU part\t: 0xd05
processor\t: 1
CPU part\t: 0xd44
@@meminfo
MemTotal:        7869024 kB
MemAvailable:    2621440 kB
@@os
@@cpufreq
0 1803000 300000 1197000
1 2850000 500000 2850000
@@devicetree

@@compatible
@@thermal
thermal_zone1\tMID\t41250
thermal_zone0\tBIG\t43500
thermal_zone10\tbattery\t31000
@@power
battery\tBattery\t85\tDischarging\t312
usb\tUSB\t\t\t
@@getprop
{PIXEL_GETPROP}
"""

PI4_PROBE = """@@uname
Linux 6.1.0-rpi7-rpi-v8 aarch64
@@cpuinfo
processor\t: 0
BogoMIPS\t: 108.00
CPU implementer\t: 0x41
CPU part\t: 0xd08
processor\t: 1
CPU part\t: 0xd08
Revision\t: c03114
Model\t\t: Raspberry Pi 4 Model B Rev 1.4
@@meminfo
MemTotal:        3880000 kB
MemAvailable:    3400000 kB
@@os
PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
@@cpufreq
0 1800000 600000 600000
1 1800000 600000 600000
@@devicetree
Raspberry Pi 4 Model B Rev 1.4
@@compatible
raspberrypi,4-model-b
brcm,bcm2711
@@thermal
thermal_zone0\tcpu-thermal\t48686
@@power
@@getprop
"""

VM_PROBE = """@@uname
Linux 6.8.0-45-generic x86_64
@@cpuinfo
processor\t: 0
model name\t: AMD EPYC 7B13
@@meminfo
MemTotal:        4000000 kB
@@os
PRETTY_NAME="Ubuntu 24.04.1 LTS"
@@cpufreq
0 - - -
@@devicetree

@@compatible
@@thermal
@@power
@@getprop
"""


def test_getprop_lines_and_empty_values():
    props = parse_getprop(PIXEL_GETPROP.splitlines())
    assert props["ro.product.model"] == "Pixel 7" and props["ro.build.version.sdk"] == "34"
    assert parse_getprop(["[ro.soc.model]: []", "garbage", ""]) == {}  # unset properties print as []
    assert parse_getprop(["[persist.sys.locale]: [en-US]"]) == {"persist.sys.locale": "en-US"}


def test_thermal_zones_in_order_and_units():
    zones = parse_thermal(["thermal_zone10\tbattery\t31000", "thermal_zone2\tgpu\t45",
                           "thermal_zone1\tcpu\t", "bad line"])
    assert [z["zone"] for z in zones] == ["thermal_zone1", "thermal_zone2", "thermal_zone10"]
    assert [z["temp_c"] for z in zones] == [None, 45.0, 31.0]
    assert kernel_celsius("48686") == 48.7 and kernel_celsius("-5000") == -5.0
    assert kernel_celsius("52") == 52.0 and kernel_celsius("n/a") is None


def test_power_supplies_tenths_of_degrees_and_missing_fields():
    battery, usb = parse_power_supplies(["battery\tBattery\t85\tDischarging\t312", "usb\tUSB\t\t\t"])
    assert battery == {"name": "battery", "type": "Battery", "capacity_pct": 85,
                       "status": "Discharging", "temp_c": 31.2}
    assert usb == {"name": "usb", "type": "USB", "capacity_pct": None, "status": None, "temp_c": None}


def test_soc_detection_order():
    props = parse_getprop(PIXEL_GETPROP.splitlines())
    compatible = ["raspberrypi,4-model-b", "brcm,bcm2711"]
    assert detect_soc(props, compatible, "BCM2835") == {
        "soc": "GS201", "soc_manufacturer": "Google", "soc_name": "Google Tensor G2"}
    platform_only = {"ro.board.platform": "kona", "ro.hardware": "qcom"}
    assert detect_soc(platform_only, compatible, None)["soc"] == "kona"
    assert detect_soc({"ro.hardware": "qcom"}, [], None)["soc"] == "qcom"
    assert detect_soc({}, compatible, "BCM2835") == {
        "soc": "bcm2711", "soc_manufacturer": "brcm", "soc_name": "BCM2711 (Raspberry Pi 4)"}
    assert detect_soc({}, [], "BCM2835") == {"soc": "BCM2835", "soc_manufacturer": None, "soc_name": None}
    assert detect_soc({}, [], None) == {"soc": None, "soc_manufacturer": None, "soc_name": None}


@pytest.mark.parametrize(("props", "name"), [
    ({"ro.soc.manufacturer": "QTI", "ro.soc.model": "SM8550", "ro.board.platform": "kalama"},
     "Snapdragon 8 Gen 2"),
    ({"ro.board.platform": "kona", "ro.hardware": "qcom"}, "Snapdragon 865"),  # Android < 12
    ({"ro.soc.manufacturer": "Mediatek", "ro.soc.model": "MT6983", "ro.hardware": "mt6983"},
     "Dimensity 9000"),
    ({"ro.board.platform": "kirin9000", "ro.hardware": "kirin9000"}, "Kirin 9000"),
    ({"ro.hardware": "qcom"}, None),  # a maker's generic name says nothing
])
def test_marketing_names_from_getprop(props, name):
    assert detect_soc(props, [], None)["soc_name"] == name


def test_soc_table_is_consistent():
    from aiot.host.transports.socs import ARM_PARTS, SOCS

    codes = [code for soc in SOCS for code in soc.codes]
    assert len(codes) == len(set(codes)) and all(code == code.lower() for code in codes)
    for soc in SOCS:
        assert all(core in ARM_PARTS for _, core, _ in soc.clusters), soc.name
        clocks = [mhz for _, _, mhz in soc.clusters]
        assert clocks == sorted(clocks), f"{soc.name}: clusters smallest first"


def test_android_props_win_on_a_phone():
    facts = parse_probe(PIXEL_PROBE)
    assert (facts["model"], facts["manufacturer"], facts["soc"]) == ("Pixel 7", "Google", "GS201")
    assert facts["abi"] == "arm64-v8a"  # not uname's aarch64
    assert (facts["android_version"], facts["android_sdk"], facts["distribution"]) == ("14", 34, "Android 14")
    assert [z["type"] for z in facts["thermal_zones"]] == ["BIG", "MID", "battery"]
    assert facts["power_supplies"][0]["capacity_pct"] == 85
    assert facts["android_props"]["ro.hardware"] == "panther"
    assert [c["name"] for c in facts["clusters"]] == ["big", "little"]


def test_raspberry_pi_from_device_tree():
    facts = parse_probe(PI4_PROBE)
    assert facts["board"] == facts["model"] == "Raspberry Pi 4 Model B Rev 1.4"
    assert (facts["soc"], facts["soc_manufacturer"]) == ("bcm2711", "brcm")
    assert facts["abi"] == "aarch64" and facts["android_version"] is None and "android_props" not in facts
    assert facts["thermal_zones"] == [{"zone": "thermal_zone0", "type": "cpu-thermal", "temp_c": 48.7}]
    assert facts["power_supplies"] == []


def test_x86_vm_has_empty_sections():
    facts = parse_probe(VM_PROBE)
    assert facts["cpu_model"] == "AMD EPYC 7B13" and facts["cores"] == 1
    assert facts["thermal_zones"] == [] and facts["power_supplies"] == []
    assert facts["soc"] is None and facts["model"] is None and facts["distribution"] == "Ubuntu 24.04.1 LTS"
    assert parse_probe("")["os"] is None  # a device that printed nothing


def test_probe_script_reads_sysfs_and_getprop(tmp_path, monkeypatch):
    """The shell half: the real script against a fake sysfs and a fake ``getprop`` on PATH."""
    from aiot.host.transports import probe
    from aiot.host.transports.local import LocalTransport

    zone = tmp_path / "thermal" / "thermal_zone0"
    zone.mkdir(parents=True)
    (zone / "type").write_text("cpu thermal\n")  # a space must survive the tab-separated line
    (zone / "temp").write_text("51234\n")
    bat = tmp_path / "power" / "battery"
    bat.mkdir(parents=True)
    for name, value in {"type": "Battery", "capacity": "77", "status": "Charging", "temp": "298"}.items():
        (bat / name).write_text(value + "\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    getprop = bindir / "getprop"
    getprop.write_text('#!/bin/sh\ncase "$1" in ro.product.model) echo "Pixel 7";; ro.soc.model) echo GS201;; esac\n')
    getprop.chmod(0o755)
    script = probe._PROBE_SCRIPT.replace("/sys/class/thermal", str(tmp_path / "thermal"))
    monkeypatch.setattr(probe, "_PROBE_SCRIPT", script.replace("/sys/class/power_supply", str(tmp_path / "power")))
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    facts = probe.probe_linux(LocalTransport())
    assert facts["thermal_zones"] == [{"zone": "thermal_zone0", "type": "cpu thermal", "temp_c": 51.2}]
    assert facts["power_supplies"] == [{"name": "battery", "type": "Battery", "capacity_pct": 77,
                                        "status": "Charging", "temp_c": 29.8}]
    assert (facts["model"], facts["soc"]) == ("Pixel 7", "GS201")
    assert facts["android_props"] == {"ro.product.model": "Pixel 7", "ro.soc.model": "GS201"}


def test_online_cores_come_from_the_kernels_cpu_list():
    from aiot.host.transports.probe import parse_cpu_list

    assert parse_cpu_list("0-3,6\n") == 5 and parse_cpu_list("0") == 1
    assert parse_cpu_list("") is None and parse_cpu_list("n/a") is None
    assert parse_probe("@@online\n0-1,4-7\n")["online_cores"] == 6
    assert parse_probe("")["online_cores"] is None  # a kernel without the file
