"""Which wheels a board's Python takes for the optional runtimes (no download, no device)."""

from __future__ import annotations

import pytest

from aiot.core.errors import UsageError
from aiot.host.devices.wheels import DevicePython, optional_requirements, platform_tags

PI = DevicePython("3.11", "aarch64", "2.36")


def test_executorch_brings_the_torch_it_links_against_once():
    both = optional_requirements(PI, ("torch", "executorch"))
    assert both.count("torch==2.10.0") == 1 and len(both) == len(set(both))
    assert "executorch==1.1.0" in both
    # ExecuTorch alone still brings its torch: its runtime cannot load without libtorch.
    assert "torch==2.10.0" in optional_requirements(PI, ("executorch",))


def test_optional_runtimes_exist_only_for_aarch64_and_by_name():
    with pytest.raises(UsageError, match="no executorch wheels are set up for x86_64"):
        optional_requirements(DevicePython("3.11", "x86_64", "2.36"), ("executorch",))
    with pytest.raises(UsageError, match="unknown optional runtime 'tensorflow'"):
        optional_requirements(PI, ("tensorflow",))


def test_platform_tags_go_from_the_board_glibc_down_to_manylinux2014():
    tags = platform_tags(PI)
    assert tags[0] == "manylinux_2_36_aarch64" and tags[-1] == "manylinux2014_aarch64"
    assert "manylinux_2_28_aarch64" in tags  # the ExecuTorch and torch wheels' tag
