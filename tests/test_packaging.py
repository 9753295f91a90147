"""The built wheel installs only the `aiot` name and carries every source package."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_FOLDERS = ["core", "host", "converters", "models", "device_agent"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    # Built from a private copy of the sources: an in-tree build shares build/ and the
    # egg-info with whatever else touches the checkout while the suite runs in parallel.
    src = tmp_path_factory.mktemp("src")
    for name in ["pyproject.toml", "README.md"]:
        shutil.copy2(ROOT / name, src / name)
    for folder in [*SOURCE_FOLDERS, "src"]:
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)],
        capture_output=True, text=True,
    )
    assert built.returncode == 0, f"pip wheel failed:\n{built.stdout[-3000:]}\n{built.stderr[-3000:]}"
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
