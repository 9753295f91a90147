"""A full or read-only workdir on every device kind: one line saying what is wrong and what to do,
and no half-written file left behind.

The workdirs are real tmpfs mounts (one 100 KiB, one read-only), so these tests need root.
"""

import os
import subprocess
from dataclasses import replace

import pytest

from aiot.core.errors import TransportError
from aiot.host.devices.deploy import push_file
from aiot.host.transports.adb import AdbTransport
from aiot.host.transports.local import LocalTransport
from aiot.host.transports.ssh import SshTransport

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@pytest.fixture(scope="module")
def mounts(tmp_path_factory):
    root = tmp_path_factory.mktemp("mounts")
    full, readonly = root / "full", root / "ro"
    full.mkdir(), readonly.mkdir()
    done = []
    try:
        for target, options in ((full, "size=100k"), (readonly, "size=1m,ro")):
            res = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
                                 capture_output=True, text=True)
            if res.returncode != 0:
                pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()}")
            done.append(target)
        yield {"full": full, "ro": readonly}
    finally:
        for target in done:
            subprocess.run(["umount", "-l", str(target)], check=False)


@pytest.fixture(scope="module")
def entries(sshd, adbd):
    return {"ssh": sshd, "adb": adbd}


def _transport(kind, entries, workdir, monkeypatch):
    if kind == "local":
        monkeypatch.setenv("AIOT_LOCAL_WORKDIR", str(workdir))
        return LocalTransport()
    entry = replace(entries[kind], workdir=str(workdir))
    return SshTransport(entry) if kind == "ssh" else AdbTransport.from_entry(entry)


@pytest.mark.parametrize("kind", ["local", "ssh", "adb"])
@pytest.mark.parametrize("fault, said", [("full", "free in"), ("ro", "Read-only file system")])
def test_push_to_a_bad_workdir_says_why_and_leaves_nothing(kind, fault, said, mounts, entries, tmp_path,
                                                           monkeypatch):
    workdir = mounts[fault] / kind
    src = tmp_path / "model.tflite"
    src.write_bytes(os.urandom(300_000))  # larger than the full tmpfs
    transport = _transport(kind, entries, workdir, monkeypatch)
    try:
        with pytest.raises(TransportError) as caught:
            push_file(transport, src)
    finally:
        transport.close()
    line = caught.value.one_line()
    assert said in line and str(workdir) in line and "\n" not in line
    assert caught.value.hint  # what to do: free space, or another workdir
    leftovers = [p for p in mounts[fault].rglob("*") if p.is_file()]
    assert leftovers == []
