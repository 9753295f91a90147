"""The built wheel installs only the `aiot` name and carries every source package."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_FOLDERS = ["core", "host", "converters", "models", "device_agent"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        check=True, capture_output=True, text=True,
    )
    (path,) = out.glob("aiot-*.whl")
    return zipfile.ZipFile(path)


def test_only_aiot_at_top_level(wheel):
    top = {name.split("/")[0] for name in wheel.namelist()}
    assert {t for t in top if not t.endswith(".dist-info")} == {"aiot"}


def test_every_source_package_is_in_the_wheel(wheel):
    names = set(wheel.namelist())
    for folder in SOURCE_FOLDERS:
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.relative_to(ROOT).as_posix()
            assert f"aiot/{rel}" in names, f"{rel} missing from the wheel"


def test_agent_files_and_entry_point(wheel):
    names = set(wheel.namelist())
    assert "aiot/device_agent/__main__.py" in names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "aiot = aiot.host.cli.app:main" in wheel.read(entry).decode()
    assert not any(n.startswith("aiot/results/") or n.startswith("aiot/tests/") for n in names)
