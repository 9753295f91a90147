"""``aiot app build`` offline: the APK Android's own tools accept, with the instrumentation
declared; ``app info``; a rebuild reuses it; missing tools are one line naming the fix."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from tests.app.conftest import need_tools

TOOLS = ("javac", "java", "keytool", "aapt2", "zipalign", "apksigner", "dexdump", "dpkg-deb")


@pytest.fixture(scope="module")
def first_build(tmp_path_factory) -> dict:
    """The module's own cache (other tests build into the session's) and, once made, the
    report of its first ``app build``."""
    return {"cache": tmp_path_factory.mktemp("app-build-cache")}


@pytest.fixture
def built(cli, app_env, first_build, monkeypatch):
    """The report of the first build in the module's cache: the first test to ask builds the
    APK (javac, d8, aapt2, a new key); the others share it instead of building their own."""
    need_tools(*TOOLS)
    monkeypatch.setenv("AIOT_CACHE_DIR", str(first_build["cache"]))
    if "report" not in first_build:
        first_build["report"] = cli.json("app", "build")
    return first_build["report"]


def _run(*argv: str) -> str:
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def test_build_makes_an_apk_android_tools_accept(built, cli):
    apk = Path(built["path"])
    assert apk.is_file() and built["reused"] is False
    assert hashlib.sha256(apk.read_bytes()).hexdigest() == built["sha256"]
    assert built["size_bytes"] < 200_000  # plain Java, no libraries
    verify = _run("apksigner", "verify", "--verbose", str(apk))
    assert "Verified using v2 scheme (APK Signature Scheme v2): true" in verify
    badging = _run("aapt2", "dump", "badging", str(apk))
    assert "package: name='org.aiot.agent' versionCode='100' versionName='0.1.0'" in badging
    assert "sdkVersion:'21'" in badging and "targetSdkVersion:'29'" in badging
    manifest = _run("aapt2", "dump", "xmltree", "--file", "AndroidManifest.xml", str(apk))
    assert 'E: instrumentation' in manifest and '".AgentInstrumentation"' in manifest
    classes = _run("dexdump", str(apk))
    assert "Lorg/aiot/agent/AgentInstrumentation;" in classes
    assert "Superclass        : 'Landroid/app/Instrumentation;'" in classes
    assert "Lorg/aiot/agent/core/AgentRunner;" in classes
    _run("zipalign", "-c", "-p", "4", str(apk))

    info = cli.json("app", "info")
    assert {k: info[k] for k in ("sha256", "path", "package", "instrumentation", "version")} == {
        "sha256": built["sha256"], "path": built["path"], "package": "org.aiot.agent",
        "instrumentation": "org.aiot.agent.AgentInstrumentation", "version": "0.1.0"}
    # Outputs and the key live in the cache, never in the source tree.
    from aiot.core.paths import source_root

    assert source_root() not in apk.parents and source_root() not in Path(built["keystore"]).parents


def test_rebuild_reuses_and_force_keeps_the_key(built, cli):
    again = cli.json("app", "build")
    assert again["reused"] is True and again["sha256"] == built["sha256"]
    forced = cli.json("app", "build", "--force")
    assert forced["reused"] is False
    assert forced["certificate_sha256"] == built["certificate_sha256"]  # one key per cache


def test_info_before_any_build_says_how(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("AIOT_CACHE_DIR", str(tmp_path / "fresh-cache"))
    failed = cli("app", "info", code=2)
    assert "not built yet" in failed.stderr and "aiot app build" in failed.stderr


def test_missing_tool_is_one_line(cli, app_env, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no javac, aapt2, ... at all
    failed = cli("app", "build", code=1)
    lines = [line for line in failed.stderr.splitlines() if line.startswith(("error:", "hint:"))]
    assert len(lines) == 2 and "javac not found" in lines[0] and "bootstrap.sh" in lines[1], failed.stderr


def test_install_refuses_a_device_that_is_not_android(cli):
    failed = cli("app", "install", "local", code=2)
    assert "not an Android device" in failed.stderr


def test_unreachable_mirror_is_one_line_with_the_way_out(cli, monkeypatch, tmp_path):
    need_tools(*TOOLS, "apt-get")
    monkeypatch.setenv("AIOT_ANDROID_SDK", str(tmp_path / "no-jars"))
    monkeypatch.setenv("AIOT_DEBIAN_MIRROR", "http://127.0.0.1:9/debian")  # nothing listens there
    failed = cli("app", "build", code=1)
    lines = [line for line in failed.stderr.splitlines() if line.startswith(("error:", "hint:"))]
    assert len(lines) == 2 and "cannot reach http://127.0.0.1:9/debian" in lines[0], failed.stderr
    assert "AIOT_ANDROID_SDK" in lines[1]
    assert not list((tmp_path / "no-jars").glob("*.jar"))
