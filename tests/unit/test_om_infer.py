"""BiBench OM_infer: pairing binarized runs with FP32 baselines, and the score itself."""

import math

import pytest

from aiot.host.scores.om_infer import match_runs, om_infer, om_infer_value, pair_runs
from aiot.host.store import RunRecord, open_store

_ids = iter(range(10_000))


def rec(model="resnet18", fmt="tflite", binarize=None, device="pi4", threads=1, median=None,
        mean=None, size=1000, created="2025-01-01T00:00:00+00:00", status="ok", kind="latency",
        legacy_spec=False):
    """A finished record as the executor stores it (median None: a mean-only native tool)."""
    spec = {"device": device, "model": model, "format": fmt, "threads": threads}
    if not legacy_spec:
        spec["binarize"] = binarize
    stats = {k: v for k, v in (("median", median), ("mean", mean)) if v is not None}
    return RunRecord(id=f"{next(_ids):08d}{'0' * 24}", kind=kind, status=status, created_at=created,
                     spec=spec, provenance={}, device=device, model=model, format=fmt,
                     threads=threads, size_bytes=size, median_ms=median,
                     result={"stats_ms": stats})


def test_pairs_by_device_model_and_threads():
    fp1 = rec(median=10.0, size=4000, threads=1)
    fp4 = rec(median=4.0, size=4000, threads=4)
    b1 = rec(fmt="lce", binarize="bnn", median=2.0, size=250, threads=1)
    b4 = rec(fmt="lce", binarize="bnn", median=1.0, size=250, threads=4)
    other_device = rec(median=99.0, size=4000, device="pixel", threads=1)
    pairs = pair_runs([fp1, fp4, b1, b4, other_device])
    assert [(p.threads, p.fp_id, p.bin_id) for p in pairs] == [(1, fp1.id, b1.id), (4, fp4.id, b4.id)]
    assert pairs[0].speedup == 5.0 and pairs[0].compression == 16.0
    assert pairs[1].speedup == 4.0 and pairs[0].stat == "median"
    assert (pairs[0].algorithm, pairs[0].format, pairs[0].baseline) == ("bnn", "lce", "tflite")


def test_only_fp32_runs_of_the_baseline_format_are_baselines():
    onnx_fp = rec(fmt="onnx", median=10.0)
    binarized_tflite = rec(fmt="tflite", binarize="reactnet", median=3.0, size=300)
    b = rec(fmt="lce", binarize="bnn", median=2.0, size=250)
    m = match_runs([onnx_fp, binarized_tflite, b])
    assert m.pairs == []
    assert {(u.algorithm, u.format) for u in m.unpaired} == {("bnn", "lce"), ("reactnet", "tflite")}
    # With --baseline onnx the same records pair, a binarized tflite run included.
    pairs = pair_runs([onnx_fp, binarized_tflite, b], baseline="onnx")
    assert [(p.algorithm, p.format, p.speedup) for p in pairs] == [("bnn", "lce", 5.0),
                                                                   ("reactnet", "tflite", 10 / 3)]


def test_records_without_binarize_key_are_full_precision():
    fp = rec(median=8.0, size=1600, legacy_spec=True)
    b = rec(fmt="dabnn", binarize="bnn", median=2.0, size=100)
    [pair] = pair_runs([fp, b])
    assert pair.fp_id == fp.id and pair.speedup == 4.0 and pair.compression == 16.0


def test_newest_ok_record_per_key_wins():
    old_fp = rec(median=100.0, created="2025-01-01T00:00:00+00:00")
    new_fp = rec(median=10.0, created="2025-01-02T00:00:00+00:00")
    failed_fp = rec(median=None, created="2025-01-03T00:00:00+00:00", status="failed")
    old_b = rec(fmt="lce", binarize="bnn", median=1.0, created="2025-01-01T00:00:00+00:00")
    new_b = rec(fmt="lce", binarize="bnn", median=5.0, created="2025-01-04T00:00:00+00:00")
    train = rec(kind="train", median=0.1, created="2025-01-05T00:00:00+00:00")
    # Order of the input does not matter: created_at decides.
    [pair] = pair_runs([new_b, failed_fp, new_fp, train, old_fp, old_b])
    assert (pair.fp_id, pair.bin_id, pair.speedup) == (new_fp.id, new_b.id, 2.0)


def test_newest_rule_through_a_real_store(tmp_path):
    def run(store, fmt, binarize, median, size):
        spec = {"model": "vgg_small", "format": fmt, "threads": 2, "binarize": binarize}
        r = store.begin("latency", spec, {}, device="local", model="vgg_small", format=fmt, threads=2)
        store.finish(r.id, "ok", result={"stats_ms": {"median": median, "mean": median}},
                     median_ms=median, size_bytes=size)
        return r.id

    with open_store(tmp_path) as store:
        run(store, "tflite", None, 50.0, 8000)
        fp = run(store, "tflite", None, 40.0, 8000)  # same second: insertion order decides
        b = run(store, "lce", "reactnet", 8.0, 500)
        failed = store.begin("latency", {"binarize": "reactnet"}, {}, device="local",
                             model="vgg_small", format="lce", threads=2)
        store.finish(failed.id, "failed", reason="boom")
        records = store.query(kind="latency")
    [pair] = pair_runs(records)
    assert (pair.fp_id, pair.bin_id, pair.speedup, pair.compression) == (fp, b, 5.0, 16.0)


def test_median_preferred_mean_when_a_side_has_none():
    fp = rec(median=12.0, mean=13.0, size=1000, device="a")
    b = rec(fmt="lce", binarize="bnn", median=3.0, mean=3.25, size=100, device="a")
    # A native tool that prints a mean only: both sides compare means, not median over mean.
    fp_n = rec(median=12.0, mean=13.0, size=1000, device="b")
    b_n = rec(fmt="dabnn", binarize="bnn", median=None, mean=2.6, size=100, device="b")
    # Neither side can give the same statistic: mixed, and said so.
    fp_m = rec(median=12.0, size=1000, device="c")
    b_m = rec(fmt="dabnn", binarize="bnn", median=None, mean=4.0, size=100, device="c")
    by_device = {p.device: p for p in pair_runs([fp, b, fp_n, b_n, fp_m, b_m])}
    assert (by_device["a"].stat, by_device["a"].speedup) == ("median", 4.0)
    assert (by_device["b"].stat, by_device["b"].fp_ms, by_device["b"].bin_ms) == ("mean", 13.0, 2.6)
    assert by_device["b"].speedup == pytest.approx(5.0)
    assert (by_device["c"].stat, by_device["c"].speedup) == ("median/mean", 3.0)


def test_records_without_latency_or_size_are_ignored():
    fp = rec(median=10.0)
    no_time = rec(fmt="lce", binarize="bnn", median=None, mean=None)
    no_size = rec(fmt="lce", binarize="xnor", median=1.0, size=None)
    assert match_runs([fp, no_time, no_size]).pairs == []
    assert match_runs([fp, no_time, no_size]).unpaired == []


def test_unpaired_runs_are_listed():
    fp = rec(median=10.0, threads=1)
    b1 = rec(fmt="lce", binarize="bnn", median=2.0, threads=1)
    b8 = rec(fmt="lce", binarize="bnn", median=1.0, threads=8)
    other = rec(fmt="dabnn", binarize="reactnet", median=1.0, model="resnet34")
    m = match_runs([fp, b1, b8, other])
    assert [p.bin_id for p in m.pairs] == [b1.id]
    assert [(u.record_id, u.model, u.threads, u.baseline) for u in m.unpaired] == [
        (b8.id, "resnet18", 8, "tflite"), (other.id, "resnet34", 1, "tflite")]
    assert m.to_dict()["unpaired"][0]["algorithm"] == "bnn"


def test_om_infer_by_hand():
    records = [
        rec(median=10.0, size=3200, device="pi4"),
        rec(fmt="lce", binarize="bnn", median=2.0, size=200, device="pi4"),
        rec(median=6.0, size=3200, device="m1"),
        rec(fmt="lce", binarize="bnn", median=2.0, size=400, device="m1"),
        rec(median=9.0, size=3200, device="rpi3"),
        rec(fmt="dabnn", binarize="bnn", median=3.0, size=100, device="rpi3"),
    ]
    scores = om_infer(pair_runs(records))
    assert [(s.algorithm, s.format, s.pairs) for s in scores] == [("bnn", "dabnn", 1),
                                                                  ("bnn", "lce", 2)]
    lce = scores[1]
    # speedups 5 and 3, compressions 16 and 8: E = 4 and 12.
    assert (lce.speedup, lce.compression) == (4.0, 12.0)
    assert lce.om_infer == pytest.approx(math.sqrt((4 ** 2 + 12 ** 2) / 2))
    assert lce.devices == ("m1", "pi4") and lce.threads == (1,) and lce.stats == ("median",)
    assert lce.to_dict()["devices"] == ["m1", "pi4"]
    dabnn = scores[0]
    assert dabnn.om_infer == pytest.approx(math.sqrt((3 ** 2 + 32 ** 2) / 2))
    assert om_infer([]) == []


@pytest.mark.parametrize("speedup, compression, expected", [(5.45, 15.62, 11.70), (4.89, 15.52, 11.51)])
def test_om_infer_reproduces_bibench_table_3(speedup, compression, expected):
    assert om_infer_value(speedup, compression) == pytest.approx(expected, abs=0.005)
