"""Warm toolchain interpreters: a command forked from a warm server is what a fresh
interpreter would have been (output, exit status, signal, working directory, environment,
``-m`` from the working directory), the server is reused, and a stop or a timeout ends it."""

import os
import sys
import threading
import time

import pytest

from aiot.core import children, toolchains, warm_toolchain

#: A stand-in interpreter (this one) and a cheap module to preload.
PY, WARMTH = sys.executable, warm_toolchain.Warmth(("json",), "import json; json.warmed = True")


@pytest.fixture(autouse=True)
def _fresh_servers():
    warm_toolchain.close_all()
    children.allow()  # an earlier test's stop must not refuse these commands
    yield
    warm_toolchain.close_all()
    children.allow()


def _run(argv, cwd=None, env=None, timeout=60):
    return warm_toolchain.run(PY, WARMTH, argv, cwd=cwd, env=env or dict(os.environ),
                              timeout=timeout)


def test_a_command_is_a_fresh_interpreter_forked_from_one_reused_server(tmp_path):
    code = ("import os, sys; print(os.getcwd(), os.environ['AIOT_X'], sys.argv[1:]); "
            "print('to stderr', file=sys.stderr); print(os.getppid())")
    first = _run(["-c", code, "a", "b"], cwd=tmp_path, env={**os.environ, "AIOT_X": "1"})
    assert first.returncode == 0 and first.stderr == "to stderr\n"
    line, server = first.stdout.splitlines()
    assert line == f"{tmp_path} 1 ['a', 'b']"
    second = _run(["-c", "import json, os; print(os.getppid(), json.warmed)"],
                  env={**os.environ, "AIOT_X": "2"})
    assert second.stdout.split() == [server, "True"]  # the same warmed server's child
    assert server != str(os.getpid())


def test_exit_statuses_and_signals_are_the_interpreters(tmp_path):
    assert _run(["-c", "import sys; sys.exit(3)"]).returncode == 3
    said = _run(["-c", "import sys; sys.exit('boom')"])
    assert (said.returncode, said.stderr) == (1, "boom\n")
    raised = _run(["-c", "raise ValueError('bad')"])
    assert raised.returncode == 1 and raised.stderr.rstrip().endswith("ValueError: bad")
    killed = _run(["-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    assert killed.returncode == -11
    assert _run(["-c", "print('alive')"]).stdout == "alive\n"  # the server outlived its child


def test_a_script_and_a_module_run_as_python_would_run_them(tmp_path):
    (tmp_path / "tool.py").write_text("import sys\nprint(__name__, sys.argv[1:])\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "__main__.py").write_text("import sys\nprint('pkg', __name__, sys.argv[1:])\n")
    assert _run(["-P", str(tmp_path / "tool.py"), "x"]).stdout == "__main__ ['x']\n"
    assert _run(["-m", "pkg", "y"], cwd=tmp_path).stdout == "pkg __main__ ['y']\n"


def test_a_server_busy_with_another_command_lets_the_next_run_cold():
    slow = threading.Thread(target=_run, args=(["-c", "import time; time.sleep(3)"],))
    slow.start()
    time.sleep(1)
    try:
        other = _run(["-c", "import os; print(os.getppid())"])
        assert other.stdout.strip() == str(os.getpid())  # a child of this process: cold
    finally:
        slow.join()


def test_a_stop_ends_the_command_in_flight_and_says_so():
    result = {}

    def sleeper():
        try:
            _run(["-c", "import time; time.sleep(60)"])
        except children.Stopped as exc:
            result["stopped"] = exc
    worker = threading.Thread(target=sleeper)
    started = time.monotonic()
    worker.start()
    time.sleep(1.5)
    assert children.stop_all() == 1
    worker.join(10)
    assert "stopped" in result and time.monotonic() - started < 10
    children.allow()
    assert _run(["-c", "print('again')"]).stdout == "again\n"  # a new server


def test_a_command_past_its_timeout_is_killed_and_said_by_the_toolchain(tmp_path, monkeypatch):
    monkeypatch.setenv("AIOT_TOOLCHAINS_DIR", str(tmp_path))
    fake = toolchains.Toolchain("fake", "test", ("pkg==1",), (), WARMTH)
    monkeypatch.setitem(toolchains.TOOLCHAINS._entries, "fake", fake)
    env = toolchains.env_dir(fake)
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to(sys.executable)
    (env / toolchains.MARKER).write_text('{"name": "fake"}', encoding="utf-8")
    assert toolchains.run_python("fake", ["-c", "print('warm')"]) == "warm\n"
    with pytest.raises(toolchains.ToolchainError, match=r"probe in the 'fake' toolchain ran over 1 s"):
        toolchains.run_python("fake", ["-c", "import time; time.sleep(30)"], what="probe",
                              timeout=1)
    assert toolchains.run_python("fake", ["-c", "print('again')"]) == "again\n"


def test_off_switch_runs_every_command_cold(monkeypatch):
    monkeypatch.setenv(warm_toolchain.ENV, "0")
    assert _run(["-c", "import os; print(os.getppid())"]).stdout.strip() == str(os.getpid())
