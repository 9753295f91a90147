"""``aiot score vips|vops|om-infer|om-comp`` over CSV inputs and stored runs."""

import math
import os
import re
from pathlib import Path

import pytest

from aiot.host.store import open_store
from tests.helpers import single_error

# Hand-computed: s10e 0.7494/0.333 + 0.7208/0.030 = 2.2505 + 24.0267 = 26.28 images/s and
# 2.2505 x 3800 M + 24.0267 x 315 M = 8.5517 G + 7.5684 G = 16.12G; r17 0.7516/1.260 = 0.60,
# x 3800 M = 2.27G, its tfn-mn marked not run as in AIoTBench's Table VI.
VIPS_CSV = """device,implementation,model,accuracy_pct,time_ms
s10e,py,re,74.94,333
s10e,tfn,MnasNet,72.08,30
r17,py,ResNet50,75.16,1260
r17,tfn,mn,/,/
"""
OM_CSV = """algorithm,device,model,threads,fp32_ms,bin_ms,fp32_bytes,bin_bytes
BNN,pi4,resnet18,1,10,2,3200,200
bnn,m1,resnet18,,6,2,3200,400
ReActNet,pi4,resnet18,1,10,2.5,3200,100
"""


def csv_file(tmp_path, text, name="lab.csv") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def one_line_error(result) -> str:
    """The error line of a failed command, after checking it failed cleanly (nothing on stdout)."""
    assert result.stdout == ""
    return single_error(result)


def test_vips_from_csv(cli, tmp_path):
    result = cli("score", "vips", "--input", csv_file(tmp_path, VIPS_CSV))
    out = result.stdout
    assert "VIPS = sum_i accuracy_i / time_i" in out and "accuracy / time" in out
    assert "26.28" in out and "0.60" in out and "24.03" in out and "74.94%" in out
    # The ranking: rank, device, tests, VIPS, tests not run.
    assert re.search(r"│ 1 +│ s10e +│ 2 +│ 26\.28 +│ 0 +│", out)
    assert re.search(r"│ 2 +│ r17 +│ 1 +│ 0\.60 +│ 1 +│", out)
    assert "not run: 1 test(s) left out" in result.stderr
    assert "note: the devices ran different tests" in result.stderr
    assert "r17 tfn/mnasnet: marked not run in the file (lab.csv line 5)" in result.stderr


def test_vops_from_csv_with_si_suffix(cli, tmp_path):
    out = cli("score", "vops", "-i", csv_file(tmp_path, VIPS_CSV)).stdout
    assert "VOPS = sum_i accuracy_i * FLOPs_i / time_i" in out
    assert "16.12G" in out and "2.27G" in out and "8.55G" in out and "reference" in out


def test_vips_json(cli, tmp_path):
    data = cli.json("score", "vips", "--input", csv_file(tmp_path, VIPS_CSV))
    assert data["score"] == "vips" and data["input"].endswith("lab.csv")
    s10e, r17 = data["devices"]
    assert (s10e["rank"], s10e["device"], s10e["tests"]) == (1, "s10e", 2)
    assert s10e["vips"] == pytest.approx(0.7494 / 0.333 + 0.7208 / 0.030)
    assert s10e["vops"] == pytest.approx((0.7494 / 0.333 * 3800 + 0.7208 / 0.030 * 315) * 1e6)
    assert s10e["vops_si"] == "16.12G" and s10e["not_run"] == []
    assert [(n["model"], n["source"]) for n in r17["not_run"]] == [("mnasnet", "lab.csv line 5")]
    assert [t["model"] for t in data["tests"]] == ["resnet50", "mnasnet", "resnet50"]
    assert data["tests"][1]["vips"] == pytest.approx(24.0267, abs=1e-4)
    # --device keeps one device's rows.
    only = cli.json("score", "vops", "--input", csv_file(tmp_path, VIPS_CSV), "--device", "r17")
    assert [d["device"] for d in only["devices"]] == ["r17"]


def test_flops_column_is_used_where_given(cli, tmp_path):
    text = ("device,implementation,model,accuracy_pct,time_ms,flops_m\n"
            "pi,tflite,mynet,50,10,12.5\npi,tflite,re,50,500,\n")
    data = cli.json("score", "vops", "--input", csv_file(tmp_path, text))
    # 0.5 / 0.01 x 12.5 M + 0.5 / 0.5 x 3800 M = 625 M + 3800 M
    assert data["devices"][0]["vops"] == pytest.approx(4.425e9)
    assert [t["flops_source"] for t in data["tests"]] == ["csv", "reference"]


@pytest.mark.parametrize("text, expected", [
    ("device,model,accuracy_pct,time_ms\npi,re,70,5\n",
     "error: lab.csv line 1: missing column(s) implementation"),
    ("device,implementation,model,accuracy_pct,time_ms\npi,tflite,re,70,5\npi,ptl,re,high,5\n",
     "error: lab.csv line 3: accuracy_pct 'high' is not a number"),
    ("device,implementation,model,accuracy_pct,time_ms\npi,tflite,re,70,5\npi,ptl,vgg_small,70,5\n",
     "error: lab.csv line 3: no reference FLOPs for model 'vgg_small'"),
    ("device,implementation,model,accuracy_pct,time_ms\npi,tflite,re,70,5\npi,ptl,AlexNet,70,5\n",
     "error: lab.csv line 3: no reference FLOPs for model 'AlexNet'"),
])
def test_bad_vips_csv_is_one_line_naming_the_row(cli, tmp_path, text, expected):
    for command in ("vips", "vops"):
        result = cli("score", command, "--input", csv_file(tmp_path, text), code=2)
        assert one_line_error(result) == expected
    if "FLOPs" in expected:
        assert "hint: give its flops_m (millions of MACs)" in result.stderr


def test_csv_input_refuses_store_options_and_warns_on_fractions(cli, tmp_path):
    path = csv_file(tmp_path, VIPS_CSV)
    result = cli("score", "vips", "--input", path, "--threads", "4", code=2)
    assert "--threads and --include-invalid apply to stored runs" in one_line_error(result)
    result = cli("score", "vips", "--input", path, "--device", "pixel", code=2)
    assert one_line_error(result) == "error: no test of device 'pixel' in lab.csv"
    fractions = "device,implementation,model,accuracy_pct,time_ms\npi,tflite,re,0.75,500\n"
    result = cli("score", "vips", "--input", csv_file(tmp_path, fractions))
    assert "every accuracy_pct in lab.csv is at most 1" in result.stderr
    result = cli("score", "vips", "--input", str(tmp_path / "missing.csv"), code=2)
    assert "error: cannot read" in one_line_error(result)


def test_om_infer_from_csv(cli, tmp_path):
    data = cli.json("score", "om-infer", "--input", csv_file(tmp_path, OM_CSV))
    assert data["baseline"] == "fp32" and data["unpaired"] == []
    bnn, reactnet = data["scores"]
    assert (bnn["algorithm"], bnn["pairs"], bnn["speedup"], bnn["compression"]) == (
        "bnn", 2, 4.0, 12.0)
    assert bnn["om_infer"] == pytest.approx(math.sqrt((4**2 + 12**2) / 2))
    assert (reactnet["speedup"], reactnet["compression"]) == (4.0, 32.0)
    assert [p["bin_id"] for p in data["pairs"]] == ["lab.csv line 2", "lab.csv line 3",
                                                   "lab.csv line 4"]
    out = cli("score", "om-infer", "--input", csv_file(tmp_path, OM_CSV)).stdout
    assert "8.94" in out and "22.80" in out and "fp32 ms" in out and "external" in out
    pi4 = cli.json("score", "om-infer", "--input", csv_file(tmp_path, OM_CSV), "-d", "pi4")
    assert pi4["scores"][0]["speedup"] == 5.0


def test_bad_om_infer_csv_is_one_line_naming_the_row(cli, tmp_path):
    bad = OM_CSV + "bnn,pi4,resnet34,1,fast,2,3200,200\n"
    result = cli("score", "om-infer", "--input", csv_file(tmp_path, bad), code=2)
    assert one_line_error(result) == "error: lab.csv line 5: fp32_ms 'fast' is not a number"
    result = cli("score", "om-infer", "--input", csv_file(tmp_path, VIPS_CSV), code=2)
    assert one_line_error(result).startswith("error: lab.csv line 1: missing column(s) algorithm")
    result = cli("score", "om-infer", "--input", csv_file(tmp_path, OM_CSV), "--baseline", "onnx",
                 code=2)
    assert one_line_error(result) == "error: --baseline applies to stored runs"
    result = cli("score", "om-infer", "--input", csv_file(tmp_path, OM_CSV), "-m", "vgg", code=2)
    assert one_line_error(result) == "error: no row of model 'vgg' in lab.csv"


def test_om_comp_per_algorithm(cli):
    data = cli.json("score", "om-comp", "tiny_vgg", "tiny-cnn", "--binarize", "bnn,reactnet")
    assert data["models"] == ["tiny_vgg", "tiny_cnn"]
    assert [s["algorithm"] for s in data["scores"]] == ["bnn", "reactnet"]
    for score in data["scores"]:
        rows = [r for r in data["rows"] if r["algorithm"] == score["algorithm"]]
        mean_c = sum(r["r_c"] for r in rows) / 2
        mean_s = sum(r["r_s"] for r in rows) / 2
        assert (score["r_c"], score["r_s"]) == (pytest.approx(mean_c), pytest.approx(mean_s))
        assert score["om_comp"] == pytest.approx(math.sqrt((mean_c**2 + mean_s**2) / 2))
    out = cli("score", "om-comp", "tiny_vgg", "tiny_cnn", "-b", "bnn").stdout
    assert f"{data['scores'][0]['om_comp']:.2f}" in out and "tiny_vgg, tiny_cnn" in out
    assert "OM_comp = sqrt((E²(r_c) + E²(r_s)) / 2)" in out
    assert "unknown model 'resnet19'" in cli("score", "om-comp", "resnet19", code=2).stderr


# -- stored runs ----------------------------------------------------------------------------


@pytest.fixture
def results():
    """The store the CLI reads (the conftest points AIOT_RESULTS_DIR at a tmp folder)."""
    with open_store(Path(os.environ["AIOT_RESULTS_DIR"])) as store:
        yield store


def store_run(store, fmt, mean, accuracy, device="s10e", model="mnasnet", delegate=None,
              threads=1, validity="VALID", status="ok"):
    spec = {"device": device, "model": model, "format": fmt, "threads": threads,
            "delegate": delegate}
    r = store.begin("latency", spec, {}, device=device, model=model, format=fmt, threads=threads)
    if status != "ok":
        store.finish(r.id, status, reason="no NNAPI on this device")
        return r.id
    result = {"stats_ms": {"mean": mean, "median": mean * 0.9},
              "validity": {"verdict": validity, "reasons": ["throttling detected: 60 C"]}}
    store.finish(r.id, "ok", result=result, median_ms=mean * 0.9, accuracy=accuracy,
                 validity=validity)
    return r.id


def test_vips_from_stored_runs(cli, results):
    store_run(results, "tflite", 60.0, 0.7208)  # 12.01
    store_run(results, "tflite", 30.0, 0.7208, delegate="nnapi")  # 24.03
    invalid = store_run(results, "ptl", 10.0, 0.7218, validity="INVALID")  # 72.18 if kept
    store_run(results, "tflite", 120.0, 0.7208, device="r17")  # 6.01
    store_run(results, "tflite", None, None, device="r17", delegate="nnapi", status="skipped")
    data = cli.json("score", "vips")
    s10e, r17 = data["devices"]
    assert s10e["vips"] == pytest.approx(0.7208 / 0.06 + 0.7208 / 0.03)
    assert {t["stat"] for t in data["tests"]} == {"mean"}
    assert [(n["implementation"], n["reason"].split(":")[0]) for n in s10e["not_run"]] == [
        ("ptl", "INVALID (--include-invalid keeps it); throttling detected")]
    assert [(n["implementation"], n["reason"]) for n in r17["not_run"]] == [
        ("tflite+nnapi", "skipped: no NNAPI on this device")]
    kept = cli.json("score", "vips", "--include-invalid")
    assert kept["devices"][0]["vips"] == pytest.approx(s10e["vips"] + 72.18)
    result = cli("score", "vops")
    assert "11.35G" in result.stdout  # 12.01 + 24.03 = 36.04 images/s x 315 M MACs
    assert f"record {invalid[:8]}" in result.stderr and "INVALID" in result.stderr


def test_vips_threads_filter_and_empty_store(cli, results):
    result = cli("score", "vips", code=2)
    assert one_line_error(result) == ("error: no run with an accuracy and a latency in the "
                                      "result store")
    assert "--input FILE.csv" in result.stderr
    store_run(results, "tflite", 50.0, 0.5, threads=1)
    store_run(results, "tflite", 25.0, 0.5, threads=4)
    result = cli("score", "vips")
    assert "20.00" in result.stdout and "runs at [1, 4] threads" in result.stderr
    assert "10.00" in cli("score", "vips", "--threads", "1").stdout
    result = cli("score", "vips", "-t", "2", code=2)
    assert "no run at 2 threads with an accuracy" in one_line_error(result)
