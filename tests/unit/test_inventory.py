import pytest

from aiot.core.errors import UnknownName, UsageError
from aiot.host.devices import inventory
from aiot.host.devices.inventory import DeviceEntry, InventoryError
from aiot.host.devices.resolve import open_transport, resolve_name

PI = DeviceEntry(name="pi4", transport="ssh", host="10.0.0.7", port=2222, user="pi", workdir="/home/pi/aiot",
                 labels={"soc": "BCM2711"})
PHONE = DeviceEntry(name="pixel", transport="adb", serial="1A2B3C", workdir="/data/local/tmp/aiot")


def test_add_load_remove_round_trip():
    inventory.add(PI)
    inventory.add(PHONE)
    assert inventory.load() == {"pi4": PI, "pixel": PHONE}
    assert inventory.remove("pi4") == PI and list(inventory.load()) == ["pixel"]


def test_duplicates_need_replace():
    inventory.add(PI)
    with pytest.raises(UsageError, match="already in the inventory"):
        inventory.add(PI)
    inventory.add(DeviceEntry(**{**PI.__dict__, "port": 22}), replace=True)
    assert inventory.load()["pi4"].port == 22


@pytest.mark.parametrize("bad, match", [
    (dict(name="local"), "invalid device name"), (dict(name="a b"), "invalid device name"),
    (dict(transport="usb"), "unknown transport"), (dict(host=None), "needs --host"),
    (dict(workdir="aiot"), "absolute"), (dict(port=70000), "out of range"),
])
def test_invalid_entries_are_refused(bad, match):
    with pytest.raises(UsageError, match=match):
        DeviceEntry(**{**PI.__dict__, **bad}).validate()


def test_corrupt_inventory_is_a_clear_error(tmp_path, monkeypatch):
    path = tmp_path / "devices.toml"
    path.write_text("[devices.x\ntransport=")
    with pytest.raises(InventoryError, match="unreadable"):
        inventory.load()
    path.write_text('[devices.x]\ntransport = "ssh"\nworkdir = "/w"\nbogus = 1\n')
    with pytest.raises(InventoryError, match="device 'x'"):
        inventory.load()


def test_remove_unknown():
    with pytest.raises(UnknownName):
        inventory.remove("ghost")


def test_device_choice_precedence(monkeypatch):
    inventory.add(PHONE)
    assert resolve_name(None) == "local"
    monkeypatch.setenv("ANDROID_SERIAL", "1A2B3C")
    assert resolve_name(None) == "pixel"
    monkeypatch.setenv("AIOT_DEVICE", "pi4")
    assert resolve_name(None) == "pi4"
    assert resolve_name("local") == "local"


def test_unknown_device_lists_candidates():
    inventory.add(PI)
    with pytest.raises(UnknownName) as info:
        open_transport("pi5")
    assert "pi4" in info.value.close
