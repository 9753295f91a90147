"""Tests of the Android app: its Java core on this machine's JVM, and the offline APK build
(the ``app_env`` fixture of tests/conftest.py keeps the bullseye jars in the user's cache)."""

from __future__ import annotations

import os
import shutil

import pytest


def need_tools(*names: str) -> None:
    """Skip when a build tool is missing, or fail under AIOT_REQUIRE_TOOLCHAINS=1 (CI, after
    scripts/bootstrap.sh installed them)."""
    missing = [n for n in names if not shutil.which(n)]
    if not missing:
        return
    why = f"needs {', '.join(missing)} (scripts/bootstrap.sh installs them)"
    if os.environ.get("AIOT_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail(why)
    pytest.skip(why)
