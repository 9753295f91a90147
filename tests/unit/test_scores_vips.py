"""AIoTBench VIPS and VOPS: the terms, the per-device sums, and tests from stored runs."""

import pytest

from aiot.host.scores.vips import (
    DeviceTest,
    NotRun,
    aiotbench_model,
    device_scores,
    implementation_of,
    select_tests,
    si,
    time_of,
    vips_term,
    vops_term,
)
from aiot.host.store import RunRecord, open_store

# AIoTBench's Table VI: accuracy (%) and average time (ms) per test on five phones; "/" is a
# test the phone does not support. Its last rows give VIPS 140.40 ... and VOPS 151.19G ...
DEVICES = ("s10e", "v20", "x27", "nex", "r17")
TABLE_VI = """
py-re 74.94 333 74.94 361 74.94 1249 74.94 1243 75.16 1260
py-in 77.82 433 77.82 401 77.82 1509 77.82 1500 77.68 1537
py-de 74.66 246 74.66 253 74.66 915 74.66 963 74.72 982
py-sq 56.94 98 56.94 105 56.94 284 56.94 284 56.74 295
py-mo 70.54 269 70.54 291 70.54 769 70.54 726 70.44 734
py-mn 72.18 289 72.18 284 72.18 694 72.18 685 72.24 735
ca-re 75.16 537 75.16 614 75.16 1168 75.16 1165 75.14 1361
ca-in 79.06 857 79.06 1002 79.06 1803 79.06 1804 78.9 2137
ca-de 74.66 454 74.66 501 74.66 1027 74.66 1029 74.72 1216
ca-sq 56.86 85 56.86 98 56.86 173 56.86 174 56.54 220
ca-mo 71.78 190 71.78 230 71.78 575 71.78 598 71.64 603
ca-mn 72.18 131 72.18 148 72.18 278 72.18 278 72.24 351
tfc-re 72.5 642 72.5 707 72.5 1236 72.5 1232 72.44 1571
tfc-in 78.1 697 78.1 790 78.1 1366 78.1 1367 78.2 1569
tfc-de 72.82 439 72.82 494 72.82 794 72.82 792 72.78 901
tfc-sq 50.26 116 50.26 126 50.26 235 50.26 234 50.44 271
tfc-mo 70.56 58 70.56 63 70.56 116 70.56 116 70.58 133
tfc-mn 72.08 60 72.08 66 72.08 117 72.08 116 72.08 134
tfn-re 72.5 275 72.5 3100 72.5 874 72.5 860 / /
tfn-in 78.1 116 78.1 661 78.1 965 78.1 966 78.2 1653
tfn-de 72.82 2595 72.82 505 72.82 796 72.82 773 / /
tfn-sq 50.26 37 50.26 126 50.26 167 50.26 169 50.44 318
tfn-mo 70.56 31 70.56 116 70.56 184 70.56 164 70.58 179
tfn-mn 72.08 30 72.08 130 72.08 184 72.08 184 / /
"""
PAPER_VIPS = (140.40, 82.73, 44.61, 45.11, 33.40)
PAPER_VOPS_G = (151.19, 92.79, 47.87, 48.05, 34.15)
FLOPS_M = {"re": 3800, "in": 5000, "de": 2800, "sq": 833, "mo": 300, "mn": 315}


def make_test(device="pi", impl="tflite", model="resnet50", accuracy=0.5, time_s=0.1,
              flops_m=3800.0):
    return DeviceTest(device, impl, model, accuracy, time_s, flops_m, "mean", "reference", "x")


def table_vi() -> tuple[list[DeviceTest], list[NotRun]]:
    tests, not_run = [], []
    for line in TABLE_VI.split("\n")[1:-1]:
        name, *cells = line.split()
        impl, code = name.split("-")
        for device, accuracy, time in zip(DEVICES, cells[::2], cells[1::2], strict=True):
            if accuracy == "/":
                not_run.append(NotRun(device, impl, code, "not supported"))
            else:
                tests.append(make_test(device, impl, code, float(accuracy) / 100,
                                       float(time) / 1000, FLOPS_M[code]))
    return tests, not_run


def test_terms_by_hand():
    # 74.94 % in 333 ms: 0.7494 / 0.333 = 2.2505 images/s; x 3800 M MACs = 8.552 G ops/s.
    assert vips_term(0.7494, 0.333) == pytest.approx(2.25045, abs=1e-5)
    assert vops_term(0.7494, 3800, 0.333) == pytest.approx(8.5517e9, rel=1e-4)
    assert vips_term(0.0, 2.0) == 0.0
    with pytest.raises(ValueError, match="must be > 0"):
        vips_term(0.5, 0.0)
    t = make_test(accuracy=0.8, time_s=0.05, flops_m=300)
    assert (t.vips, t.vops) == (pytest.approx(16.0), pytest.approx(4.8e9))
    assert t.to_dict()["vips"] == pytest.approx(16.0)


def test_device_score_is_a_sum_over_its_tests():
    tests = [make_test("a", "tflite", "resnet50", 0.75, 0.5, 3800),  # 1.5 img/s, 5.7 G
             make_test("a", "ptl", "mobilenet_v2", 0.7, 0.07, 300),  # 10 img/s, 3.0 G
             make_test("b", "tflite", "resnet50", 0.75, 0.25, 3800)]  # 3 img/s, 11.4 G
    a, b = device_scores(tests)
    assert (a.device, a.tests, b.device, b.tests) == ("a", 2, "b", 1)
    assert a.vips == pytest.approx(11.5) and a.vops == pytest.approx(8.7e9)
    assert b.vips == pytest.approx(3.0) and b.vops == pytest.approx(11.4e9)
    # b did not run a's ptl test: it is left out of b's sum and listed, not counted as zero.
    assert a.not_run == ()
    assert [(n.implementation, n.model, n.reason) for n in b.not_run] == [
        ("ptl", "mobilenet_v2", "no result")]
    assert b.to_dict()["vops_si"] == "11.40G"


def test_given_not_run_entries_keep_their_reason():
    tests = [make_test("a", "tflite"), make_test("a", "tflite+nnapi"), make_test("b", "tflite")]
    skipped = NotRun("b", "tflite+nnapi", "resnet50", "skipped: NNAPI is Android's", "rec1")
    [_, b] = device_scores(tests, [skipped])
    assert b.not_run == (skipped,)
    assert b.to_dict()["not_run"][0]["reason"] == "skipped: NNAPI is Android's"


def test_a_test_given_twice_is_refused():
    with pytest.raises(ValueError, match="a's test tflite/resnet50 given twice"):
        device_scores([make_test("a"), make_test("a")])


def test_reproduces_aiotbench_table_vi():
    tests, not_run = table_vi()
    scores = {s.device: s for s in device_scores(tests, not_run)}
    for device, vips, vops in zip(DEVICES, PAPER_VIPS, PAPER_VOPS_G, strict=True):
        assert f"{scores[device].vips:.2f}" == f"{vips:.2f}"
        assert si(scores[device].vops) == f"{vops:.2f}G"
    r17 = scores["r17"]
    assert r17.tests == 21 and [n.model for n in r17.not_run] == ["re", "de", "mn"]


def test_si_prefixes():
    assert [si(v) for v in (151.19e9, 12.3456e12, 3.5e6, 999.0, 1500.0, 0.0)] == [
        "151.19G", "12.35T", "3.50M", "999.00", "1.50k", "0.00"]


def test_aiotbench_models_and_reference_flops():
    # The zoo's reference FLOPs are AIoTBench's (Table II), MnasNet 315 included.
    expected = {"re": ("resnet50", 3800), "in": ("inception_v3", 5000),
                "de": ("densenet121", 2800), "sq": ("squeezenet", 833),
                "mo": ("mobilenet_v2", 300), "mn": ("mnasnet", 315)}
    for code, (name, flops) in expected.items():
        assert aiotbench_model(code) == (name, flops)
        assert aiotbench_model(code.upper()) == (name, flops)
    assert aiotbench_model("ResNet50") == ("resnet50", 3800)
    assert aiotbench_model(" InceptionV3 ") == ("inception_v3", 5000)
    assert aiotbench_model("MobileNetV2") == ("mobilenet_v2", 300)
    assert aiotbench_model("resnet18") == ("resnet18", None)  # in the zoo, not in AIoTBench
    assert aiotbench_model("MyNet") == ("MyNet", None)


_ids = iter(range(10_000))


def rec(device="pi", fmt="tflite", model="resnet50", accuracy=0.75, mean=None, median=None,
        delegate=None, status="ok", validity=None, threads=1, created="2025-01-01T00:00:00+00:00",
        binarize=None, reason=None):
    spec = {"device": device, "model": model, "format": fmt, "threads": threads,
            "delegate": delegate, "binarize": binarize}
    stats = {k: v for k, v in (("mean", mean), ("median", median)) if v is not None}
    result = {"stats_ms": stats, "validity": {"verdict": validity, "reasons": ["CV above target"]}}
    return RunRecord(id=f"{next(_ids):08d}{'0' * 24}", kind="latency", status=status,
                     created_at=created, spec=spec, provenance={}, device=device, model=model,
                     format=fmt, threads=threads, median_ms=median, accuracy=accuracy,
                     validity=validity, result=result, reason=reason)


def fixed_flops(model):
    return {"resnet50": (3800.0, "reference"), "tiny_cnn": (0.5, "counted")}.get(model)


def test_implementation_and_time_of_a_record():
    assert implementation_of(rec()) == "tflite"
    assert implementation_of(rec(delegate="nnapi")) == "tflite+nnapi"
    assert implementation_of(rec(fmt="caffe2")) == "caffe2"
    # AIoTBench's time is an average: the mean when the run has one, else the median.
    assert time_of(rec(mean=120.0, median=100.0)) == (0.12, "mean")
    assert time_of(rec(median=100.0)) == (0.1, "median")
    assert time_of(rec()) is None


def test_select_tests_by_hand():
    records = [
        rec(mean=500.0, median=480.0, accuracy=0.75),  # 0.75 / 0.5 = 1.5
        rec(fmt="ptl", median=250.0, accuracy=0.5),  # 0.5 / 0.25 = 2.0 (median: no mean)
        rec(fmt="tiny", model="tiny_cnn", mean=2.0, accuracy=0.9),  # 0.9 / 0.002 = 450
    ]
    selection = select_tests(records, flops=fixed_flops)
    [score] = device_scores(selection.tests, selection.not_run)
    assert score.tests == 3 and score.vips == pytest.approx(453.5)
    assert score.vops == pytest.approx(1.5 * 3800e6 + 2.0 * 3800e6 + 450 * 0.5e6)
    by_impl = {t.implementation: t for t in selection.tests}
    assert (by_impl["tflite"].stat, by_impl["ptl"].stat) == ("mean", "median")
    assert by_impl["tiny"].flops_source == "counted"


def test_records_left_out_are_listed_with_their_reason():
    records = [
        rec(mean=100.0),
        rec(delegate="nnapi", status="skipped", reason="NNAPI is Android's", accuracy=None),
        rec(fmt="caffe2", mean=90.0, accuracy=None),  # a native tool: no accuracy
        rec(fmt="ptl", mean=80.0, validity="INVALID"),
        rec(fmt="onnx", model="mystery", mean=80.0),
        rec(fmt="lce", mean=10.0, binarize="bnn"),  # BiBench's, not a test here: ignored
    ]
    selection = select_tests(records, flops=fixed_flops)
    assert [t.implementation for t in selection.tests] == ["tflite"]
    reasons = {(n.implementation, n.model): n.reason for n in selection.not_run}
    assert reasons == {
        ("tflite+nnapi", "resnet50"): "skipped: NNAPI is Android's",
        ("caffe2", "resnet50"): "no accuracy: a latency-only run (measure it with a --dataset)",
        ("ptl", "resnet50"): "INVALID (--include-invalid keeps it); CV above target",
        ("onnx", "mystery"): "no FLOPs: model not in the zoo",
    }
    kept = select_tests(records, include_invalid=True, flops=fixed_flops)
    assert {t.implementation for t in kept.tests} == {"tflite", "ptl"}


def test_newest_scorable_record_counts():
    old = rec(mean=100.0, created="2025-01-01T00:00:00+00:00")
    new = rec(mean=50.0, created="2025-01-02T00:00:00+00:00")
    failed = rec(mean=None, accuracy=None, status="failed", created="2025-01-03T00:00:00+00:00")
    invalid = rec(mean=10.0, validity="INVALID", created="2025-01-04T00:00:00+00:00")
    [t] = select_tests([invalid, failed, new, old], flops=fixed_flops).tests
    assert t.source == new.id
    [t] = select_tests([invalid, failed, new, old], True, fixed_flops).tests
    assert t.source == invalid.id
    # A test measured at several thread counts: the newest counts, and a note says so.
    four = rec(mean=30.0, threads=4, created="2025-01-05T00:00:00+00:00")
    selection = select_tests([old, four], flops=fixed_flops)
    assert [t.source for t in selection.tests] == [four.id]
    assert selection.notes == [
        "pi tflite/resnet50: runs at [1, 4] threads; the newest (4) counts (choose with --threads)"]


def test_tests_from_a_real_store(tmp_path):
    def run(store, fmt, delegate, mean, accuracy, validity="VALID"):
        spec = {"model": "mnasnet", "format": fmt, "threads": 1, "delegate": delegate}
        r = store.begin("latency", spec, {}, device="phone", model="mnasnet", format=fmt, threads=1)
        store.finish(r.id, "ok", result={"stats_ms": {"mean": mean, "median": mean - 1}},
                     median_ms=mean - 1, accuracy=accuracy, validity=validity)
        return r.id

    with open_store(tmp_path) as store:
        run(store, "tflite", None, 60.0, 0.7208)
        run(store, "tflite", "nnapi", 30.0, 0.7208)
        run(store, "ptl", None, 289.0, 0.7218, validity="INVALID")
        records = store.query(kind="latency")
    selection = select_tests(records)  # the zoo's own reference FLOPs
    [score] = device_scores(selection.tests, selection.not_run)
    # Table VI's s10e tfc-mn and tfn-mn: 0.7208/0.060 + 0.7208/0.030 = 36.04.
    assert score.vips == pytest.approx(0.7208 / 0.06 + 0.7208 / 0.03)
    assert score.vops == pytest.approx(score.vips * 315e6)
    [invalid] = score.not_run
    assert (invalid.implementation, invalid.reason.split(" ")[0]) == ("ptl", "INVALID")
