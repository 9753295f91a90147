"""AdbTransport through the real adb server to aiot's emulated ADB device, and the CLI on top.

The adb server is Debian's (or the one adbutils bundles) on a private port (see conftest);
nothing here talks to the fake adbd directly.
"""

import hashlib
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import fast

pytest.importorskip("adbutils")
if not shutil.which("adb"):
    pytest.skip("the adb client/server is not installed (apt-get install adb)", allow_module_level=True)

from aiot.core.errors import TransportError  # noqa: E402
from aiot.host.devices.agent_client import AgentSession  # noqa: E402
from aiot.host.devices.deploy import push_file  # noqa: E402
from aiot.host.emulator.adb import launch_adbd, start_adb_device  # noqa: E402
from aiot.host.transports.adb import AdbTransport, device_states, forget_tcp  # noqa: E402

FAST = fast(5, cooldown=False)


def _stop(proc, entry):
    proc.kill()
    proc.wait(5)
    forget_tcp(entry.serial)


@pytest.fixture
def adb(adbd):
    transport = AdbTransport(adbd)
    yield transport
    transport.close()


def _adb_cli(*args: str) -> subprocess.CompletedProcess:
    """The plain adb client, as a user would type it (same private server port)."""
    return subprocess.run(["adb", *args], capture_output=True, text=True, timeout=30)


def test_device_is_online_through_the_real_server(adbd):
    assert device_states()[adbd.serial] == "device"  # adb's own word for online
    listing = _adb_cli("devices", "-l").stdout
    assert adbd.serial in listing and "model:aiot_adbd_emu_test" in listing


def test_push_to_unwritable_place_fails_cleanly(adb, tmp_path):
    src = tmp_path / "f"
    src.write_bytes(b"x")
    blocker = f"{adb.workdir()}/a-file"
    adb.push(src, blocker)
    with pytest.raises(TransportError, match="push of"):
        adb.push(src, f"{blocker}/below/f")  # a parent that is a file
    assert adb.shell(["true"]).ok  # the sync stream failed, not the device


def test_second_push_sends_nothing_and_plain_adb_sees_it(adb, tmp_path):
    src = tmp_path / "model.onnx"
    src.write_bytes(b"m" * 1000)
    first, second = push_file(adb, src), push_file(adb, src)
    assert first.sent and not second.sent
    folder = first.remote.rsplit("/", 1)[0]
    assert _adb_cli("-s", adb.serial, "shell", "ls", folder).stdout.split() == ["model.onnx"]
    digest = _adb_cli("-s", adb.serial, "shell", "sha256sum", first.remote).stdout.split()[0]
    assert digest == hashlib.sha256(src.read_bytes()).hexdigest()


def test_probe_over_adb(adb):
    info = adb.info()
    assert info["transport"] == "adb" and info["cores"] >= 1 and info["serial"] == adb.serial
    assert "shell_v2" in info["adb_features"] and info["labels"]["emulated"] == "adb"
    assert adb.shell(["getprop", "ro.product.model"]).stdout.strip() == "aiot-adbd emu-test"


def test_old_device_without_shell_v2(tmp_path):
    proc, _, entry = start_adb_device("old", tmp_path, shell_v2=False)
    try:
        old = AdbTransport(entry)
        res = old.shell(["sh", "-c", "echo out; echo err >&2; exit 4"])
        assert res.exit_code == 4 and res.stdout == "out\nerr\n"  # v1 merges the streams
        lines = []
        assert old.shell(["printf", "a\\nb"], on_line=lines.append).ok and lines == ["a", "b"]
        # No stream without shell v2: the agent runs one process per command instead.
        artifact = tmp_path / "null.json"
        artifact.write_text(json.dumps({"format": "aiot-null", "sleep_ms": 0, "input_shape": [1, 2],
                                        "outputs": 2}))
        with AgentSession(old) as agent:
            spec = {"v": 1, "backend": "null", "artifact": push_file(old, artifact).remote, "threads": 1,
                    "warmup_runs": 0, "warmup_min_s": 0, "min_runs": 2, "min_s": 0}
            assert agent.run(spec, timeout=120)["backend"] == "null"
            assert agent.control("null") is None and agent.process_kind("null") == "one-shot"
    finally:
        _stop(proc, entry)


def test_rsa_auth_accepts_the_hosts_key_and_refuses_others(tmp_path):
    host_key = Path.home() / ".android" / "adbkey.pub"
    if not host_key.exists():
        pytest.skip("the adb server did not write ~/.android/adbkey.pub")
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    proc, _, entry = start_adb_device("secure", good, auth_keys=host_key)
    try:
        assert AdbTransport(entry).shell(["true"]).ok
    finally:
        _stop(proc, entry)
    (tmp_path / "no-keys").write_text("")
    proc, _, entry = start_adb_device("locked", bad, auth_keys=tmp_path / "no-keys")
    try:
        assert device_states()[entry.serial] == "unauthorized"
        with pytest.raises(TransportError, match="not authorized") as info:
            AdbTransport(entry).shell(["true"])
        assert "Allow USB debugging" in info.value.hint
    finally:
        _stop(proc, entry)


def test_device_lost_then_back_reconnects_on_its_own(tmp_path):
    proc, port, entry = start_adb_device("flaky", tmp_path)
    transport = AdbTransport(entry)
    assert transport.shell(["true"]).ok
    proc.kill()
    proc.wait(5)
    started = time.monotonic()
    with pytest.raises(TransportError):
        transport.shell(["true"])
    assert time.monotonic() - started < 15
    proc = launch_adbd(tmp_path, port)  # the device comes back on the same address
    try:
        assert transport.shell(["echo", "back"]).stdout == "back\n"
    finally:
        _stop(proc, entry)


def test_cli_emulator_sweep_and_stop(cli):
    started = cli.json("emulator", "start", "adb", "--name", "phone1")
    assert started["kind"] == "adb"
    rows = {r["name"]: r for r in cli.json("devices", "list")}
    assert rows["phone1"]["state"] == "online" and rows["phone1"]["transport"] == "adb"
    records = cli.json("sweep", "--device", "phone1", "--model", "tiny_cnn", "--format", "tflite,onnx",
                       "--threads", "1,2", *FAST)
    assert len(records) == 4 and all(r["status"] == "ok" for r in records)
    assert {r["provenance"]["agent_process"] for r in records} == {"session-fork"}
    device = records[0]["provenance"]["device"]
    assert device["transport"] == "adb" and device["serial"] == rows["phone1"]["address"]
    cli("emulator", "stop", "phone1")
    assert "phone1" not in {r["name"] for r in cli.json("devices", "list")}
    assert rows["phone1"]["address"] not in device_states()  # the server no longer retries it


def test_cli_device_lost_mid_run_is_recorded(cli, monkeypatch):
    from aiot.host.cli import progress
    from aiot.host.emulator.state import load_all

    cli.json("emulator", "start", "adb", "--name", "yanked")

    def pull_the_cable(self, request, stage):
        if stage == "measure":
            for state in load_all():
                state.terminate()

    monkeypatch.setattr(progress.RichRunListener, "on_stage", pull_the_cable)
    started = time.monotonic()
    result = cli("run", "--device", "yanked", "--model", "tiny_cnn", "--format", "onnx", *FAST, code=1)
    assert time.monotonic() - started < 60 and "failed" in result.stderr
    # A lost link is transient: the run was retried with backoff, every attempt recorded.
    records = cli.json("results", "list")
    assert [r["provenance"]["sweep"]["attempt"] for r in records] == [1, 2, 3]
    assert all(r["status"] == "failed" for r in records), [r["reason"] for r in records]
    assert "127.0.0.1" in records[-1]["reason"] or "yanked" in records[-1]["reason"]
    cli("emulator", "stop", "yanked")


def test_cli_hung_agent_is_killed_at_the_timeout(cli):
    cli.json("emulator", "start", "adb", "--name", "slow")
    result = cli("run", "--device", "slow", "--model", "tiny_cnn", "--format", "onnx", "--min-runs", "1",
                 "--min-s", "60", "--max-s", "60", "--warmup-min-s", "0", "--timeout", "3", code=1)
    assert "timed out" in result.stderr
    (record,) = cli.json("results", "list")
    assert record["status"] == "failed" and "timed out" in record["reason"]
    cli("emulator", "stop", "slow")
