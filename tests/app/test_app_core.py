"""The app's plain-Java core on this machine's JVM: relay, environment, timeout, a child killed
when the host goes away or the instrumentation is stopped (android_app/test/.../CoreTest.java).
"""

from __future__ import annotations

import subprocess

import pytest

from aiot.core.paths import source_root
from tests.app.conftest import need_tools

ROOT = source_root() / "android_app"
CASES = ("relay", "env_cwd", "many_lines", "timeout", "disconnect", "stop", "start_failed", "spec",
         "bad_spec", "chunks", "placeholders", "env_unset")


@pytest.fixture(scope="module")
def core_classes(tmp_path_factory):
    """The core and its test main compiled for Java 8 (the app's own level)."""
    need_tools("javac", "java")
    out = tmp_path_factory.mktemp("core-classes")
    sources = sorted(map(str, [*(ROOT / "java" / "org" / "aiot" / "agent" / "core").glob("*.java"),
                               *(ROOT / "test").rglob("*.java")]))
    done = subprocess.run(["javac", "--release", "8", "-encoding", "UTF-8", "-d", str(out), *sources],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.parametrize("case", CASES)
def test_core(core_classes, case):
    done = subprocess.run(["java", "-cp", str(core_classes), "org.aiot.agent.core.CoreTest", case],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == f"ok {case}", done.stdout + done.stderr


def test_core_has_no_android_imports():
    """The core must stay plain Java: it runs on this JVM, the glue is what needs Android."""
    for source in (ROOT / "java" / "org" / "aiot" / "agent" / "core").glob("*.java"):
        text = source.read_text(encoding="utf-8")
        assert "import android." not in text and "->" not in text, source.name  # no lambdas (dx)
