"""Toolchain environments: keyed by requirements, installed atomically, errors in one line."""

import json

import pytest

from aiot.core import toolchains
from aiot.core.errors import UnknownName


def test_key_changes_with_requirements():
    a = toolchains.Toolchain("x", "", ("pkg==1",), ())
    b = toolchains.Toolchain("x", "", ("pkg==2",), ())
    assert a.key() != b.key() and len(a.key()) == 12


def test_unknown_toolchain_suggests_the_closest():
    with pytest.raises(UnknownName, match="lce"):
        toolchains.check_name("lcee")


def test_not_installed_is_reported_with_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setenv("AIOT_TOOLCHAINS_DIR", str(tmp_path))
    assert toolchains.python("lce") is None
    with pytest.raises(toolchains.ToolchainError) as info:
        toolchains.require_python("lce")
    assert info.value.hint == "run: aiot toolchains install lce"


@pytest.mark.slow
def test_a_failed_install_leaves_nothing_that_looks_usable(tmp_path, monkeypatch):
    monkeypatch.setenv("AIOT_TOOLCHAINS_DIR", str(tmp_path))
    broken = toolchains.Toolchain("broken", "test", ("aiot-no-such-package-d41d8cd9==0.0.1",), ())
    monkeypatch.setitem(toolchains.TOOLCHAINS._entries, "broken", broken)
    with pytest.raises(toolchains.ToolchainError, match="pip install failed") as info:
        toolchains.install("broken")
    assert "full log" in info.value.hint
    assert toolchains.installed("broken") is None
    assert not toolchains.env_dir(broken).exists()
    assert list(tmp_path.glob("broken-*.log"))


def test_cli_lists_toolchains_as_json(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("AIOT_TOOLCHAINS_DIR", str(tmp_path))
    result = cli("toolchains", "list", "--json")
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["lce"]["installed"] is False and "numpy<2" in rows["lce"]["requirements"]
    assert "executorch" in rows
