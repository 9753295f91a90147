"""The deployed predictor over a persistent agent session, on this machine, the emulated SSH
device (a real sshd) and the emulated ADB device (the real adb server talking to our adbd).

Every device runs on this machine, so the agent's PID is checked in /proc after a close.
"""

import json
import os
import shutil
import signal
import time
from dataclasses import replace

import numpy as np
import pytest

from aiot.core.errors import AgentError, CommandTimeout
from aiot.host.devices import inventory
from aiot.host.devices.deploy import push_file
from aiot.host.engine.workspace import Workspace
from aiot.host.robust import deployed
from aiot.host.robust.deployed import open_deployed
from aiot.host.robust.predictor import TorchPredictor
from aiot.host.robust.target import Target, reference_model
from tests.helpers import process_gone

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

EMULATED_NAME = "emu-serve"
DEVICES = ["local", "ssh", "adb"]
pytestmark = pytest.mark.slow  # converts a model and starts emulated devices


def _needs_adb() -> None:
    pytest.importorskip("adbutils")
    if not shutil.which("adb"):
        pytest.skip("the adb client/server is not installed (apt-get install adb)")


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory):
    """One workspace per device for the module: the agent is deployed and the model converted
    once; every test still opens its own agent session."""
    results = tmp_path_factory.mktemp("results")
    held: dict[str, Workspace] = {}
    yield lambda device: held.setdefault(device, Workspace(results))
    for workspace in held.values():
        workspace.close()


@pytest.fixture(params=DEVICES)
def device(request):
    """The device's name, in this test's inventory."""
    if request.param == "local":
        return "local"
    if request.param == "adb":
        _needs_adb()
    entry = request.getfixturevalue("sshd" if request.param == "ssh" else "adbd")
    entry = replace(entry, name=f"serve-{request.param}")
    inventory.add(entry, replace=True)
    return entry.name


@pytest.fixture
def predictor(device, workspaces):
    pred = open_deployed(Target("tiny_cnn", fmt="ort", device=device), workspaces(device))
    yield pred
    pred.close()


@pytest.fixture(scope="module")
def reference():
    return TorchPredictor(reference_model(Target("tiny_cnn"))[1])


def _images(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((n, 1, 28, 28), dtype=np.float32)


def test_outputs_equal_pytorch_split_into_requests_and_counted(predictor, reference, monkeypatch):
    row = 28 * 28 * 4
    monkeypatch.setattr(deployed, "MAX_REQUEST_BYTES", 3 * row + 1)  # three rows per request
    x = _images(20)
    got = predictor.predict(x)
    assert predictor.serving == "session" and predictor.provenance["serving"] == "session"
    assert predictor.serving_info["input_shape"] == [1, 1, 28, 28] and predictor.compute_ms > 0
    assert got.shape == (20, 10) and np.allclose(got, reference.predict(x), atol=1e-4)
    assert predictor.queries == 20 and predictor._serving._next_id == 7  # ceil(20 / 3) requests
    predictor.predict(x[:1])
    assert predictor.queries == 21 and predictor._serving._next_id == 8


def test_an_error_reply_keeps_the_session_usable(predictor, reference):
    with pytest.raises(AgentError,
                       match=r"input rows of shape \[28, 28\]; the model takes \[1, 28, 28\]"):
        predictor._serving.predict(_images(2)[:, 0])
    x = _images(4, seed=1)
    assert np.allclose(predictor.predict(x), reference.predict(x), atol=1e-4)


def test_close_leaves_no_agent_process(predictor):
    pid = predictor._serving.pid
    assert pid is not None and os.path.exists(f"/proc/{pid}")
    predictor.close()
    predictor.close()  # idempotent
    assert process_gone(pid) and predictor._serving._stream.exit_code == 0  # it exited when asked


def test_a_dead_session_is_a_one_line_agent_error(predictor):
    os.kill(predictor._serving.pid, signal.SIGKILL)
    device = predictor.target.device
    with pytest.raises(AgentError, match=f"agent on {device} (was killed|stopped)") as err:
        predictor.predict(_images(1))
    assert "\n" not in err.value.one_line()
    with pytest.raises(AgentError, match="has ended"):
        predictor.predict(_images(1))


def test_a_wedged_agent_is_killed_on_timeout(device, workspaces, tmp_path):
    session = workspaces(device).session(device)
    artifact = tmp_path / "slow.json"
    artifact.write_text(json.dumps({"format": "aiot-null", "sleep_ms": 60_000,
                                    "input_shape": [1, 1, 2, 2], "outputs": 3}))
    remote = push_file(session.transport, artifact).remote
    serving = session.serve({"v": 1, "backend": "null", "artifact": remote, "threads": 1})
    pid = serving.pid
    started = time.monotonic()
    with pytest.raises(CommandTimeout, match="no answer within 0.5 s"):
        serving.predict(np.zeros((1, 1, 2, 2), np.float32), timeout=0.5)
    assert process_gone(pid) and time.monotonic() - started < 15
    serving.close()


def test_adb_without_shell_v2_falls_back_to_one_shot_predict(workspaces, reference, tmp_path):
    _needs_adb()
    from aiot.host.emulator.adb import start_adb_device
    from aiot.host.transports.adb import forget_tcp

    proc, _, entry = start_adb_device("serve-adb-v1", tmp_path, shell_v2=False)
    try:
        inventory.add(entry)
        workspace = Workspace(workspaces("local").results_dir)
        pred = open_deployed(Target("tiny_cnn", fmt="ort", device=entry.name), workspace)
        try:
            x = _images(3, seed=2)
            assert pred.serving == "one-shot"
            assert np.allclose(pred.predict(x), reference.predict(x), atol=1e-4) and pred.queries == 3
        finally:
            pred.close()
            workspace.close()
    finally:
        proc.kill()
        proc.wait(5)
        forget_tcp(entry.serial)
