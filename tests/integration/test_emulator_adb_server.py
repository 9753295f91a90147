"""``aiot emulator stop`` stops the adb server that ``emulator start`` started for it, once no
other emulator or device uses it; a server the user started is left alone. Each test runs
its own real adb server on a free port."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("adbutils")
if not shutil.which("adb"):
    pytest.skip("the adb client/server is not installed (apt-get install adb)",
                allow_module_level=True)

from aiot.host.emulator.ssh import free_port  # noqa: E402
from aiot.host.transports.adb import client, ensure_server, server_running  # noqa: E402


@pytest.fixture
def own_server_port(monkeypatch):
    """A fresh adb server port: no server runs there yet; whatever runs at the end is killed."""
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", str(free_port()))
    assert not server_running()
    yield
    if server_running():
        client().server_kill()


def test_the_last_emulator_stops_the_server_it_started(cli, own_server_port):
    cli.json("emulator", "start", "adb", "--name", "one")
    assert server_running()
    cli.json("emulator", "start", "adb", "--name", "two")
    first = cli("emulator", "stop", "one")
    assert first.stderr.strip() == "stopped one" and server_running()  # "two" still uses it
    last = cli("emulator", "stop", "two")
    assert "and the adb server aiot started for it" in last.stderr
    assert not server_running()


def test_a_server_the_user_started_is_left_running(cli, own_server_port):
    ensure_server()  # as `adb start-server` would
    cli.json("emulator", "start", "adb", "--name", "solo")
    assert cli("emulator", "stop", "solo").stderr.strip() == "stopped solo"
    assert server_running()
