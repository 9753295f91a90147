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
