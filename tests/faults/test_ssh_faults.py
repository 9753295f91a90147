"""SSH devices set up wrong or out of reach: a garbage key file, a corrupt known_hosts line, a
closed port, a name that does not resolve, a port that is not an SSH server. Each is one line
(what, why, what to do), never a paramiko traceback, and a sweep refuses before converting.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from aiot.host.emulator.ssh import SSHD, free_port
from tests.faults.conftest import count_records, one_line_error
from tests.helpers import FAST

need_sshd = pytest.mark.skipif(not Path(SSHD).exists(), reason="OpenSSH server is not installed")


@pytest.fixture
def no_conversion(monkeypatch):
    """Fail the test if anything starts converting (device errors must come first)."""
    from aiot.converters import api
    from aiot.host.engine import executor

    def convert_model(*args, **kwargs):
        raise AssertionError("a conversion started before the device was checked")

    monkeypatch.setattr(api, "convert_model", convert_model)
    monkeypatch.setattr(executor, "convert_model", convert_model)  # a run converts through it


def _add(entry, **changes) -> None:
    """Put ``entry`` (with ``changes``) in the test's inventory, as ``devices add`` would,
    bypassing the key check of ``add`` so that a key broken later can be tested."""
    from dataclasses import replace

    from aiot.host.devices import inventory

    devices = inventory.load()
    changed = replace(entry, **changes)
    devices[changed.name] = changed
    inventory.save(devices)


def _dead_entry(name: str, host: str = "127.0.0.1", port: int | None = None):
    from aiot.host.devices.inventory import DeviceEntry

    return DeviceEntry(name=name, transport="ssh", host=host, port=port or free_port(), user="u",
                       workdir="/tmp/aiot-never-used")


def _nothing_stored(fault) -> None:
    results = Path(os.environ["AIOT_RESULTS_DIR"])
    fault.records_lost(0, count_records())
    assert count_records() == 0 and not (results / "artifacts").exists()


# -- the key file ------------------------------------------------------------------------------


@pytest.mark.fault("garbage --key on devices add")
@pytest.mark.parametrize("content", [
    "not a key\n",
    "-----BEGIN OPENSSH PRIVATE KEY-----\n!!\n-----END OPENSSH PRIVATE KEY-----\n",
    "ssh-ed25519 AAAAC3Nz a-public-key\n",
], ids=["text", "damaged-pem", "public-key"])
def test_garbage_key_on_add(cli, fault, tmp_path, content):
    key = tmp_path / "id_garbage"
    key.write_text(content)
    result = cli("devices", "add", "pi", "--transport", "ssh", "--host", "127.0.0.1", "--user", "pi",
                 "--key", str(key), code=2)
    one_line_error(result, str(key), "not a private key", code=2)
    assert not (tmp_path / "devices.toml").exists()


@pytest.mark.fault("missing --key on devices add")
def test_missing_key_on_add(cli, fault, tmp_path):
    result = cli("devices", "add", "pi", "--transport", "ssh", "--host", "127.0.0.1", "--user", "pi",
                 "--key", str(tmp_path / "nope"), code=2)
    one_line_error(result, "does not exist", code=2)


@need_sshd
@pytest.mark.fault("key file damaged after devices add")
def test_garbage_key_in_inventory(cli, fault, board, tmp_path, no_conversion):
    key = tmp_path / "damaged_key"
    key.write_bytes(b"\x00\x01garbage\xff")
    _add(board, key=str(key))
    one_line_error(cli("devices", "info", "board", code=1), "not a private key", code=1)
    result = cli("sweep", "-m", "tiny_cnn", "-f", "onnx", "-d", "board", "--threads", "1", *FAST, code=1)
    one_line_error(result, str(key), "not a private key", code=1)
    _nothing_stored(fault)


# -- known_hosts -----------------------------------------------------------------------------


@need_sshd
@pytest.mark.fault("corrupt known_hosts line")
def test_corrupt_known_hosts(cli, fault, board, tmp_path, no_conversion):
    hosts = tmp_path / "config" / "aiot" / "known_hosts"  # aiot's own, under XDG_CONFIG_HOME
    hosts.parent.mkdir(parents=True)
    good = Path(board.known_hosts).read_text()
    hosts.write_text(good + f"[127.0.0.1]:{board.port} ssh-ed25519 AAAA!!!not-base64\n")
    _add(board, known_hosts=None)
    result = cli("devices", "info", "board", code=1)
    one_line_error(result, "known_hosts", "line 2", "corrupt", "aiot devices trust board", code=1)
    one_line_error(cli("devices", "trust", "board", "--yes", code=1), "line 2", code=1)
    result = cli("sweep", "-m", "tiny_cnn", "-f", "onnx", "-d", "board", "--threads", "1", *FAST, code=1)
    one_line_error(result, "known_hosts", code=1)
    _nothing_stored(fault)


# -- out of reach ------------------------------------------------------------------------------


@pytest.mark.fault("SSH device on a closed port")
@pytest.mark.parametrize("command", ["info", "doctor", "run", "sweep"])
def test_closed_port(cli, fault, no_conversion, command):
    _add(_dead_entry("dead"))
    _check_unreachable(cli, fault, "dead", command)


@pytest.mark.fault("SSH device name that does not resolve")
@pytest.mark.parametrize("command", ["info", "run"])
def test_unresolvable_host(cli, fault, no_conversion, command):
    _add(_dead_entry("ghost", host="no-such-host.invalid", port=22))
    _check_unreachable(cli, fault, "ghost", command)


@pytest.mark.fault("SSH device out of reach among several in one sweep")
def test_unreachable_device_among_several(cli, fault):
    """The others are measured; the dead one's runs are retried, then skipped, with a warning
    up front and no traceback."""
    _add(_dead_entry("dead"))
    result = cli("sweep", "-m", "tiny_cnn", "-f", "onnx", "-d", "local,dead", "--threads", "1,2", "--retries", "1",
                 "--json", *FAST, code=1)
    assert "dead is out of reach now" in result.stderr and "Traceback" not in result.output
    import json

    records = json.loads(result.stdout)
    assert sorted(r["status"] for r in records if r["device"] == "local") == ["ok", "ok"]
    # The run that found the device gone failed, the rest of its runs were skipped.
    assert sorted(r["status"] for r in records if r["device"] == "dead") == ["failed", "skipped"]
    assert all("cannot reach 'dead'" in r["reason"] for r in records if r["device"] == "dead")
    fault.records_lost(len(records), count_records())


def _check_unreachable(cli, fault, name: str, command: str) -> None:
    """Every command against an unreachable device: one line naming it, nothing stored."""
    if command in ("info", "doctor"):
        result = cli("devices", command, name, code=1)
        if command == "doctor":  # a table of checks, the first failed: no error line, no traceback
            assert "cannot reach" in result.output and "Traceback" not in result.output
            assert result.exception is None or isinstance(result.exception, SystemExit)
            return
    else:
        args = ("run", "-m", "tiny_cnn", "-f", "onnx") if command == "run" else \
            ("sweep", "-m", "tiny_cnn", "-f", "onnx", "--threads", "1,2")
        result = cli(*args, "-d", name, *FAST, code=1)
    one_line_error(result, "cannot reach", f"'{name}'", code=1)
    _nothing_stored(fault)


@pytest.fixture
def not_ssh():
    """A loopback port that answers like a web server and hangs up: no SSH banner."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(2)
    server.close()


@pytest.mark.fault("port that is not an SSH server")
def test_not_an_ssh_server_no_paramiko_traceback(fault, not_ssh, tmp_path):
    """The real command in a real process, so paramiko's own logging reaches the terminal
    as it would for a user."""
    from aiot.host.devices import inventory

    inventory.save({"web": _dead_entry("web", port=not_ssh)})
    done = subprocess.run([sys.executable, "-m", "aiot", "devices", "info", "web"], env=dict(os.environ),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "paramiko" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "'web'" in errors[0] and "banner" in errors[0], done.stderr
