"""A lab of two hosts on a real Ray cluster: two ``ray start`` nodes on this machine, each
started by ``aiot lab`` with its own aiot home (inventory, emulators, cache), so each owns
only the emulated device of its inventory. The driver (this test process) has an empty
inventory: every run reaches its device through the node that owns it, and every record
lands in the driver's store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aiot.host.engine.campaign import CampaignPolicy, plan_sweep, run_campaign, run_key
from aiot.host.engine.runs import MeasureParams, NullListener, expand_sweep
from aiot.host.store import open_store
from tests.helpers import stored_run_key

ray = pytest.importorskip("ray", reason="the lab needs aiot[lab] (Ray)")
pytestmark = pytest.mark.slow

FAST = MeasureParams(warmup_runs=1, warmup_min_s=0.0, min_runs=3, min_s=0.0, max_s=5.0)
#: The aiot CLI of this environment: each host runs it as its own process.
AIOT = str(Path(sys.executable).with_name("aiot"))
CLI_FAST = ["--warmup-runs", "1", "--warmup-min-s", "0", "--min-runs", "3", "--min-s", "0"]


class Host:
    """One lab host: an aiot home of its own, driven through the ``aiot`` CLI as a user would."""

    def __init__(self, root: Path, name: str) -> None:
        self.name, home = name, root / name
        self.env = {**os.environ, "AIOT_STATE_DIR": str(home / "state"), "AIOT_INVENTORY": str(home / "devices.toml"),
                    "AIOT_RESULTS_DIR": str(home / "results"), "AIOT_CACHE_DIR": str(home / "cache"),
                    "AIOT_LOCAL_WORKDIR": str(home / "local"), "AIOT_NO_PROGRESS": "1"}

    def aiot(self, *args: str) -> str:
        done = subprocess.run([AIOT, *args], env=self.env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{self.name}: aiot {' '.join(args)}: {done.stderr[-2000:]}"
        return done.stdout

    def node_pid(self) -> int:
        (state,) = (Path(self.env["AIOT_STATE_DIR"]) / "lab").glob("node-*.json")
        return json.loads(state.read_text())["pid"]


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """Host ``alpha`` (the head, device ``dev-a``) and host ``beta`` (device ``dev-b``)."""
    from aiot.host.emulator.ssh import free_port

    address = f"127.0.0.1:{free_port()}"
    alpha, beta = Host(tmp_path, "alpha"), Host(tmp_path, "beta")
    alpha.aiot("emulator", "start", "ssh", "--name", "dev-a")
    beta.aiot("emulator", "start", "ssh", "--name", "dev-b")
    try:
        alpha.aiot("lab", "start", "--head", "--port", address.rpartition(":")[2])
        # The lab's token, as a user copies it to the other hosts (and this driver uses it).
        token = Path(alpha.env["AIOT_STATE_DIR"]) / "lab" / "auth_token"
        beta.aiot("lab", "join", address, "--token", str(token))
        monkeypatch.setenv("AIOT_LAB_TOKEN_FILE", str(token))
        yield address, alpha, beta
    finally:
        ray.shutdown()
        for host, device in ((beta, "dev-b"), (alpha, "dev-a")):
            subprocess.run([AIOT, "lab", "stop"], env=host.env,
                           capture_output=True, timeout=120)
            subprocess.run([AIOT, "emulator", "stop", device],
                           env=host.env, capture_output=True, timeout=120)


class KillNodeAfterFirstRun(NullListener):
    """Kills ``host``'s Ray node (its whole session) once a run of ``device`` has ended."""

    def __init__(self, host: Host, device: str) -> None:
        self.host, self.device, self.killed = host, device, False

    def on_run_end(self, record) -> None:
        from aiot.host.lab.node import kill_session

        if record.device == self.device and not self.killed:
            self.killed = True
            kill_session(self.host.node_pid())


def test_sweep_through_a_two_node_lab_survives_a_node_killed_mid_sweep(cli, lab):
    from aiot.host.devices import inventory
    from aiot.host.lab.session import LabSession

    address, _alpha, beta = lab
    assert inventory.load() == {} or set(inventory.load()) <= {"local"}  # the driver owns no device
    status = cli.json("lab", "status", "--address", address)
    assert {(r["device"], r["state"]) for r in status} == {("dev-a", "online"), ("dev-b", "online")}
    _refuses_a_device_no_node_owns(cli, address)

    # The CLI, as a technician types it: every run stored here, each measured by its owner.
    records = cli.json("sweep", "--lab", address, "-d", "dev-a,dev-b", "-m", "tiny_cnn", "-f", "onnx",
                       "--threads", "1", *CLI_FAST)
    assert {(r["device"], r["status"]) for r in records} == {("dev-a", "ok"), ("dev-b", "ok")}
    nodes = {r["device"]: r["provenance"]["lab"]["node_id"] for r in records}
    assert nodes["dev-a"] != nodes["dev-b"]
    assert all(r["provenance"]["device"]["name"] == r["device"] for r in records)

    # The campaign engine with one node killed after its first run.
    requests = expand_sweep(["dev-a", "dev-b"], ["tiny_cnn"], ["tflite", "onnx"], [1, 2], params=FAST)
    results = Path(os.environ["AIOT_RESULTS_DIR"])
    session = LabSession(address)
    with open_store(results) as store:
        plan = plan_sweep(requests, store, seed=5)
    listener = KillNodeAfterFirstRun(beta, "dev-b")
    done = run_campaign(plan, results, listener, CampaignPolicy(retries=2, backoff_s=0.2, lab=session))
    assert listener.killed and len(done) == 8
    on_a = [r for r in done if r.device == "dev-a"]
    on_b = [r for r in done if r.device == "dev-b"]
    assert all(r.status == "ok" for r in on_a), [(r.status, r.reason) for r in on_a]
    assert [r.status for r in on_b].count("ok") == 1
    assert any(r.status == "skipped" and r.reason.startswith("node lost") for r in on_b), \
        [(r.status, r.reason) for r in on_b]

    # beta rejoins: the same sweep finishes exactly beta's missing runs, nothing twice.
    beta.aiot("lab", "join", address)
    with open_store(results) as store:
        again = plan_sweep(requests, store, seed=5)
    assert again.sweep_id == plan.sweep_id and len(again.todo) == 3
    resumed = run_campaign(again, results, NullListener(), CampaignPolicy(retries=2, backoff_s=0.2,
                                                                          lab=LabSession(address)))
    assert {r.device for r in resumed} == {"dev-b"} and all(r.status == "ok" for r in resumed)
    with open_store(results) as store:
        everything = store.query(sweep_id=plan.sweep_id)
    assert not [r for r in everything if r.status == "pending"]
    assert sorted(stored_run_key(r) for r in everything if r.status == "ok") == sorted(map(run_key, requests))


def _refuses_a_device_no_node_owns(cli, address: str) -> None:
    """A sweep naming a device no node owns is refused before any run (checked inside the
    test above: a lab of its own would cost two more emulators and Ray nodes)."""
    refused = cli("sweep", "--lab", address, "-d", "dev-z", "-m", "tiny_cnn", "-f", "onnx", "--threads", "1",
                  code=2)
    assert "no live node of the lab" in refused.stderr and "dev-a, dev-b" in refused.stderr
