"""The emulated Android phone's pieces that need no phone: its CPUs, sysfs, properties,
the binfmt entry, and how its adbd maps device paths into the phone's root."""

from __future__ import annotations

import pytest

from aiot.core.errors import UsageError
from aiot.host.emulator import android
from aiot.host.emulator.adbd import DeviceConfig
from aiot.host.transports.probe import parse_clusters, parse_cpuinfo
from aiot.host.transports.socs import lookup


def test_default_phone_is_a_snapdragon_8_gen_2():
    soc = android.phone_soc(android.DEFAULT_PROPS)
    assert soc.name == "Snapdragon 8 Gen 2" and soc.cores == 8


def test_cpuinfo_describes_the_socs_cores():
    text = android.cpuinfo_text(lookup("mt6983"))
    facts = parse_cpuinfo(text.splitlines())
    assert facts["processors"] == 8
    parts = [line.split(":")[1].strip() for line in text.splitlines() if line.startswith("CPU part")]
    assert parts == ["0xd46"] * 4 + ["0xd47"] * 3 + ["0xd48"]  # A510, A710, X2


def test_sysfs_gives_clusters_with_their_clocks(tmp_path):
    android.write_sysfs(tmp_path, lookup("SM8550"))
    cpu = tmp_path / "devices" / "system" / "cpu"
    assert (cpu / "possible").read_text() == "0-7\n"
    lines = [f"{n} {(cpu / f'cpu{n}' / 'cpufreq' / 'cpuinfo_max_freq').read_text().strip()} 300000 -"
             for n in range(8)]
    clusters = parse_clusters(lines)
    assert sorted(c["max_khz"] for c in clusters) == [2016000, 2803000, 3187000]
    battery = tmp_path / "class" / "power_supply" / "battery"
    assert (battery / "type").read_text().strip() == "Battery"
    assert len(list((tmp_path / "class" / "thermal").iterdir())) == 5


def test_unknown_soc_gets_a_generic_cpu():
    soc = android.phone_soc({"ro.hardware": "somethingnew"})
    assert soc.cores == 8 and soc.clusters == ((8, "Cortex-A76", 2400),)


def test_props_file_errors_are_one_line(tmp_path):
    with pytest.raises(UsageError, match="cannot read --props"):
        android.read_props_file(tmp_path / "missing.txt")
    (tmp_path / "empty.txt").write_text("ro.soc.model=SM8550\n")  # build.prop style, not getprop's
    with pytest.raises(UsageError, match="no '\\[key\\]: \\[value\\]' lines"):
        android.read_props_file(tmp_path / "empty.txt")
    (tmp_path / "ok.txt").write_text("[ro.soc.model]: [SM8550]\n")
    assert android.read_props_file(tmp_path / "ok.txt") == {"ro.soc.model": "SM8550"}


def test_binfmt_entry_matches_aarch64_elf_and_keeps_argv0():
    entry = android.binfmt_entry()
    name, kind, _offset, magic, mask, interpreter, flags = entry.strip().strip(":").split(":")
    assert (name, kind, flags) == ("aiot-aarch64", "M", "FP")
    assert magic.startswith(r"\x7fELF\x02") and magic.endswith(r"\xb7\x00")  # 64-bit, e_machine 183
    def raw(text: str) -> bytes:
        return text.encode().decode("unicode_escape").encode("latin-1")

    assert len(raw(magic)) == len(raw(mask)) == 20 and interpreter.endswith("qemu-aarch64-static")


def test_phone_paths_stay_inside_its_root(tmp_path):
    phone = DeviceConfig({}, None, None, root=str(tmp_path), enter="enter.sh")
    assert phone.host_path("/data/local/tmp/aiot/a") == str(tmp_path / "data/local/tmp/aiot/a")
    assert phone.host_path("/../../etc/passwd") == str(tmp_path / "etc/passwd")
    assert phone.host_path("/data/x.tflite,33188", with_mode=True) == f"{tmp_path}/data/x.tflite,33188"
    board = DeviceConfig({}, None, None)
    assert board.host_path("/etc/passwd") == "/etc/passwd"


def test_phone_shell_environment_is_androids_not_the_hosts():
    phone = DeviceConfig({}, None, None, root="/r", enter="/r/../enter.sh")
    assert phone.shell_env() == {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}  # for enter.sh alone
    assert android.SHELL_ENV["TMPDIR"] == "/data/local/tmp" and "/system/bin" in android.SHELL_ENV["PATH"]
