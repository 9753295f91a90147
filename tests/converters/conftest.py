"""Converter tests that need a toolchain environment skip without it — except under
``make test`` (AIOT_REQUIRE_TOOLCHAINS=1), where bootstrap installed them and a missing one
is a failure."""

import os

import pytest


def need_toolchain(name: str) -> None:
    """Skip (or fail under AIOT_REQUIRE_TOOLCHAINS=1) when toolchain ``name`` is missing."""
    from aiot.host import toolchains

    if toolchains.installed(name) is None:
        if os.environ.get("AIOT_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail(f"the {name} toolchain is not installed: run aiot toolchains install {name}")
        pytest.skip(f"{name} toolchain not installed (aiot toolchains install {name})")
