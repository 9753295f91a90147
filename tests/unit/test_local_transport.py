"""LocalTransport's own behaviour; what every transport promises is in
tests/integration/test_transport_contract.py."""

import pytest

from aiot.host.devices.deploy import agent_hash, deploy_agent
from aiot.host.transports.local import LocalTransport


@pytest.fixture
def local(tmp_path):
    return LocalTransport(root=tmp_path / "dev")


def test_agent_deploys_once_per_version(local, tmp_path, monkeypatch):
    root = deploy_agent(local, tmp_path / "stage")
    assert root.endswith(agent_hash())
    res = local.shell([local.python(), "-m", "device_agent", "hello"], cwd=root)
    assert res.ok and '"event":"hello"' in res.stdout
    pushed = []
    monkeypatch.setattr(local, "push", lambda *a: pushed.append(a))
    assert deploy_agent(local, tmp_path / "stage") == root and pushed == []


def test_info_probes_this_machine(local):
    info = local.info()
    assert info["cores"] >= 1 and info["abi"] and info["os"] == "Linux"
    assert info["mem_total_mib"] > 0 and info["clusters"]
