"""BiBench's hardware procedure end to end on the emulated arm64 board, beside this host.

``aiot paper bibench`` on the smallest variants (CIFAR-size, 1 thread, a few iterations) on an
emulated aarch64 board and on ``local``: the table has the paper's columns, the board is
labelled emulated, what the board cannot run (LCE has no aarch64 wheel, no daBNN binary
configured) is a skip with its reason, and every speed-up and OM_infer printed is the one the
stored records give. Timings under emulation mean nothing; the procedure is tested.

The grid here has one network, ResNet18: each network is three conversions (FP32, BNN,
ReAct) and a run per device, and the other rows add no behaviour the first lacks. The
grid's full shape (every network and thread count, daBNN's "–" for VGG-Small), the row
order and the averaging of OM_infer over several pairs are tests/unit/test_bibench_hw.py's,
on planned cells; VGG-like binarized networks converting to LCE, tests/converters'
(test_bibench_deploy.py's tiny_vgg).
"""

import json
import math

import pytest

from aiot.host.emulator import arm64
from aiot.host.engine import bibench_hw
from tests.helpers import fast

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(arm64.missing_tools()),
                       reason=f"needs Debian packages {arm64.missing_tools()} (scripts/bootstrap.sh installs them)"),
]

#: One timed run, no warm-up: under qemu one ResNet18 inference takes ~20 s, and no timing is judged.
FAST = fast(1, warmup_runs=0)
ARCHS = ["ResNet18"]


def test_bibench_grid_on_the_emulated_board_and_this_host(cli, monkeypatch):
    """The grid as the paper's tables (text), then the same command resumed as JSON: nothing is
    measured again, and every number printed is the stored records'. This also covers the
    local-only grid of tests/cli/test_cli_paper_bibench.py (on one network), which runs where
    this cannot."""
    monkeypatch.setitem(bibench_hw.SIZES, "cifar", ("resnet18_cifar",))
    args = ("paper", "bibench", "--device", "bibpi,local", "--size", "cifar", "--threads", "1", *FAST)
    cli.json("emulator", "start", "ssh", "--arch", "arm64", "--name", "bibpi")
    try:
        text = cli(*args).stdout
        again = cli(*args, "--json")
    finally:
        cli("emulator", "stop", "bibpi")
    for title in ("BiBench hardware inference (ms) · local", "BiBench hardware inference (ms) · bibpi",
                  "OM_infer per device", "FP32", "Larq BNN", "ReAct", "daBNN FP32", "daBNN BNN",
                  "ResNet18", "no benchmark_single_model binary configured for local"):
        assert title in text, title
    assert "×" in text  # a speed-up beside each BNN that ran
    assert "resuming BiBench sweep" in again.stderr and "runs already done" in again.stderr
    result = json.loads(again.stdout)
    rows = result["rows"]
    assert [(r["device"], r["threads"], r["arch"]) for r in rows] == [
        (d, 1, a) for d in ("bibpi", "local") for a in ARCHS]
    assert result["devices"]["bibpi"]["emulated"] and not result["devices"]["local"]["emulated"]
    assert all(set(r["cells"]) == {"fp32", "bnn", "react", "dabnn_fp32", "dabnn_bnn"} for r in rows)
    records = {r["id"]: r for r in cli.json("results", "list")}
    for row in rows:
        cells = row["cells"]
        assert cells["fp32"]["status"] == "ok", (row["device"], cells["fp32"])
        assert cells["dabnn_bnn"]["status"] == "skipped"
        assert "no benchmark_single_model binary configured" in cells["dabnn_bnn"]["reason"]
        if row["device"] == "bibpi":  # no LCE runtime for aarch64: said, not hidden
            assert cells["bnn"]["status"] == "skipped" and "lce_benchmark_model" in cells["bnn"]["reason"]
            continue
        for key in ("bnn", "react"):  # local: the lce toolchain's runtime
            fp32, binary = records[cells["fp32"]["record_id"]], records[cells[key]["record_id"]]
            assert binary["status"] == "ok" and binary["spec"]["binarize"] in ("bnn", "reactnet")
            assert cells[key]["speedup"] == pytest.approx(fp32["median_ms"] / binary["median_ms"])
    scores = {(s["device"], s["algorithm"], s["format"]): s for s in result["om_infer"]}
    assert set(scores) == {("local", "bnn", "lce"), ("local", "reactnet", "lce")}
    for (_, algorithm, _), score in scores.items():
        key = "bnn" if algorithm == "bnn" else "react"
        local = [r["cells"] for r in rows if r["device"] == "local"]
        speedups = [c[key]["speedup"] for c in local]
        sizes = [records[c["fp32"]["record_id"]]["size_bytes"] / records[c[key]["record_id"]]["size_bytes"]
                 for c in local]
        assert score["pairs"] == len(ARCHS)
        assert score["speedup"] == pytest.approx(sum(speedups) / len(ARCHS))
        assert score["compression"] == pytest.approx(sum(sizes) / len(ARCHS))
        assert score["om_infer"] == pytest.approx(
            math.sqrt((score["speedup"] ** 2 + score["compression"] ** 2) / 2))
