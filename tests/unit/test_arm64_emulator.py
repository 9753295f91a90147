"""The pieces of an emulated arm64 device that need no qemu: cpuinfo, wrapper, cache key, mirror."""

import subprocess

from aiot.host.emulator import arm64


def test_fake_cpuinfo_describes_aarch64_cores():
    text = arm64.cpuinfo_text(3)
    assert text.count("processor\t:") == 3
    assert "CPU implementer\t: 0x41" in text and "asimd" in text
    assert "vendor_id" not in text  # nothing x86 for pytorch/cpuinfo to trip over


def test_wrapper_quotes_paths_with_spaces_and_quotes(tmp_path, monkeypatch):
    monkeypatch.setattr(arm64.shutil, "which", lambda tool: f"/opt/q m/{tool}")
    userland = tmp_path / "it's a land"
    wrapper = arm64.write_wrapper(tmp_path / "python3", userland)
    text = wrapper.read_text()
    assert wrapper.stat().st_mode & 0o111
    # sh parses the wrapper back into exactly the intended words.
    line = text.splitlines()[-1].replace('"$@"', "")
    words = subprocess.run(["sh", "-c", f"set -- {line}; printf '%s\\n' \"$@\""], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    assert words == ["sh", str(userland / "cpuinfo"), "/opt/q m/qemu-aarch64-static", "-cpu",
                     arm64.QEMU_CPU, "-L", str(userland / "root"),
                     str(userland / "root") + arm64.GUEST_PYTHON]


def test_userland_key_follows_runtime_versions():
    assert arm64.userland_key(["numpy==2.4.6"]) == arm64.userland_key(["numpy==2.4.6"])
    assert arm64.userland_key(["numpy==2.4.6"]) != arm64.userland_key(["numpy==2.4.7"])


def test_mirror_override_wins(monkeypatch):
    monkeypatch.setenv("AIOT_DEBIAN_MIRROR", "http://mirror.example/debian")
    assert arm64.debian_mirror() == "http://mirror.example/debian"
    monkeypatch.delenv("AIOT_DEBIAN_MIRROR")
    assert arm64.debian_mirror().startswith("http")


def test_missing_tools_name_their_debian_packages(monkeypatch):
    monkeypatch.setattr(arm64.shutil, "which", lambda tool: None)
    assert arm64.missing_tools() == ["mmdebstrap", "qemu-user-static", "util-linux"]
