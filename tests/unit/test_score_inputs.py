"""CSV inputs for the scores: VIPS/VOPS tests and OM_infer pairs, and their one-line errors."""

import math

import pytest

from aiot.core.errors import UsageError
from aiot.host.scores.inputs import read_om_infer_csv, read_vips_csv
from aiot.host.scores.om_infer import om_infer
from aiot.host.scores.vips import device_scores


def write(tmp_path, text, name="data.csv"):
    path = tmp_path / name
    path.write_text(text.lstrip())
    return path


def test_vips_rows_become_tests(tmp_path):
    path = write(tmp_path, """
device,implementation,model,accuracy_pct,time_ms
s10e,py,re,74.94,333
s10e,tfc, MobileNetV2 ,70.56,58
s10e,tfn,MnasNet,72.08,30
""")
    data = read_vips_csv(path)
    assert [(t.implementation, t.model, t.flops_m) for t in data.tests] == [
        ("py", "resnet50", 3800), ("tfc", "mobilenet_v2", 300), ("tfn", "mnasnet", 315)]
    first = data.tests[0]
    assert (first.accuracy, first.time_s, first.stat) == (0.7494, 0.333, "csv")
    assert (first.flops_source, first.source) == ("reference", "data.csv line 2")
    [score] = device_scores(data.tests)
    # 0.7494/0.333 + 0.7056/0.058 + 0.7208/0.030 = 2.2505 + 12.1655 + 24.0267
    assert score.vips == pytest.approx(38.4427, abs=1e-4)
    assert score.vops == pytest.approx((2.25045 * 3800 + 12.16552 * 300 + 24.02667 * 315) * 1e6,
                                       rel=1e-5)


def test_flops_column_overrides_the_reference_and_names_any_model(tmp_path):
    path = write(tmp_path, """
Model,Device,Implementation,Accuracy_pct,Time_ms,FLOPs_M,notes
resnet50,pi4,tflite,76.0,200,4100,our count
MyNet,pi4,tflite,50.0,10,12.5,
resnet50,pi4,ptl,76.0,400,,reference used
""")
    tests = read_vips_csv(path).tests
    assert [(t.model, t.flops_m, t.flops_source) for t in tests] == [
        ("resnet50", 4100, "csv"), ("MyNet", 12.5, "csv"), ("resnet50", 3800, "reference")]
    assert tests[1].vops == pytest.approx(0.5 / 0.01 * 12.5e6)


def test_not_run_rows(tmp_path):
    path = write(tmp_path, """
device,implementation,model,accuracy_pct,time_ms
r17,tfn,re,/,/
r17,tfn,in,78.2,1653
r17,tfn,de,,
""")
    data = read_vips_csv(path)
    assert [t.model for t in data.tests] == ["inception_v3"]
    assert [(n.model, n.source) for n in data.not_run] == [
        ("resnet50", "data.csv line 2"), ("densenet121", "data.csv line 4")]


@pytest.mark.parametrize("text, message", [
    ("device,model,accuracy_pct\npi,re,70\n",
     "data.csv line 1: missing column(s) implementation, time_ms"),
    ("", "data.csv line 1: missing column(s) device, implementation, model, accuracy_pct, time_ms"),
    ("device,implementation,model,accuracy_pct,time_ms\npi,tflite,re,70,fast\n",
     "data.csv line 2: time_ms 'fast' is not a number"),
    ("device,implementation,model,accuracy_pct,time_ms\npi,tflite,re,70,12\npi,ptl,re,7O,12\n",
     "data.csv line 3: accuracy_pct '7O' is not a number"),
    ("device,implementation,model,accuracy_pct,time_ms\npi,tflite,re,70,0\n",
     "data.csv line 2: time_ms must be a positive number, got '0'"),
    ("device,implementation,model,accuracy_pct,time_ms\npi,tflite,re,-1,5\n",
     "data.csv line 2: accuracy_pct must be a non-negative number, got '-1'"),
    ("device,implementation,model,accuracy_pct,time_ms\npi,tflite,re,nan,5\n",
     "data.csv line 2: accuracy_pct must be a non-negative number, got 'nan'"),
    ("device,implementation,model,accuracy_pct,time_ms\npi,tflite,re,170,5\n",
     "data.csv line 2: accuracy_pct is a percentage (0-100), got '170'"),
    ("device,implementation,model,accuracy_pct,time_ms\npi,tflite,re,70,/\n",
     "data.csv line 2: time_ms '/' is not a number"),
    ("device,implementation,model,accuracy_pct,time_ms\npi,tflite,re,70\n",
     "data.csv line 2: 4 fields, the header has 5"),
    ("device,implementation,model,accuracy_pct,time_ms\n,tflite,re,70,5\n",
     "data.csv line 2: device is empty"),
    ("device,implementation,model,accuracy_pct,time_ms,flops_m\npi,tflite,re,70,5,lots\n",
     "data.csv line 2: flops_m 'lots' is not a number"),
    ("device,implementation,model,accuracy_pct,time_ms\npi,tflite,re,70,5\npi,tflite,RE,71,5\n",
     "data.csv line 3: pi tflite/resnet50 is already on line 2"),
    ("device,implementation,model,accuracy_pct,time_ms\npi,tflite,re,/,/\n",
     "data.csv: no test with an accuracy and a time"),
])
def test_bad_vips_csv_is_one_clear_error(tmp_path, text, message):
    with pytest.raises(UsageError) as info:
        read_vips_csv(write(tmp_path, text))
    assert info.value.message == message


def test_unknown_model_without_flops_names_the_row(tmp_path):
    path = write(tmp_path, """
device,implementation,model,accuracy_pct,time_ms,flops_m
pi,tflite,re,70,5,
pi,tflite,resnet18,70,5,
""")
    with pytest.raises(UsageError) as info:
        read_vips_csv(path)
    assert info.value.message == "data.csv line 3: no reference FLOPs for model 'resnet18'"
    assert "flops_m" in info.value.hint and "mn (mnasnet)" in info.value.hint
    path = write(tmp_path, "device,implementation,model,accuracy_pct,time_ms\npi,x,MyNet,7,5\n")
    with pytest.raises(UsageError, match="line 2: no reference FLOPs for model 'MyNet'"):
        read_vips_csv(path)


def test_missing_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="cannot read .*nope.csv"):
        read_vips_csv(tmp_path / "nope.csv")


def test_spreadsheet_exports_read(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes(b'\xef\xbb\xbfdevice,implementation,model,accuracy_pct,time_ms\r\n'
                     b'"pi, rev 4",tflite,sq,50.26,116\r\n\r\n')
    [t] = read_vips_csv(path).tests
    assert (t.device, t.model, t.source) == ("pi, rev 4", "squeezenet", "excel.csv line 2")


OM_HEADER = "algorithm,device,model,threads,fp32_ms,bin_ms,fp32_bytes,bin_bytes\n"


def test_om_infer_rows_become_pairs(tmp_path):
    path = write(tmp_path, OM_HEADER + """
BNN,pi4,resnet18,1,10,2,3200,200
bnn,m1,resnet18,,6,2,3200,400
ReActNet,pi4,resnet18,4,46.76,9.352,46.76,2.9225
""".lstrip())
    pairs = read_om_infer_csv(path)
    assert [(p.algorithm, p.threads, p.speedup, p.compression) for p in pairs] == [
        ("bnn", 1, 5.0, 16.0), ("bnn", None, 3.0, 8.0),
        ("reactnet", 4, pytest.approx(5.0), pytest.approx(16.0))]
    assert (pairs[0].format, pairs[0].baseline, pairs[0].stat) == ("external", "fp32", "csv")
    assert (pairs[0].fp_bytes, pairs[2].fp_bytes) == (3200, 46.76)
    assert isinstance(pairs[0].fp_bytes, int) and pairs[1].bin_id == "data.csv line 3"
    bnn = om_infer(pairs)[0]
    # E(speedup) = 4, E(compression) = 12: sqrt((16 + 144) / 2) = 8.944
    assert (bnn.algorithm, bnn.speedup, bnn.compression) == ("bnn", 4.0, 12.0)
    assert bnn.om_infer == pytest.approx(math.sqrt(80))


def test_om_infer_format_column_and_algorithm_names(tmp_path):
    path = write(tmp_path, OM_HEADER.strip() + ",format\nBi-Real,pi4,resnet18,1,10,2,32,2,lce\n")
    [pair] = read_om_infer_csv(path, algorithm_name=lambda name: {"Bi-Real": "bireal"}[name])
    assert (pair.algorithm, pair.format) == ("bireal", "lce")


@pytest.mark.parametrize("row, message", [
    ("bnn,pi4,resnet18,1,10,2,3200", "line 2: 7 fields, the header has 8"),
    ("bnn,pi4,resnet18,1,10,0,3200,200", "line 2: bin_ms must be a positive number, got '0'"),
    ("bnn,pi4,resnet18,1,10,2,3.2MB,200", "line 2: fp32_bytes '3.2MB' is not a number"),
    ("bnn,pi4,resnet18,two,10,2,3200,200",
     "line 2: threads must be a positive whole number, got 'two'"),
    ("bnn,pi4,resnet18,0,10,2,3200,200",
     "line 2: threads must be a positive whole number, got '0'"),
    (",pi4,resnet18,1,10,2,3200,200", "line 2: algorithm is empty"),
    ("bnn,pi4,resnet18,1,10,2,3200,200\nbnn,pi4,resnet18,1,11,2,3200,200",
     "line 3: bnn resnet18 on pi4 at 1 threads is already on line 2"),
])
def test_bad_om_infer_csv_names_the_row(tmp_path, row, message):
    with pytest.raises(UsageError) as info:
        read_om_infer_csv(write(tmp_path, OM_HEADER + row + "\n"))
    assert info.value.message == f"data.csv {message}"


def test_om_infer_header_and_empty_file(tmp_path):
    with pytest.raises(UsageError) as info:
        read_om_infer_csv(write(tmp_path, "algorithm,device,model,fp32_ms,bin_ms\nbnn,a,b,1,1\n"))
    assert info.value.message == ("data.csv line 1: missing column(s) threads, fp32_bytes, "
                                  "bin_bytes")
    assert "algorithm, device, model, threads" in info.value.hint
    with pytest.raises(UsageError, match="data.csv: no data rows"):
        read_om_infer_csv(write(tmp_path, OM_HEADER))
