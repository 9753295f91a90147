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


def _fake_toolchain(root, name: str) -> None:
    """An "installed" environment of ``name`` whose interpreter is this one (a real process)."""
    import sys

    env = toolchains.env_dir(toolchains.TOOLCHAINS.get(name))
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to(sys.executable)
    (env / toolchains.MARKER).write_text(json.dumps({"name": name}), encoding="utf-8")


def test_an_interpreter_killed_by_a_signal_is_named_by_it(tmp_path, monkeypatch):
    monkeypatch.setenv("AIOT_TOOLCHAINS_DIR", str(tmp_path))
    _fake_toolchain(tmp_path, "lce")
    crash = ("import os, signal, sys; print('reading', file=sys.stderr); "
             "os.kill(os.getpid(), signal.SIGSEGV)")
    with pytest.raises(toolchains.ToolchainError) as info:
        toolchains.run_python("lce", ["-c", crash], what="probe")
    assert info.value.message == ("probe in the 'lce' toolchain failed: killed by SIGSEGV; "
                                  "it last said: reading")
    with pytest.raises(toolchains.ToolchainError, match=r"failed: killed by SIGKILL: out of "
                                                         r"memory, or killed$"):
        toolchains.run_python("lce", ["-c", "import os; os.kill(os.getpid(), 9)"], what="probe")
    with pytest.raises(toolchains.ToolchainError, match=r"failed: boom$"):  # an exit: its words
        toolchains.run_python("lce", ["-c", "import sys; sys.exit('boom')"], what="probe")
