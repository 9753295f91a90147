"""``aiot paper bibench``'s procedure without devices: the grid it plans, and the table,
speed-ups and OM_infer it computes from stored records (the numbers here are made up and
say so: they test the arithmetic and the shape, not a device)."""

import math

import pytest

from aiot.host.engine.bibench_hw import COLUMNS, NOT_ON_DABNN, SINGLE_THREAD, grid, plan, scores
from aiot.host.engine.runs import MeasureParams
from aiot.host.store import RunRecord
from aiot.host.store.identity import this_host

_ids = iter(range(10_000))
LCE_AGENT = {"agent": {"runtimes": {"litert": "1.4", "lce": "0.16.0"}}, "cores": 8}


def rec(cell, ms, size, status="ok", created="2025-01-01T00:00:00+00:00"):
    """A stored record of a planned cell's request, as the executor writes it."""
    request = cell.request
    return RunRecord(id=f"{next(_ids):08d}{'0' * 24}", kind="latency", status=status,
                     created_at=created, spec=request.to_spec(), provenance={"host": {"id": this_host()}},
                     device=request.device, model=request.model, format=request.format,
                     threads=request.threads, size_bytes=size, median_ms=ms,
                     result={"stats_ms": {"median": ms}})


def _plan(infos, binaries=None, threads=None, size="cifar"):
    return plan(["pi"], size, threads, MeasureParams(), {"pi": infos}, {"pi": binaries or {}})


def test_the_grid_has_the_papers_shape():
    cells, skips = _plan({**LCE_AGENT, "cores": 16}, {"benchmark_single_model": "/b"})
    # 1, 2, 4, 8 and 16 threads (16 cores) × 3 networks × 5 columns
    assert len(cells) == 5 * 3 * len(COLUMNS)
    assert sorted({c.threads for c in cells}) == [1, 2, 4, 8, 16]
    assert {c.model for c in cells} == {"resnet18_cifar", "resnet34_cifar", "vgg_small"}
    absent = {(c.threads, c.model, c.column): c.absent for c in cells if c.absent}
    assert absent[(1, "vgg_small", "dabnn_bnn")] == NOT_ON_DABNN
    assert absent[(2, "resnet18_cifar", "dabnn_fp32")] == SINGLE_THREAD
    runs = [c for c in cells if c.request]
    # FP32/BNN/ReAct everywhere (15 × 3) and daBNN's two columns for two ResNets at 1 thread
    assert len(runs) == 45 + 4 and not skips
    dabnn = [c.request for c in runs if c.request.format == "dabnn"]
    assert {(r.native, r.threads, r.binarize, r.options) for r in dabnn} == {
        ("benchmark_single_model", 1, "bnn", None),
        ("benchmark_single_model", 1, None, (("precision", "fp32"),))}
    assert all(c.request.native is None for c in runs if c.request.format != "dabnn")


def test_missing_runtimes_and_binaries_are_skips_with_the_reason():
    cells, skips = _plan({"agent": {"runtimes": {"litert": "1.4"}}, "cores": 4}, threads=[1])
    assert len(cells) == 3 * len(COLUMNS)  # 8 cores or fewer: no 16-thread rows asked for
    reasons = {(r.format, r.binarize): why for r, why in skips.items()}
    assert "no Larq BNN runtime (lce) on pi and no lce_benchmark_model binary" in reasons["lce", "bnn"]
    assert "no benchmark_single_model binary configured for pi" in reasons["dabnn", "bnn"]
    assert ("tflite", None) not in reasons
    cells, skips = _plan({"agent": {"runtimes": {}}}, {"lce_benchmark_model": "/l"}, threads=[2])
    lce = [c.request for c in cells if c.request and c.request.format == "lce"]
    assert lce and all(r.native == "lce_benchmark_model" for r in lce)
    cells, skips = _plan({"unreachable": "ssh: timed out"}, threads=[1])
    assert all(why == "device unreachable: ssh: timed out" for why in skips.values())
    assert len(skips) == 3 * 3 + 4


def test_speedups_and_om_infer_come_from_the_stored_records():
    cells, _ = _plan({**LCE_AGENT, "soc": "bcm2711", "model": "Raspberry Pi 4 Model B"},
                     {"benchmark_single_model": "/b"}, threads=[1, 2], size="imagenet")
    by = {(c.threads, c.model, c.column): c for c in cells if c.request}
    fp32, bnn, react = 4000, 250, 260  # bytes
    latency = {"fp32": 100.0, "bnn": 20.0, "react": 25.0, "dabnn_fp32": 150.0, "dabnn_bnn": 30.0}
    size = {"fp32": fp32, "bnn": bnn, "react": react, "dabnn_fp32": 4100, "dabnn_bnn": 240}
    records = [rec(cell, latency[key[2]] * (2 if key[1] == "resnet34" else 1) / key[0],
                   size[key[2]]) for key, cell in by.items()]
    # an older failed attempt of one run is replaced by its newer ok record
    records.insert(0, rec(by[1, "resnet18", "bnn"], None, None, status="failed",
                          created="2024-01-01T00:00:00+00:00"))
    infos = {"pi": {"soc": "bcm2711", "model": "Raspberry Pi 4 Model B Rev 1.4"}}
    rows = grid(cells, records, infos)
    assert [(r["threads"], r["arch"]) for r in rows] == [
        (t, a) for t in (1, 2) for a in ("ResNet18", "ResNet34", "VGG-Small")]
    first = rows[0]["cells"]
    assert first["fp32"]["ms"] == 100.0 and first["bnn"]["speedup"] == pytest.approx(5.0)
    assert first["react"]["speedup"] == pytest.approx(4.0)
    assert first["dabnn_bnn"]["speedup"] == pytest.approx(5.0)  # over daBNN's own FP32
    assert first["fp32"]["speedup"] is None and first["dabnn_fp32"]["speedup"] is None
    # the paper's Raspberry Pi 4B numbers beside, and measured / paper
    assert rows[0]["paper_hardware"] == "Raspberry Pi 4B"
    assert first["fp32"]["paper_ms"] == 448.744
    assert first["fp32"]["ratio"] == pytest.approx(100.0 / 448.744)
    assert rows[3]["cells"]["dabnn_bnn"]["status"] == "absent"  # 2 threads: daBNN's "–"
    assert rows[3]["cells"]["bnn"]["speedup"] == pytest.approx(5.0)
    result = {(s["algorithm"], s["format"]): s for s in scores(records)}
    larq = result["bnn", "lce"]
    assert larq["pairs"] == 6 and larq["baseline"] == "tflite"  # 2 threads × 3 networks
    assert larq["speedup"] == pytest.approx(5.0) and larq["compression"] == pytest.approx(16.0)
    assert larq["om_infer"] == pytest.approx(math.sqrt((5.0 ** 2 + 16.0 ** 2) / 2))
    dab = result["bnn", "dabnn"]
    assert dab["pairs"] == 2 and dab["baseline"] == "dabnn"
    assert dab["compression"] == pytest.approx(4100 / 240)
    assert set(result) == {("bnn", "lce"), ("reactnet", "lce"), ("bnn", "dabnn")}
