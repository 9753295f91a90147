"""BiBench's Tables 17–20 as packaged: every number, in the paper's reading order, is the
number the seed's text of the paper prints, and devices match the paper's hardware only by
name (no near misses)."""

import re
from pathlib import Path

import pytest

from aiot.host.engine.bibench_paper import paper_hardware, paper_ms, source, tables

SEED = Path(__file__).resolve().parents[2].parent / "shared" / "seeds" / "bibench.txt"


def _seed_numbers() -> list[float]:
    """The decimal numbers of the seed from Table 17's caption to the table after Table 20."""
    if not SEED.exists():
        pytest.skip(f"the seeds are not beside this clone ({SEED})")
    text = SEED.read_text(encoding="utf-8")
    start, end = text.index("Table 17: Int"), text.index("CIFAR10-Res18")
    return [float(t) for t in re.findall(r"\d+\.\d+", text[start:end])]


def _reading_order(data: dict) -> list[float]:
    """The packaged values in the order the seed's text prints them: Tables 17 and 19 print
    one line per thread count (each column's three architectures, then daBNN's), Tables 18
    and 20 one line per architecture (its five columns)."""
    archs, values = data["architectures"], []
    for device in data["devices"].values():
        for row in device["threads"].values():
            if device["layout"] == "by-threads":
                for index in range(len(data["column_order"])):
                    values += [row[a][index] for a in archs if row[a][index] is not None]
            else:
                for arch in archs:
                    values += [v for v in row[arch] if v is not None]
    return values


def test_packaged_tables_are_the_papers_numbers_in_order():
    assert _reading_order(tables()) == _seed_numbers()


def test_the_tables_name_their_source_and_cover_the_papers_grid():
    data = tables()
    assert "BiBench" in source() and "Tables 17-20" in source()
    assert len(data["devices"]) == 14
    assert [d["table"] for d in data["devices"].values()] == [17] * 4 + [18] * 4 + [19] * 4 + [20] * 2
    # 16 threads only on Apple silicon; daBNN only at 1 thread and only for the ResNets
    for name, device in data["devices"].items():
        assert sorted(map(int, device["threads"])) == ([1, 2, 4, 8, 16] if "Apple" in name
                                                        else [1, 2, 4, 8])
        for threads, row in device["threads"].items():
            has_dabnn = threads == "1" and "Apple" not in name
            for arch, values in row.items():
                assert (values[3] is not None) == (has_dabnn and arch != "VGG-Small")
    assert paper_ms("Kirin 970", 1, "ResNet18", "fp32") == 716.427
    assert paper_ms("Raspberry Pi 4B", 1, "ResNet34", "dabnn_bnn") == 209.276
    assert paper_ms("Apple M1 Max", 16, "VGG-Small", "react") == 15.311
    assert paper_ms("Apple M1", 1, "ResNet18", "dabnn_bnn") is None
    assert paper_ms("Kirin 990", 16, "ResNet18", "fp32") is None


@pytest.mark.parametrize(("facts", "expected"), [
    ({"soc": "lahaina", "soc_name": "Snapdragon 888"}, "Snapdragon 888"),
    ({"soc": "SM8350"}, "Snapdragon 888"),
    ({"soc_name": "Snapdragon 855", "soc": "msmnile"}, None),  # not the paper's 855+
    ({"soc_name": "Kirin 9000", "soc": "kirin9000"}, None),  # not the paper's 9000E
    ({"soc": "kirin990"}, "Kirin 990"),
    ({"soc": "mt6983", "soc_name": "Dimensity 9000"}, "Dimensity 9000"),
    ({"model": "Raspberry Pi 4 Model B Rev 1.4", "soc": "bcm2711"}, "Raspberry Pi 4B"),
    ({"model": "Raspberry Pi 3 Model B Plus Rev 1.3"}, "Raspberry Pi 3B+"),
    ({"cpu_model": "Apple M1"}, "Apple M1"),
    ({"cpu_model": "Apple M1 Max"}, "Apple M1 Max"),
    ({"cpu_model": "Apple M1 Pro"}, None),
    ({"soc": "aiot-arm64", "model": "qemu"}, None),
    ({}, None),
])
def test_devices_match_the_papers_hardware_by_name_only(facts, expected):
    assert paper_hardware(facts) == expected
