"""The lab's pieces that need no Ray cluster: resources, version checks, shipped artifacts,
how a node's failure travels, and the CLI's refusals."""

from __future__ import annotations

import hashlib

import pytest

import aiot
from aiot.core.errors import CommandTimeout, is_transient
from aiot.device_agent.protocol import PROTOCOL_VERSION
from aiot.host.lab.node import device_resources, node_labels
from aiot.host.lab.runner import DeviceRunner, ShipmentError
from aiot.host.lab.session import LabNode, NodeLost, RemoteFailure


def test_each_device_is_a_resource_of_capacity_one_and_local_is_never_shared():
    assert device_resources(["pixel", "local", "pi4"]) == {"aiot_device:pixel": 1.0, "aiot_device:pi4": 1.0}


def _node(version: str, protocol: str) -> LabNode:
    return LabNode("n1", True, "10.0.0.2", "rack-2", version, protocol, ("pixel",))


def test_a_node_of_another_aiot_or_protocol_is_refused_in_one_line():
    assert _node(aiot.__version__, str(PROTOCOL_VERSION)).compatible() is None
    why = _node("0.0.1", str(PROTOCOL_VERSION)).compatible()
    assert "rack-2 runs aiot 0.0.1" in why and "\n" not in why
    assert "protocol 99" in _node(aiot.__version__, "99").compatible()
    assert node_labels()["aiot-version"] == aiot.__version__


def test_a_nodes_failure_keeps_its_transience():
    assert is_transient(NodeLost("node lost: x"))
    assert is_transient(RemoteFailure("adb: device offline", None, "TransportError", True))
    assert not is_transient(RemoteFailure("agent: model failed", None, "AgentError", False))
    assert not is_transient(CommandTimeout("hung"))


def test_shipped_artifact_is_checked_before_it_is_trusted(tmp_path, monkeypatch):
    monkeypatch.setenv("AIOT_CACHE_DIR", str(tmp_path / "cache"))
    runner = DeviceRunner("pixel")
    blob = b"TFL3 pretend model"
    meta = {"sha256": hashlib.sha256(blob).hexdigest(), "files": ["m.tflite"], "size_bytes": len(blob),
            "parity": {"checked": True}, "sidecar": {"converter": "tflite"}}
    conv, sidecar = runner._unpack(meta, (blob,))
    assert conv.artifact.read_bytes() == blob and conv.sha256 == meta["sha256"] and sidecar == meta["sidecar"]
    with pytest.raises(ShipmentError, match="other bytes"):
        runner._unpack({**meta, "sha256": "0" * 64}, (blob,))
    assert not (tmp_path / "cache" / "lab-artifacts" / ("0" * 64) / "m.tflite").exists()


def test_cli_refusals_need_no_lab(cli, monkeypatch):
    monkeypatch.delenv("AIOT_LAB", raising=False)
    assert "lab start --head" in cli("lab", "start", code=2).stderr
    assert "no lab address" in cli("lab", "status", code=2).stderr
    refused = cli("sweep", "--lab", "127.0.0.1:1", "-m", "tiny_cnn", "--native", "benchmark_model", code=2)
    assert "--lab sweeps measure with the device agent" in refused.stderr
