"""`aiot devices setup` on an emulated SSH board whose Python has no runtimes (Debian's python3).

Downloads manylinux wheels from PyPI once per test session (cached in AIOT_CACHE_DIR).
"""

import platform
import shutil
import subprocess

import pytest

from aiot.host.emulator.ssh import start_sshd
from tests.helpers import fast

BARE_PYTHON = shutil.which("python3.11", path="/usr/bin") or shutil.which("python3", path="/usr/bin")
FAST = fast(5, cooldown=False)


def _bare_python_lacks_runtimes() -> bool:
    if not BARE_PYTHON:
        return False
    probe = subprocess.run([BARE_PYTHON, "-c", "import numpy"], capture_output=True)
    return probe.returncode != 0


pytestmark = pytest.mark.skipif(not _bare_python_lacks_runtimes(),
                                reason="needs a system python3 without numpy to play the bare board")


@pytest.fixture
def bare_board(tmp_path, cli):
    proc, _, entry = start_sshd("bare", tmp_path)
    cli("devices", "add", "bare", "--transport", "ssh", "--host", entry.host, "--port", str(entry.port),
        "--user", entry.user, "--key", entry.key, "--workdir", entry.workdir, "--python", BARE_PYTHON)
    cli("devices", "trust", "bare", "--yes")
    yield entry
    proc.terminate()
    proc.wait(5)


def test_setup_installs_runtimes_and_the_board_then_measures(cli, bare_board):
    assert set(cli.json("devices", "info", "bare")["agent"]["runtimes"].values()) == {None}
    # Refused before converting, with its fix (issue 39: the device says what it runs first).
    refused = cli("run", "--device", "bare", "--model", "tiny_cnn", "--format", "onnx", *FAST, code=2)
    assert "bare cannot time onnx artifacts" in refused.stderr
    assert "aiot devices setup bare" in refused.stderr
    summary = cli.json("devices", "setup", "bare")
    version = subprocess.run([BARE_PYTHON, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True).stdout.strip()
    assert summary["python"]["version"] == version and summary["python"]["machine"] == platform.machine()
    assert any(w.startswith("onnxruntime-") for w in summary["wheels"])
    assert any(w.startswith("ai_edge_litert-") for w in summary["wheels"])
    runtimes = cli.json("devices", "info", "bare")["agent"]["runtimes"]
    assert runtimes["onnxruntime"] and runtimes["litert"]
    records = cli.json("sweep", "--device", "bare", "--model", "tiny_cnn", "--format", "onnx,tflite",
                       "--threads", "1", *FAST)
    assert [r["status"] for r in records] == ["ok", "ok"]
    assert records[0]["provenance"]["device"]["python_path"] == BARE_PYTHON
    again = cli.json("devices", "setup", "bare")
    assert again["sent_bytes"] == 0  # wheels are content-addressed: nothing is sent twice


def test_setup_refuses_phones_that_are_not_aarch64(cli):
    from aiot.core.errors import AiotError
    from aiot.host.devices.setup import setup_device
    from aiot.host.transports.base import ShellResult

    class X86Phone:  # an x86_64 Android emulator image, as `uname -m` reports it
        kind, name = "adb", "pixel"

        def shell(self, argv, timeout=None):
            assert argv == ["uname", "-m"]
            return ShellResult("uname -m", 0, "x86_64\n", "", 0.01)

    with pytest.raises(AiotError, match="x86_64 device: aiot's phone runtime is aarch64"):
        setup_device(X86Phone(), None)
