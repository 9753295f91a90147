"""The doctor on this machine's LocalTransport, with broken workdirs, Pythons and connections."""

import os

import pytest

from aiot.core.errors import TransportError
from aiot.host.devices import doctor
from aiot.host.devices.checks import Check, parse_df
from aiot.host.devices.doctor import diagnose, parse_python_version
from aiot.host.transports.local import LocalTransport


class OtherPython(LocalTransport):
    """This machine, but the agent's Python is ``python_path`` (and the kind may be a phone's)."""

    def __init__(self, python_path: str, kind: str = "local") -> None:
        super().__init__()
        self.python_path, self.kind = python_path, kind

    def python(self, backend=None) -> str:
        return self.python_path


class DropsAt(LocalTransport):
    """This machine, until a command starting with ``program`` runs: then the link is gone."""

    def __init__(self, program: str) -> None:
        super().__init__()
        self.program = program

    def shell(self, argv, **kwargs):
        if argv[0] == self.program:
            raise TransportError("cannot reach 'local': connection refused", "is the board on?")
        return super().shell(argv, **kwargs)


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def fake_python(folder, version: str) -> str:
    """An executable that answers the version check like a Python ``version`` would."""
    path = folder / "python3"
    path.write_text(f"#!/bin/sh\necho {version}\n")
    path.chmod(0o755)
    return str(path)


def test_healthy_local_device():
    checks = diagnose(LocalTransport())
    assert [c.name for c in checks] == ["reachable", "workdir", "free space", "python",
                                        "numpy", "onnxruntime", "ai_edge_litert"]
    assert all(c.ok and c.fix is None for c in checks if c.name != "free space")
    found = by_name(checks)
    assert "cores" in found["reachable"].detail and "(created)" in found["workdir"].detail
    assert os.path.isdir(os.environ["AIOT_LOCAL_WORKDIR"])
    assert os.listdir(os.environ["AIOT_LOCAL_WORKDIR"]) == []  # the probe file is gone
    assert found["python"].detail.startswith("Python 3.")


def test_workdir_under_a_regular_file_cannot_be_created(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("AIOT_LOCAL_WORKDIR", str(blocker / "device"))
    found = by_name(diagnose(LocalTransport()))
    assert not found["workdir"].ok and "cannot create" in found["workdir"].detail
    assert "AIOT_LOCAL_WORKDIR" in found["workdir"].fix
    assert "free space" not in found  # nothing to measure where there is no folder
    assert found["python"].ok  # the rest still runs


def test_workdir_that_is_a_file(tmp_path):
    (tmp_path / "device").write_text("")  # conftest points AIOT_LOCAL_WORKDIR here
    found = by_name(diagnose(LocalTransport()))
    assert not found["workdir"].ok and "is a file" in found["workdir"].detail


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through chmod 0o500")
def test_read_only_workdir(tmp_path, monkeypatch):
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    monkeypatch.setenv("AIOT_LOCAL_WORKDIR", str(folder))
    try:
        workdir = by_name(diagnose(LocalTransport()))["workdir"]
    finally:
        folder.chmod(0o700)
    assert not workdir.ok and "not writable" in workdir.detail


def test_missing_python_fails_and_skips_runtimes(tmp_path):
    checks = diagnose(OtherPython(str(tmp_path / "no" / "python3")))
    found = by_name(checks)
    assert not found["python"].ok and "does not run" in found["python"].detail
    assert found["python"].fix and "numpy" not in found
    assert found["workdir"].ok


def test_old_python_fails(tmp_path):
    python = by_name(diagnose(OtherPython(fake_python(tmp_path, "3.8.10"))))["python"]
    assert not python.ok and "Python 3.8.10" in python.detail and "3.9 or newer" in python.detail


def test_phone_without_python_says_to_set_it_up(tmp_path):
    checks = diagnose(OtherPython(str(tmp_path / "python3"), kind="adb"))
    python = by_name(checks)["python"]
    assert not python.ok and "no Python" in python.detail
    assert python.fix.startswith("aiot devices setup ") and "--native" in python.fix
    assert [c.name for c in checks if not c.ok] == ["python"]  # this x86_64 host: no phone checks


def test_missing_runtime_says_how_to_install(monkeypatch):
    monkeypatch.setattr(doctor, "RUNTIMES", {**doctor.RUNTIMES, "aiot_no_such_runtime": "no-such-runtime"})
    found = by_name(diagnose(LocalTransport()))
    missing = found["aiot_no_such_runtime"]
    assert not missing.ok and "ModuleNotFoundError" in missing.detail
    assert missing.fix == "pip install no-such-runtime"
    assert found["numpy"].ok


def test_low_free_space_warns(monkeypatch):
    monkeypatch.setattr("aiot.host.devices.checks.LOW_SPACE_MB", 10**12)
    space = by_name(diagnose(LocalTransport()))["free space"]
    assert space.ok and space.status == "warn" and space.detail.startswith("only ") and space.fix


def test_unreachable_device_is_one_failed_check():
    (check,) = diagnose(DropsAt("sh"))
    assert check == Check("reachable", False, "cannot reach 'local': connection refused", "is the board on?")


def test_connection_lost_midway_stops_the_checks():
    checks = diagnose(DropsAt("df"))
    assert [c.name for c in checks] == ["reachable", "workdir", "reachable"]
    assert not checks[-1].ok and checks[-1].detail.startswith("connection lost during the checks")


def test_df_outputs():
    gnu = """Filesystem     1024-blocks      Used Available Capacity Mounted on
/dev/root        30502492  10293412  18868788      36% /"""
    toybox = """Filesystem      1K-blocks    Used Available Use% Mounted on
/dev/block/dm-46 113489792 57263660  56095060  51% /data"""
    spaces = """Filesystem 1024-blocks Used Available Capacity Mounted on
my disk 1000 400 600 40% /mnt/my disk"""
    assert parse_df(gnu) == 18868788 and parse_df(toybox) == 56095060 and parse_df(spaces) == 600
    assert parse_df("df: /nope: No such file or directory") is None and parse_df("") is None


def test_python_version_line():
    assert parse_python_version("3.11.7\n") == (3, 11, 7)
    assert parse_python_version("warning: something\n3.9.2") == (3, 9, 2)
    assert parse_python_version("Python 3.11") is None
