"""Users' code in aiot's process: a factory that exits, crashes, prints or hangs.

A factory (``file.py:factory``, ``package.module:factory``) is imported and called in a
child process, so each of these is one ``error:`` line (exit 2) and never ends aiot, makes it
"succeed" with nothing measured, or corrupts ``--json``. Each case runs the real ``aiot``
command as a process of its own: a factory's ``os._exit`` in the test's own process would end
the test run, not show the fault.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.faults.conftest import count_records

pytest.importorskip("torch")
pytest.importorskip("cloudpickle")

#: The user's file: one good factory and one per way a factory can go wrong.
EVIL = textwrap.dedent("""
    import os
    import sys
    import time

    import torch
    from torch import nn

    from evil_helpers import WIDTH  # the user's own sibling module, imported in the child only

    print("evil.py imported")  # on stdout, as users' code does


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, WIDTH)

        def forward(self, x):
            return torch.relu(self.fc(x))


    def make():
        print("building Net")
        sys.stdout.flush()
        os.write(1, b"straight to fd 1\\n")
        return Net(), torch.randn(1, 4)


    def exits():
        sys.exit(3)


    def hard_exit():
        os._exit(0)


    def crashes():
        import ctypes

        ctypes.string_at(0)  # SIGSEGV


    def hangs():
        time.sleep(3600)


    def reads_stdin():
        return input("width? ")
""")


@pytest.fixture
def evil(tmp_path) -> Path:
    (tmp_path / "evil_helpers.py").write_text("WIDTH = 3\n")
    (tmp_path / "evil.py").write_text(EVIL)
    return tmp_path / "evil.py"


def aiot(*args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """The real ``aiot`` CLI in a process of its own (this test's isolated folders)."""
    return subprocess.run([sys.executable, "-m", "aiot", *args], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def one_line(done: subprocess.CompletedProcess, *fragments: str) -> None:
    """Exit 2 with exactly one ``error:`` line naming ``fragments``, no traceback, stdout empty."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    assert done.stdout.strip() == "", done.stdout  # nothing the user's code printed leaks out


@pytest.mark.slow
@pytest.mark.fault("a factory calls sys.exit(3)")
def test_a_factory_calling_sys_exit_is_one_line(evil):
    one_line(aiot("convert", f"{evil}:exits", "-f", "onnx", "--json"),
             "evil.py:exits called sys.exit(3)")


@pytest.mark.slow
@pytest.mark.fault("a factory calls os._exit(0)")
def test_a_factory_calling_os_exit_0_does_not_end_aiot_successfully(evil):
    done = aiot("convert", f"{evil}:hard_exit", "-f", "onnx", "--json")
    one_line(done, "evil.py:hard_exit ended the process (exit status 0", "last output: evil.py imported")
    assert not list(Path(os.environ["AIOT_RESULTS_DIR"]).glob("**/*.onnx"))


@pytest.mark.slow
@pytest.mark.fault("a factory crashes the interpreter (SIGSEGV)")
def test_a_factory_that_crashes_is_one_line(evil):
    one_line(aiot("models", "info", f"{evil}:crashes", "--json"), "evil.py:crashes crashed (SIGSEGV)")


@pytest.mark.slow
@pytest.mark.fault("a factory hangs")
def test_a_factory_that_hangs_times_out_in_one_line(evil):
    started = time.monotonic()
    done = aiot("convert", f"{evil}:hangs", "-f", "onnx", AIOT_FACTORY_TIMEOUT_S="8")
    one_line(done, "evil.py:hangs did not return within 8 s")
    assert time.monotonic() - started < 120
    assert "AIOT_FACTORY_TIMEOUT_S=16" in done.stderr


@pytest.mark.slow
@pytest.mark.fault("a factory waits for input")
def test_a_factory_reading_stdin_gets_end_of_file(evil):
    one_line(aiot("convert", f"{evil}:reads_stdin", "-f", "onnx"), "evil.py:reads_stdin raised EOFError")


@pytest.mark.slow
@pytest.mark.fault("a factory prints to stdout under --json")
def test_what_a_factory_prints_never_reaches_json_output(evil):
    done = aiot("convert", f"{evil}:make", "-f", "onnx", "--json")
    assert done.returncode == 0, done.stderr
    converted = json.loads(done.stdout)  # stdout is exactly aiot's JSON
    assert converted["parity"]["ok"] and converted["artifact"].endswith(".onnx")
    assert "evil.py imported" not in done.stdout + done.stderr
    # -v shows what the factory printed, on stderr, and stdout is still JSON.
    loud = aiot("-v", "models", "info", f"{evil}:make", "--json")
    assert loud.returncode == 0, loud.stderr
    assert json.loads(loud.stdout)["inputs"][0]["shape"] == [1, 4]
    assert "building Net" in loud.stderr and "straight to fd 1" in loud.stderr


@pytest.mark.slow
@pytest.mark.fault("a module:factory reference exits and prints")
def test_a_module_factory_runs_in_the_child_too(tmp_path):
    package = tmp_path / "lib" / "mypkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("print('mypkg imported')\n")
    (package / "nets.py").write_text(textwrap.dedent("""
        import os

        import torch
        from torch import nn

        from .layers import Block


        def build():
            return nn.Sequential(Block(), nn.Linear(6, 2)), torch.randn(1, 6)


        def vanish():
            os._exit(7)
    """))
    (package / "layers.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn


        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(6, 6)

            def forward(self, x):
                return torch.tanh(self.fc(x))
    """))
    path = os.pathsep.join([str(tmp_path / "lib"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    done = aiot("convert", "mypkg.nets:build", "-f", "onnx", "--json", PYTHONPATH=path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["parity"]["ok"] and "mypkg imported" not in done.stdout
    one_line(aiot("convert", "mypkg.nets:vanish", "-f", "onnx", "--json", PYTHONPATH=path),
             "mypkg.nets:vanish ended the process (exit status 7")


@pytest.mark.slow
@pytest.mark.fault("a sweep of a zoo model next to an os._exit(0) factory")
def test_a_sweep_next_to_an_exiting_factory_does_not_succeed_silently(evil, fault):
    before = count_records()
    done = aiot("sweep", "-d", "local", "-m", f"tiny_cnn,{evil}:hard_exit", "-f", "onnx", "--threads", "1",
                "--min-runs", "3", "--min-s", "0", "--warmup-min-s", "0", "--json")
    one_line(done, "evil.py:hard_exit ended the process (exit status 0")
    # Refused before any run: nothing measured, nothing left pending.
    fault.records_lost(before, count_records())
    assert count_records() == before == 0
