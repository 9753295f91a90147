"""One contract for every transport: the same tests run over this machine (``local``), a real
OpenSSH sshd (the emulated SSH device) and the real adb server in front of aiot's emulated adbd.

What is particular to one transport (host keys, the adb server's states, what the plain ``ssh``
and ``adb`` clients see) stays in its own module; what every transport promises is here once.
"""

import os
import shutil
import time

import pytest

from aiot.core.errors import TransportError
from aiot.host.devices.deploy import push_file
from aiot.host.transports import Transport

EMULATED_NAME = "emu-contract"
KINDS = ["local", "ssh", "adb"]


def _open(kind: str, request, tmp_path):
    if kind == "local":
        from aiot.host.transports.local import LocalTransport

        return LocalTransport(root=tmp_path / "dev")
    if kind == "ssh":
        from aiot.host.transports.ssh import SshTransport

        return SshTransport(request.getfixturevalue("sshd"))
    pytest.importorskip("adbutils")
    if not shutil.which("adb"):
        pytest.skip("the adb client/server is not installed (apt-get install adb)")
    from aiot.host.transports.adb import AdbTransport

    return AdbTransport(request.getfixturevalue("adbd"))


@pytest.fixture(params=KINDS)
def transport(request, tmp_path):
    opened = _open(request.param, request, tmp_path)
    yield opened
    opened.close()


def test_is_a_transport_and_probes_its_device(transport):
    info = transport.info()
    assert isinstance(transport, Transport)
    assert info["transport"] in KINDS and info["cores"] >= 1


def test_exit_code_and_separate_streams(transport):
    res = transport.shell(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (res.exit_code, res.stdout, res.stderr, res.ok) == (3, "out\n", "err\n", False)


@pytest.mark.parametrize("arg", ["a b", "it's", "x; touch pwned", "$(touch pwned)", "`touch pwned`", "\\n"])
def test_arguments_cannot_inject(transport, arg):
    transport.shell(["mkdir", "-p", transport.workdir()])
    res = transport.shell(["printf", "%s", arg], cwd=transport.workdir())
    assert res.stdout == arg
    assert not transport.exists(f"{transport.workdir()}/pwned")


def test_lines_stream_and_a_timeout_kills_the_command(transport):
    lines = []
    transport.shell(["sh", "-c", "echo one; sleep 0.2; echo two"], on_line=lines.append)
    assert lines == ["one", "two"]
    transport.shell(["mkdir", "-p", transport.workdir()])
    marker = f"{transport.workdir()}/survived"
    started = time.monotonic()
    with pytest.raises(TransportError, match="timed out"):
        transport.shell(["sh", "-c", f"sleep 2; touch '{marker}'"], timeout=0.5)
    assert time.monotonic() - started < 2
    with pytest.raises(TransportError, match="timed out"):  # streaming lines or not
        transport.shell(["sleep", "5"], timeout=0.3, on_line=lines.append)
    assert transport.shell(["true"]).ok  # the connection survives a timed-out command
    time.sleep(2.5)
    assert not transport.exists(marker)  # and the command was killed on the device


def test_push_pull_stat_are_whole_or_nothing(transport, tmp_path):
    data = os.urandom(5 * 1024 * 1024)
    src = tmp_path / "blob.bin"
    src.write_bytes(data)
    remote = f"{transport.workdir()}/sub dir/blob.bin"
    transport.push(src, remote)
    st = transport.stat(remote)
    assert st.size == len(data) and not st.is_dir and transport.stat(transport.workdir()).is_dir
    assert transport.stat(remote + ".nope") is None and not transport.exists(remote + ".nope")
    transport.pull(remote, tmp_path / "back" / "blob.bin")
    assert (tmp_path / "back" / "blob.bin").read_bytes() == data
    listing = transport.shell(["ls", "-a", f"{transport.workdir()}/sub dir"]).stdout.split()
    assert listing == [".", "..", "blob.bin"]  # no partial file left beside it
    with pytest.raises(TransportError):
        transport.pull(remote + ".nope", tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_content_addressed_push_sends_only_what_changed(transport, tmp_path):
    src = tmp_path / "model.onnx"
    src.write_bytes(b"m" * 1000)
    first, second = push_file(transport, src), push_file(transport, src)
    assert first.sent and not second.sent and first.remote == second.remote
    src.write_bytes(b"m" * 1001)
    third = push_file(transport, src)
    assert third.sent and third.remote != first.remote
    assert transport.stat(third.remote).size == 1001
