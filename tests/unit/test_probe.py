from aiot.host.probe import parse_clusters, parse_cpuinfo, parse_meminfo, parse_os_release

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
    assert parse_cpuinfo(ARM_CPUINFO) == {"cpu_model": "Qualcomm Technologies, Inc SM8250", "processors": 2}
    assert parse_cpuinfo(X86_CPUINFO) == {"cpu_model": "AMD EPYC 7B13", "processors": 2}
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
