"""Placement on real runs on ``local``: a ``.tflite`` whose CUMSUM XNNPACK cannot take is
recorded, marked in the run table and named in ``results show``; tiny_cnn in ONNX Runtime and
ExecuTorch carries its placement, fully delegated; the gate fails the model's next version
where an operator falls back, whatever the latency thresholds allow; and a native tool's
"Replacing N out of M" line becomes the run's placement."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.helpers import fast

pytest.importorskip("ai_edge_litert")

FAST = fast(3, warmup_runs=1)


def test_a_partly_delegated_tflite_is_recorded_marked_and_named(cli, placement_tflites):
    partly, _fully = placement_tflites
    result = cli("run", "-m", str(partly), *FAST)
    assert "tflite‡" in result.stdout
    assert "‡ partly delegated: xnnpack left CUMSUM ×1 outside" in result.stdout
    (record,) = cli.json("results", "list")
    placement = record["result"]["placement"]
    assert placement["engine"] == "xnnpack" and placement["outside"] == {"CUMSUM": 1}
    # CONV_2D, CUMSUM, MEAN, FULLY_CONNECTED: XNNPACK's two partitions around CUMSUM
    counts = (placement["total_nodes"], placement["delegated_nodes"], placement["partitions"])
    assert counts == (4, 3, 2)
    assert placement["complete"] is False and "is_fully_accelerated: False" in placement["source"]
    shown = " ".join(cli("results", "show", record["id"][:8]).stdout.split())
    assert ("placement │ partly delegated: xnnpack took 3 of 4 operators in 2 partitions; "
            "outside: CUMSUM ×1") in shown.replace("│ │", "")


def test_tiny_cnn_in_onnx_and_executorch_carry_a_full_placement(cli):
    pytest.importorskip("onnxruntime")
    from aiot.core import toolchains

    formats = "onnx,executorch" if toolchains.installed("executorch") else "onnx"
    records = cli.json("sweep", "-m", "tiny_cnn", "-f", formats, "--threads", "1", *FAST)
    by_format = {r["format"]: r["result"]["placement"] for r in records}
    onnx = by_format["onnx"]
    assert (onnx["engine"], onnx["source"], onnx["complete"]) == ("CPUExecutionProvider",
                                                                   "session profile", True)
    nodes = onnx["by_engine"]["CPUExecutionProvider"]
    assert onnx["total_nodes"] == onnx["delegated_nodes"] == nodes > 0
    if "executorch" in by_format:  # the converter lowers all of tiny_cnn to XNNPACK
        pte = by_format["executorch"]
        assert (pte["engine"], pte["source"], pte["complete"]) == ("xnnpack", "program", True)
        assert pte["partitions"] >= 1 and pte["outside"] == {}
    table = cli("results", "list").stdout
    assert "‡" not in table and "partly delegated" not in table
    for record in records:
        shown = cli("results", "show", record["id"][:8]).stdout
        assert "fully delegated: " in shown


def test_the_gate_fails_the_version_where_an_operator_falls_back(cli, placement_tflites, tmp_path):
    partly, fully = placement_tflites
    (base,) = cli.json("run", "-m", str(fully), *FAST)
    (cand,) = cli.json("run", "-m", str(partly), *FAST)
    assert base["model"] == cand["model"] == "net.tflite"  # one model's two versions
    # latency may move as it likes: only the placement fails the pair
    result = cli("results", "compare", base["id"], cand["id"], "--fail-on", "median:100000%",
                 code=1)
    said = " ".join(result.stderr.split())  # the terminal's width folds the line
    assert f"net.tflite · tflite · 1t @ local (B {cand['id'][:8]}" in said
    assert ("placement: 1 more operator(s) fall back outside xnnpack: CUMSUM +1 "
            "(A 0 outside, B 1)") in said
    assert "gate failed" in result.stderr.splitlines()[-1]
    cli("results", "compare", cand["id"], base["id"], "--fail-on", "median:100000%")  # fixed


def test_a_native_tools_delegation_line_is_the_runs_placement(cli, tmp_path):
    pytest.importorskip("litert_torch")
    recorded = (Path(__file__).parents[1] / "unit" / "fixtures" / "native" / "benchmark_model"
                / "2026-07-logcat-xnnpack-792-of-836.txt")
    tool = tmp_path / "benchmark_model"  # a stand-in printing a phone's recorded output
    tool.write_text(f'#!/bin/sh\ncat "{recorded}"\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    (record,) = cli.json("run", "-m", "tiny_cnn", "-f", "tflite", "--native", "benchmark_model",
                         "--binary", str(tool), "--min-runs", "3")
    placement = record["result"]["placement"]
    assert (placement["engine"], placement["total_nodes"], placement["outside_nodes"]) == (
        "xnnpack", 836, 44)
    assert placement["complete"] is False and placement["partitions"] == 21
    shown = " ".join(cli("results", "show", record["id"][:8]).stdout.split())
    assert "partly delegated: xnnpack took 792 of 836 operators in 21 partitions" in shown
