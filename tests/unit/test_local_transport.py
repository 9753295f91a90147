import pytest

from aiot.core.errors import TransportError
from aiot.host.devices.deploy import agent_hash, deploy_agent, push_file
from aiot.host.transports import Transport
from aiot.host.transports.local import LocalTransport


@pytest.fixture
def local(tmp_path):
    return LocalTransport(root=tmp_path / "dev")


def test_is_a_transport(local):
    assert isinstance(local, Transport)


def test_shell_exit_code_and_separate_streams(local):
    res = local.shell(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (res.exit_code, res.stdout, res.stderr, res.ok) == (3, "out\n", "err\n", False)


def test_shell_streams_lines_and_times_out(local):
    seen = []
    res = local.shell(["sh", "-c", "echo one; echo two"], on_line=seen.append)
    assert seen == ["one", "two"] and res.ok
    with pytest.raises(TransportError, match="timed out"):
        local.shell(["sleep", "5"], timeout=0.3, on_line=seen.append)
    with pytest.raises(TransportError, match="timed out"):
        local.shell(["sleep", "5"], timeout=0.3)


def test_push_pull_stat_exists(local, tmp_path):
    src = tmp_path / "a.bin"
    src.write_bytes(b"x" * 1000)
    remote = f"{local.workdir()}/sub/a.bin"
    local.push(src, remote)
    assert local.exists(remote) and local.stat(remote).size == 1000
    assert local.stat(remote + ".nope") is None
    local.pull(remote, tmp_path / "back" / "a.bin")
    assert (tmp_path / "back" / "a.bin").read_bytes() == b"x" * 1000
    with pytest.raises(TransportError):
        local.pull(remote + ".nope", tmp_path / "c")
    assert not list((tmp_path / "dev" / "sub").glob("*.part"))


def test_content_addressed_push_skips_unchanged(local, tmp_path):
    src = tmp_path / "model.onnx"
    src.write_bytes(b"abc")
    first, second = push_file(local, src), push_file(local, src)
    assert first.sent and not second.sent and first.remote == second.remote
    src.write_bytes(b"abcd")
    third = push_file(local, src)
    assert third.sent and third.remote != first.remote


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
