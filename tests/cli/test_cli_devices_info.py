"""How ``aiot devices info`` shows thermal zones, batteries and Android facts."""

from rich.console import Console

from aiot.host.cli.devices import battery_summary, render_info, thermal_summary


def zone(n: int, kind: str, temp: float | None) -> dict:
    return {"zone": f"thermal_zone{n}", "type": kind, "temp_c": temp}


def test_thermal_summary_lists_few_zones_and_sums_up_many():
    assert thermal_summary([]) == ""
    assert thermal_summary([zone(0, "cpu-thermal", 48.7), zone(1, None, None)]) == "cpu-thermal 48.7 °C"
    many = [zone(i, f"z{i}", 30.0 + i) for i in range(6)]
    assert thermal_summary(many) == "6 zones, hottest z5 35.0 °C"


def test_battery_summary_leaves_out_usb():
    supplies = [{"name": "battery", "type": "Battery", "capacity_pct": 85, "status": "Discharging", "temp_c": 31.2},
                {"name": "usb", "type": "USB", "capacity_pct": None, "status": None, "temp_c": None}]
    assert battery_summary(supplies) == "battery: 85%, Discharging, 31.2 °C"
    assert battery_summary([]) == ""


def test_info_table_shows_phone_facts():
    facts = {"name": "pixel", "transport": "adb", "model": "Pixel 7", "manufacturer": "Google",
             "soc": "GS201", "soc_manufacturer": "Google", "abi": "arm64-v8a", "distribution": "Android 14",
             "thermal_zones": [zone(0, "BIG", 43.5)], "power_supplies": [],
             "agent": {"runtimes": {}, "python": "3.11", "agent_version": "0.1.0"}}
    console = Console(width=200, record=True)
    console.print(render_info(facts))
    text = console.export_text()
    assert "Google Pixel 7" in text and "Google GS201" in text and "BIG 43.5 °C" in text
    assert "battery" not in text  # no row for an empty section
