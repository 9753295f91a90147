"""Full disks and read-only folders: each failure is one line naming ENOSPC or EROFS and the
folder, no temporary is left behind, a run that could not finish is one failed record (never
pending, never retried as a lost link), and a healthy store is never called damaged.

The disks are small tmpfs mounts made by each test under its own tmp_path and always unmounted
(root or CAP_SYS_ADMIN is needed; without it every case is skipped, saying why).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.faults.conftest import count_records, one_line_error
from tests.helpers import FAST

LEFTOVERS = (".part", ".tmp", ".new")


class Disk:
    """A tmpfs of ``size`` mounted at ``path`` for one test."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fill(self) -> None:
        """Take every free byte (a file of zeros, written unbuffered until ENOSPC)."""
        fd = os.open(self.path / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for size in (1 << 16, 4096, 512, 1):
                try:
                    while True:
                        os.write(fd, bytes(size))
                except OSError:
                    continue
        finally:
            os.close(fd)

    def free(self) -> None:
        (self.path / "filler").unlink(missing_ok=True)

    def read_only(self, on: bool = True) -> None:
        _mount("-o", f"remount,{'ro' if on else 'rw'}", str(self.path))

    def leftovers(self) -> list[str]:
        """Temporary files anywhere on the disk."""
        return sorted(str(p.relative_to(self.path)) for p in self.path.rglob("*")
                      if p.is_file() and any(part in p.name for part in LEFTOVERS))


def _mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def small_disk(tmp_path):
    """``small_disk(size)``: a fresh tmpfs of ``size`` (e.g. "256k") for this test."""
    mounted: list[Path] = []

    def mount(size: str, name: str = "disk") -> Disk:
        point = tmp_path / f"{name}-{len(mounted)}"
        point.mkdir()
        if shutil.which("mount") is None:
            pytest.skip("no mount command: disk-full cases need a small tmpfs")
        done = _mount("-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(point))
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()[:80]}): disk-full "
                        "cases need root or CAP_SYS_ADMIN")
        mounted.append(point)
        return Disk(point)

    yield mount
    for point in reversed(mounted):
        _mount("-o", "remount,rw", str(point))
        subprocess.run(["umount", str(point)], capture_output=True, timeout=30)


def _records() -> list[dict]:
    """Every record of the test's store, read with plain sqlite3 (read-only)."""
    path = Path(os.environ["AIOT_RESULTS_DIR"]) / "aiot.sqlite"
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT status, reason, kind FROM runs ORDER BY rowid").fetchall()
    finally:
        conn.close()
    return [{"status": s, "reason": r, "kind": k} for s, r, k in rows]


def _no_traceback(result) -> None:
    assert "Traceback" not in result.output and "not an aiot result store" not in result.output
    assert "damaged" not in result.output


# -- conversions ---------------------------------------------------------------------------


@pytest.mark.fault("conversion runs out of space")
@pytest.mark.parametrize("fmt", ["tflite", "ptl", "onnx", "ort", "executorch"])
def test_conversion_out_of_space_is_one_line(cli, fault, small_disk, monkeypatch, fmt):
    if fmt == "executorch":
        from tests.converters.conftest import need_toolchain

        need_toolchain("executorch")
    disk = small_disk("96k")
    monkeypatch.setenv("AIOT_RESULTS_DIR", str(disk.path / "results"))
    result = cli("convert", "tiny_cnn", "-f", fmt, code=1)
    one_line_error(result, "No space left on device (ENOSPC)", str(disk.path / "results"))
    _no_traceback(result)
    assert disk.leftovers() == []
    assert not list((disk.path / "results" / "artifacts").glob("tiny_cnn*"))


@pytest.mark.fault("convert into a read-only results folder")
def test_convert_into_a_read_only_folder(cli, fault, small_disk, monkeypatch):
    disk = small_disk("1m")
    (disk.path / "results").mkdir()
    disk.read_only()
    monkeypatch.setenv("AIOT_RESULTS_DIR", str(disk.path / "results"))
    result = cli("convert", "tiny_cnn", "-f", "onnx", code=1)
    one_line_error(result, "Read-only file system (EROFS)")
    _no_traceback(result)


@pytest.mark.fault("sweep whose conversion hits ENOSPC leaves a pending record")
def test_sweep_conversion_out_of_space_is_one_failed_record(cli, fault, small_disk, monkeypatch):
    disk = small_disk("260k")  # the store (its facts and their log too) fits, the 230 KB artifact does not
    monkeypatch.setenv("AIOT_RESULTS_DIR", str(disk.path / "results"))
    result = cli("sweep", "-m", "tiny_cnn", "-f", "tflite", "--threads", "1,2", *FAST, code=1)
    records = _records()
    assert [r["status"] for r in records] == ["failed", "failed"], records
    assert all("No space left on device (ENOSPC)" in r["reason"] for r in records)
    assert "Traceback" not in result.output and disk.leftovers() == []
    fault.records_lost(2, count_records())


# -- a full disk under the store, the weights, the state, the device's workdir ---------------


def _one_run(cli) -> str:
    (record,) = cli.json("run", "-m", "tiny_cnn", "-f", "onnx", *FAST)
    return record["id"]


@pytest.mark.fault("healthy store on a full disk called not a store")
def test_store_on_a_full_disk(cli, fault, small_disk, monkeypatch):
    disk = small_disk("2m")
    monkeypatch.setenv("AIOT_RESULTS_DIR", str(disk.path / "results"))
    record_id = _one_run(cli)
    shutil.rmtree(disk.path / "results" / "artifacts")
    before = count_records()
    disk.fill()
    listed = cli("results", "list", "--json")  # reading needs no space
    assert [r["id"] for r in json.loads(listed.stdout)] == [record_id]
    assert record_id[:8] in cli("results", "show", record_id).stdout
    cli("results", "export", "-f", "csv")
    result = cli("run", "-m", "tiny_cnn", "-f", "onnx", *FAST, code=1)
    one_line_error(result, "No space left on device (ENOSPC)")
    _no_traceback(result)
    report = cli("report", code=1)
    one_line_error(report, "No space left on device (ENOSPC)")
    _no_traceback(report)
    disk.free()
    fault.records_lost(before, count_records())
    conn = sqlite3.connect(disk.path / "results" / "aiot.sqlite")
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    _one_run(cli)  # space again: the same store takes records again
    assert count_records() == before + 1


@pytest.mark.fault("healthy store on a read-only mount called not a store")
def test_store_on_a_read_only_mount(cli, fault, small_disk, monkeypatch):
    disk = small_disk("2m")
    monkeypatch.setenv("AIOT_RESULTS_DIR", str(disk.path / "results"))
    record_id = _one_run(cli)
    before = count_records()
    disk.read_only()
    for args in (("results", "list"), ("results", "show", record_id), ("results", "top"),
                 ("results", "export", "-f", "json")):
        assert "Traceback" not in cli(*args).output  # read without writing a byte
    result = cli("run", "-m", "tiny_cnn", "-f", "onnx", *FAST, code=1)
    one_line_error(result, "Read-only file system (EROFS)", "intact")
    _no_traceback(result)
    report = cli("report", code=1)
    one_line_error(report, "Read-only file system (EROFS)")
    disk.read_only(False)
    fault.records_lost(before, count_records())


@pytest.mark.fault("train on a full disk")
def test_train_on_a_full_disk(cli, fault, small_disk, monkeypatch):
    pytest.importorskip("sklearn")
    disk = small_disk("64k")
    monkeypatch.setenv("AIOT_WEIGHTS_DIR", str(disk.path / "weights"))
    disk.fill()
    result = cli("train", "tiny_cnn", "--dataset", "digits", "--epochs", "1", code=1)
    one_line_error(result, "No space left on device (ENOSPC)", str(disk.path / "weights"))
    _no_traceback(result)
    (record,) = _records()
    assert record["kind"] == "train" and record["status"] == "failed"
    assert "ENOSPC" in record["reason"] and disk.leftovers() == []


@pytest.mark.fault("full state folder")
def test_full_state_folder(cli, fault, small_disk, monkeypatch):
    disk = small_disk("64k")
    monkeypatch.setenv("AIOT_STATE_DIR", str(disk.path / "state"))
    (disk.path / "state").mkdir()
    disk.fill()
    # A sweep only notes its lock's holder there: the lock holds without the note.
    records = cli.json("sweep", "-m", "tiny_cnn", "-f", "onnx", "--threads", "1", *FAST)
    assert [r["status"] for r in records] == ["ok"]
    # What must write there says so in one line.
    result = cli("emulator", "start", "ssh", "--name", "full", code=1)
    one_line_error(result, "No space left on device (ENOSPC)", str(disk.path / "state"))
    _no_traceback(result)


@pytest.mark.fault("full device work dir retried as a lost link")
def test_full_local_workdir_is_one_failed_record(cli, fault, small_disk, monkeypatch):
    import aiot.host.engine.campaign as campaign

    disk = small_disk("64k")
    monkeypatch.setenv("AIOT_LOCAL_WORKDIR", str(disk.path / "device"))
    waits = []
    monkeypatch.setattr(campaign, "_sleep", waits.append)  # a retry would wait first
    cli("sweep", "-m", "tiny_cnn", "-f", "onnx", "--threads", "1,2", *FAST, code=1)
    records = _records()
    assert [r["status"] for r in records] == ["failed", "failed"], records  # one per run
    assert all("(ENOSPC)" in r["reason"] and "lost" not in r["reason"] for r in records)
    assert waits == []  # not retried: retrying cannot free the space
    fault.records_lost(2, count_records())


# -- devices setup -------------------------------------------------------------------------


def _wheel(path: Path, unpacked: int) -> Path:
    """A wheel (a zip) of one compressible file of ``unpacked`` bytes."""
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("pkg/data.bin", bytes(unpacked))
        archive.writestr("pkg-1.0.dist-info/METADATA", "Name: pkg\nVersion: 1.0\n")
    return path


@pytest.fixture
def tight_device(small_disk, monkeypatch, tmp_path):
    """The local device on a 1 MB disk, and a 3 MB (unpacked) wheel to set it up with."""
    from aiot.host.devices import setup as device_setup
    from aiot.host.transports.local import LocalTransport

    disk = small_disk("1m")
    wheel = _wheel(tmp_path / "pkg-1.0-py3-none-any.whl", 3 << 20)
    monkeypatch.setattr(device_setup, "download_wheels", lambda *a, **k: [wheel])
    return disk, LocalTransport(root=disk.path / "device")


@pytest.mark.fault("devices setup does not check free space first")
def test_devices_setup_checks_space_first(fault, tight_device, tmp_path):
    from aiot.core.errors import DeviceStorageError
    from aiot.host.devices.setup import setup_device

    disk, transport = tight_device
    with pytest.raises(DeviceStorageError, match=r"need.*\(ENOSPC\): nothing was sent"):
        setup_device(transport, tmp_path / "cache")
    assert not (disk.path / "device" / "blobs").exists() or not any((disk.path / "device" / "blobs").rglob("*.whl"))


@pytest.mark.fault("devices setup leaves the device full after a failed unpack")
def test_failed_unpack_is_cleaned(fault, tight_device, tmp_path, monkeypatch):
    from aiot.core.errors import DeviceStorageError
    from aiot.host.devices import setup as device_setup

    disk, transport = tight_device
    monkeypatch.setattr(device_setup, "require_space", lambda *a, **k: None)  # as before the check
    with pytest.raises(DeviceStorageError, match=r"no space left on the device \(ENOSPC\).*removed"):
        device_setup.setup_device(transport, tmp_path / "cache")
    site = Path(device_setup.runtime_site(transport))
    assert not site.exists()  # the partial unpack is gone
    assert shutil.disk_usage(disk.path).free > 512 * 1024  # the device has its space back
