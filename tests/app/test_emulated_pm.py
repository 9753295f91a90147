"""The emulated phone's ``pm`` and ``am`` (host/emulator/android_apps.py) on a phone root whose
"enter" runs commands on this machine: what pm accepts and refuses, and the status lines
``am instrument`` prints for the command the app would start."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from aiot.host.app.instrument import StatusParser, encode_spec, instrument_argv
from aiot.host.transports.quoting import build_command
from tests.app.conftest import need_tools

TOOLS = ("javac", "java", "keytool", "aapt2", "zipalign", "apksigner", "dpkg-deb")


@pytest.fixture
def phone(tmp_path):
    """A phone folder: ``root/`` and an ``enter.sh`` that runs the command with this host's sh."""
    (tmp_path / "root" / "data" / "local" / "tmp").mkdir(parents=True)
    enter = tmp_path / "enter.sh"
    enter.write_text('#!/bin/sh\nexec /bin/sh -c "$1"\n')
    enter.chmod(0o755)
    return tmp_path


def _apps(phone: Path, argv: list[str]) -> subprocess.CompletedProcess:
    command = build_command(argv)
    return subprocess.run([sys.executable, "-m", "aiot.host.emulator.android_apps", "--root",
                           str(phone / "root"), "--enter", str(phone / "enter.sh"), command],
                          capture_output=True, text=True, timeout=120, check=False)


def _place(phone: Path, apk: Path, name: str) -> str:
    shutil.copyfile(apk, phone / "root" / "data" / "local" / "tmp" / name)
    return f"/data/local/tmp/{name}"


@pytest.fixture
def apk(cli, app_env) -> Path:
    need_tools(*TOOLS)
    return Path(cli.json("app", "build")["path"])


def test_pm_install_checks_the_apk(phone, apk, tmp_path, cli, monkeypatch):
    path = _place(phone, apk, "a.apk")
    assert _apps(phone, ["pm", "install", path]).stdout.strip() == "Success"
    again = _apps(phone, ["pm", "install", path])
    assert again.returncode == 1 and "INSTALL_FAILED_ALREADY_EXISTS" in again.stdout
    assert _apps(phone, ["pm", "install", "-r", path]).stdout.strip() == "Success"
    listed = _apps(phone, ["pm", "list", "instrumentation"]).stdout
    assert listed == "instrumentation:org.aiot.agent/.AgentInstrumentation (target=org.aiot.agent)\n"
    assert (phone / "root" / "data" / "app" / "org.aiot.agent" / "base.apk").is_file()

    unsigned = tmp_path / "unsigned.apk"
    with zipfile.ZipFile(apk) as src, zipfile.ZipFile(unsigned, "w") as dst:
        for item in src.infolist():
            if not item.filename.startswith("META-INF/"):
                dst.writestr(item, src.read(item))
    refused = _apps(phone, ["pm", "install", "-r", _place(phone, unsigned, "u.apk")])
    assert refused.returncode == 1 and "INSTALL_PARSE_FAILED_NO_CERTIFICATES" in refused.stdout

    monkeypatch.setenv("AIOT_CACHE_DIR", str(tmp_path / "other-cache"))  # another debug key
    other = Path(cli.json("app", "build")["path"])
    refused = _apps(phone, ["pm", "install", "-r", _place(phone, other, "o.apk")])
    assert refused.returncode == 1 and "INSTALL_FAILED_UPDATE_INCOMPATIBLE" in refused.stdout

    missing = _apps(phone, ["pm", "install", "/data/local/tmp/nothing.apk"])
    assert missing.returncode == 1 and "Unable to open file" in missing.stderr
    assert _apps(phone, ["pm", "uninstall", "org.aiot.agent"]).stdout.strip() == "Success"
    assert _apps(phone, ["pm", "list", "packages"]).stdout == ""


def test_am_instrument_prints_the_apps_status_lines(phone, apk):
    missing = _apps(phone, instrument_argv(encode_spec(["true"], {}, None, 10)))
    assert missing.returncode == 1 and missing.stdout.startswith("INSTRUMENTATION_FAILED: org.aiot.agent/")
    _apps(phone, ["pm", "install", _place(phone, apk, "a.apk")])

    long_line = "x" * 40_000
    script = f'echo \'{{"v": 1}}\'; echo "$AIOT_X"; pwd; echo {long_line}; echo oops >&2; exit 3'
    spec = encode_spec(["/bin/sh", "-c", script], {"AIOT_X": "a b"}, "/tmp", 30)
    done = _apps(phone, instrument_argv(spec))
    lines: list[str] = []
    parser = StatusParser(lines.append)
    for line in done.stdout.splitlines():
        parser.feed(line)
    assert lines == ['{"v": 1}', "a b", "/tmp", long_line]
    outcome = parser.outcome()
    assert (outcome["reason"], outcome["exit"], outcome["emulated"]) == ("exited", 3, True)
    assert outcome["stderr"].strip() == "oops" and outcome["app_version"] == "0.1.0"
    assert parser.code == -1 and done.stdout.count("aiot_more=1") == 2

    slow = encode_spec(["/bin/sh", "-c", "echo started; exec sleep 30"], {}, None, 0.5)
    parser = StatusParser(lambda line: None)
    for line in _apps(phone, instrument_argv(slow)).stdout.splitlines():
        parser.feed(line)
    assert parser.outcome()["reason"] == "timeout"

    bad = _apps(phone, ["am", "instrument", "-w", "-r", "-e", "spec", "%%%", "org.aiot.agent/.AgentInstrumentation"])
    parser = StatusParser(lambda line: None)
    for line in bad.stdout.splitlines():
        parser.feed(line)
    assert "bad or missing spec" in parser.outcome()["error"]


def test_a_phones_apk_carries_its_runtimes_loader(phone, apk, tmp_path):
    """build_for_runtime: the app plus lib/arm64-v8a/libaiot_ld_<tree>.so, signed with the same
    key, reused while nothing changed; pm install extracts it into the native-library dir."""
    import json

    from aiot.host.app.build import build_for_runtime, manifest_facts, verify_signature
    from aiot.host.app.seccomp import patch_syscalls
    from tests.unit.test_app_seccomp import SVC, elf, movz

    loader = tmp_path / "ld.so"
    loader.write_bytes(elf([movz(8, 99), SVC, movz(8, 64), SVC]))  # one set_robust_list, one write
    meta = build_for_runtime(loader, "0123456789abcdef")
    path = Path(meta["path"])
    assert meta["native_library"] == "lib/arm64-v8a/libaiot_ld_0123456789abcdef.so" and not meta["reused"]
    with zipfile.ZipFile(path) as zf:
        packed = zf.read(meta["native_library"])
    assert packed == patch_syscalls(loader.read_bytes(), "test")[0] != loader.read_bytes()  # patched
    assert meta["loader_patched_sites"] == {"set_robust_list": 1, "rseq": 0}
    with zipfile.ZipFile(path) as zf:
        assert "classes.dex" in zf.namelist()
    assert verify_signature(path) == meta["certificate_sha256"]
    facts = manifest_facts(path)
    assert facts["debuggable"] is True and facts["extract_native_libs"] is True  # run-as; extracted
    assert build_for_runtime(loader, "0123456789abcdef")["reused"] is True
    loader.write_bytes(elf([movz(8, 99), SVC, movz(8, 63), SVC]))  # another glibc build
    rebuilt = build_for_runtime(loader, "0123456789abcdef")
    assert not rebuilt["reused"] and rebuilt["sha256"] != meta["sha256"] and not path.exists()

    assert _apps(phone, ["pm", "install", _place(phone, Path(rebuilt["path"]), "r.apk")]).stdout.strip() == "Success"
    extracted = phone / "root" / "data" / "app" / "org.aiot.agent" / "lib" / "arm64" / "libaiot_ld_0123456789abcdef.so"
    assert extracted.read_bytes() == patch_syscalls(loader.read_bytes(), "test")[0] and extracted.stat().st_mode & 0o111
    assert (phone / "root" / "data" / "user" / "0" / "org.aiot.agent" / "files").is_dir()
    state = json.loads((phone / "packages.json").read_text())["org.aiot.agent"]
    assert state["native_libraries"] == ["libaiot_ld_0123456789abcdef.so"]
    # Installing the plain app (no loader) over it leaves no stale loader behind.
    assert _apps(phone, ["pm", "install", "-r", _place(phone, apk, "a.apk")]).stdout.strip() == "Success"
    assert not extracted.exists()


def test_run_as_only_for_an_installed_debuggable_app(phone, apk):
    import json

    unknown = _apps(phone, ["run-as", "org.aiot.agent", "pwd"])
    assert unknown.returncode == 1 and unknown.stderr.strip() == "run-as: unknown package: org.aiot.agent"
    _apps(phone, ["pm", "install", _place(phone, apk, "a.apk")])
    state_file = phone / "packages.json"
    state = json.loads(state_file.read_text())
    state["org.aiot.agent"]["debuggable"] = False  # as a release build would be
    state_file.write_text(json.dumps(state))
    refused = _apps(phone, ["run-as", "org.aiot.agent", "pwd"])
    assert refused.returncode == 1 and "package not debuggable: org.aiot.agent" in refused.stderr


def test_am_instrument_refuses_what_selinux_refuses_an_app(phone, apk):
    _apps(phone, ["pm", "install", _place(phone, apk, "a.apk")])
    spec = encode_spec(["/data/local/tmp/aiot/runtime/x/bin/python3", "-c", "1"], {}, None, 30)
    parser = StatusParser(lambda line: None)
    for line in _apps(phone, instrument_argv(spec)).stdout.splitlines():
        parser.feed(line)
    outcome = parser.outcome()
    assert outcome["reason"] == "start failed" and "error=13, Permission denied" in outcome["detail"]
    assert outcome["exit"] is None
