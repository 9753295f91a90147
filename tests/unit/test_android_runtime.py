"""aiot's phone runtime: the tree cut from a userland, and its install on a device (here the
local transport: a real shell with sha256sum and tar, as toybox and busybox have)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from aiot.core.errors import DeviceCommandError
from aiot.host.devices.android_runtime import (
    RUNTIME_NAME,
    archive_runtime,
    install_runtime,
    runtime_root,
)
from aiot.host.devices.deploy import push_file
from aiot.host.transports.local import LocalTransport


@pytest.fixture
def userland(tmp_path):
    """A userland folder shaped like arm64.ensure_userland's, with files to keep and prune."""
    root = tmp_path / "userland-abc" / "root"
    files = {
        "lib/ld-linux-aarch64.so.1": b"loader",
        "lib/aarch64-linux-gnu/libc.so.6": b"libc",
        "usr/bin/python3.11": b"python",
        "usr/bin/perl": b"not ours",
        "usr/lib/python3.11/os.py": b"import sys\n",
        "usr/lib/python3.11/test/test_os.py": b"tests",
        "usr/lib/python3.11/__pycache__/os.cpython-311.pyc": b"cache",
        "usr/lib/python3/dist-packages/numpy/__init__.py": b"",
        "usr/lib/python3/dist-packages/onnxruntime/transformers/big.py": b"x" * 1000,
        "usr/lib/python3/dist-packages/ai_edge_litert/libLiteRtWebGpuAccelerator.so": b"gpu",
        "usr/share/doc/python3/README": b"docs",
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root.parent


def test_the_tree_keeps_what_runs_and_is_reproducible(userland, tmp_path):
    archive = archive_runtime(userland, tmp_path / "cache")
    with tarfile.open(archive.path) as tar:
        names = sorted(tar.getnames())
        wrapper = tar.extractfile("bin/python3").read().decode()
    assert names == ["bin/python3", "lib/aarch64-linux-gnu/libc.so.6", "lib/ld-linux-aarch64.so.1",
                     "usr/bin/python3.11", "usr/lib/python3.11/os.py",
                     "usr/lib/python3/dist-packages/numpy/__init__.py"]
    assert wrapper.startswith("#!/system/bin/sh") and "ld-linux-aarch64.so.1" in wrapper
    assert "unset LD_PRELOAD" in wrapper and f'AIOT_RUNTIME="{RUNTIME_NAME}:' in wrapper
    again = archive_runtime(userland, tmp_path / "other-cache")
    assert again.sha256 == archive.sha256 and archive.files == 6


def test_install_pushes_once_checks_the_hash_and_marks_complete(userland, tmp_path):
    archive = archive_runtime(userland, tmp_path / "cache")
    device = LocalTransport(root=tmp_path / "device")
    first = install_runtime(device, archive)
    root = runtime_root(device, archive)
    assert first["installed"] and first["pushed_bytes"] == archive.size_bytes
    assert (tmp_path / "device" / root.split("/device/", 1)[1] / "usr/bin/python3.11").exists()
    second = install_runtime(device, archive)
    assert not second["installed"] and second["pushed_bytes"] == 0


def test_a_damaged_blob_on_the_device_is_refused_and_removed(userland, tmp_path):
    archive = archive_runtime(userland, tmp_path / "cache")
    device = LocalTransport(root=tmp_path / "device")
    pushed = push_file(device, archive.path, archive.sha256)
    with open(pushed.remote, "r+b") as fh:  # same size, other bytes: a damaged transfer
        fh.seek(100)
        fh.write(b"\0" * 16)
    with pytest.raises(DeviceCommandError, match="hash mismatch"):
        install_runtime(device, archive)
    assert not Path(pushed.remote).exists()
    assert install_runtime(device, archive)["installed"]  # pushed again, then unpacked
