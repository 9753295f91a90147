"""SshTransport against a real OpenSSH sshd (the emulated SSH device), and the CLI on top."""

import hashlib
import subprocess
from dataclasses import replace

import pytest

from aiot.core.errors import TransportError
from aiot.host.devices.deploy import push_file
from aiot.host.emulator.ssh import start_sshd
from aiot.host.transports.ssh import SshTransport
from tests.helpers import fast

FAST = fast(5, cooldown=False)


@pytest.fixture
def ssh(sshd):
    transport = SshTransport(sshd)
    yield transport
    transport.close()


def test_second_push_sends_nothing_and_plain_ssh_sees_it(ssh, sshd, tmp_path):
    src = tmp_path / "model.onnx"
    src.write_bytes(b"m" * 1000)
    first, second = push_file(ssh, src), push_file(ssh, src)
    assert first.sent and not second.sent
    listing = subprocess.run(
        ["ssh", "-i", sshd.key, "-p", str(sshd.port), "-o", f"UserKnownHostsFile={sshd.known_hosts}",
         "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", f"{sshd.user}@127.0.0.1",
         f"sha256sum '{first.remote}'"], capture_output=True, text=True, check=True, timeout=30)
    assert listing.stdout.split()[0] == hashlib.sha256(src.read_bytes()).hexdigest()


def test_probe_over_ssh(ssh):
    info = ssh.info()
    assert info["transport"] == "ssh" and info["cores"] >= 1 and info["labels"]["emulated"] == "ssh"


def test_unknown_host_key_is_refused_until_trusted(sshd, tmp_path):
    from aiot.host.transports.ssh import fetch_host_key, trust_host_key

    entry = replace(sshd, known_hosts=str(tmp_path / "empty_known_hosts"))
    with pytest.raises(TransportError, match="is unknown") as info:
        SshTransport(entry).shell(["true"])
    assert "aiot devices trust" in info.value.hint
    assert trust_host_key(entry, fetch_host_key(entry))
    assert SshTransport(entry).shell(["true"]).ok


def test_changed_host_key_is_refused(sshd, tmp_path):
    import paramiko

    entry = replace(sshd, known_hosts=str(tmp_path / "known_hosts"))
    other = paramiko.Ed25519Key.from_private_key_file(sshd.key)  # some other ed25519 key
    hosts = paramiko.HostKeys()
    hosts.add(f"[127.0.0.1]:{sshd.port}", other.get_name(), other)
    hosts.save(entry.known_hosts)
    with pytest.raises(TransportError, match="CHANGED"):
        SshTransport(entry).shell(["true"])


def test_refused_key(sshd):
    from pathlib import Path

    wrong = Path(sshd.key).with_name("host_key")  # a valid ed25519 key that is not authorized
    with pytest.raises(TransportError, match="refused the SSH key"):
        SshTransport(replace(sshd, key=str(wrong))).shell(["true"])


def test_unreachable_device(sshd):
    from aiot.host.emulator.ssh import free_port

    with pytest.raises(TransportError, match="cannot reach"):
        SshTransport(replace(sshd, port=free_port())).shell(["true"])


def test_cli_emulator_sweep_and_stop(cli):
    started = cli.json("emulator", "start", "ssh", "--name", "board1")
    assert started["name"] == "board1"
    rows = {r["name"]: r for r in cli.json("devices", "list")}
    assert rows["board1"]["state"] == "online" and rows["board1"]["transport"] == "ssh"
    records = cli.json("sweep", "--device", "board1", "--model", "tiny_cnn", "--format", "tflite,onnx",
                       "--threads", "1,2", *FAST)
    assert len(records) == 4 and all(r["status"] == "ok" for r in records)
    assert records[0]["provenance"]["device"]["transport"] == "ssh"
    assert cli.json("emulator", "list")[0]["state"] == "running"
    cli("emulator", "stop", "board1")
    assert cli.json("emulator", "list") == [] and "board1" not in {r["name"] for r in cli.json("devices", "list")}


def test_device_lost_mid_run_is_recorded(cli, monkeypatch):
    from aiot.host.cli import progress
    from aiot.host.emulator.state import load_all

    cli.json("emulator", "start", "ssh", "--name", "flaky")

    def kill_device(self, request, stage):
        if stage == "measure":
            for state in load_all():
                state.terminate()

    monkeypatch.setattr(progress.RichRunListener, "on_stage", kill_device)
    result = cli("run", "--device", "flaky", "--model", "tiny_cnn", "--format", "onnx", *FAST, code=1)
    assert "failed" in result.stderr
    # A lost link is transient: the run was retried with backoff, every attempt recorded.
    records = cli.json("results", "list")
    assert [r["provenance"]["sweep"]["attempt"] for r in records] == [1, 2, 3]
    assert all(r["status"] == "failed" and "flaky" in r["reason"] for r in records)
    cli("emulator", "stop", "flaky")


def test_devices_add_trust_remove_cli(cli, sshd):
    cli("devices", "add", "lab-pi", "--transport", "ssh", "--host", "127.0.0.1", "--port", str(sshd.port),
        "--user", sshd.user, "--key", sshd.key, "--workdir", sshd.workdir, "--label", "soc=BCM2711")
    err = cli("devices", "info", "lab-pi", code=1).stderr
    assert "is unknown" in err and "aiot devices trust lab-pi" in err
    assert "trusted" in cli("devices", "trust", "lab-pi", "--yes").stderr
    assert cli.json("devices", "info", "lab-pi")["labels"] == {"soc": "BCM2711"}
    cli("devices", "remove", "lab-pi")
    assert "unknown device 'lab-pi'" in cli("devices", "info", "lab-pi", code=2).stderr


def test_file_calls_after_the_device_vanished_raise_transport_errors(tmp_path):
    import os
    import signal

    from aiot.host.emulator.state import descendants

    proc, _, entry = start_sshd("gone", tmp_path)
    ssh = SshTransport(entry)
    assert ssh.exists(entry.workdir)  # an SFTP session is open now
    for pid in [proc.pid, *descendants(proc.pid)]:
        os.kill(pid, signal.SIGKILL)
    proc.wait(5)
    for call in (lambda: ssh.stat(entry.workdir), lambda: ssh.pull(entry.workdir + "/x", tmp_path / "x")):
        with pytest.raises(TransportError, match="gone"):
            call()
