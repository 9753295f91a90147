"""Real-hardware tests: they run only when a device is named, e.g.

    AIOT_TEST_DEVICE=pi4 .venv/bin/python -m pytest -m device tests/hardware

The device comes from the user's own inventory (read here, before each test isolates
``AIOT_INVENTORY``); ADB phones are reached through the user's adb server.
"""

from __future__ import annotations

import os

import pytest

from aiot.host.devices import inventory

NAMED = os.environ.get("AIOT_TEST_DEVICE")
_REAL_INVENTORY = inventory.inventory_path()


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="real hardware: name a device with AIOT_TEST_DEVICE=NAME")
    for item in items:
        if "device" in item.keywords and not NAMED:
            item.add_marker(skip)


@pytest.fixture
def real_device():
    """The named device's inventory entry, copied into the test's isolated inventory."""
    entries = inventory.load(_REAL_INVENTORY)
    if NAMED not in entries:
        pytest.fail(f"AIOT_TEST_DEVICE={NAMED} is not in {_REAL_INVENTORY}: add it with aiot devices add")
    inventory.add(entries[NAMED])
    return entries[NAMED]
