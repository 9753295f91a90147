"""Files keep their columns: every CSV aiot writes (the report's files, ``results export
--format csv``) has the same header whatever its rows hold. A column whose value is the same in
every row (one device, one host) stays, and so does one no row has a value for; only the page
and the terminal fold a constant column into the line above."""

from __future__ import annotations

import csv
import io

import pytest

from aiot.host.cli import record_view
from aiot.host.report import scale
from aiot.host.report.build import build, collect
from aiot.host.report.html import CSV_COLUMNS, csv_header, write
from aiot.host.store import identity, open_store
from aiot.host.store.store import RunRecord
from tests.unit.test_report import add
from tests.unit.test_report_first_screen import result
from tests.unit.test_report_robust import _suite_record

PROFILE = {"available": True, "tool": "ONNX Runtime session profiling", "runs": 20,
           "ops": [{"name": "/conv", "type": "Conv", "ms": 0.5, "pct": 40.0}]}


def fill(store, devices: tuple[str, ...]) -> None:
    """Every part of the report on each of ``devices``; the second device at other thread
    counts (the formats table's columns would follow them), with no load times and no
    accuracy (columns no row of it has a value for)."""
    for n, device in enumerate(devices):
        threads = (1, 2) if n == 0 else (1, 4, 8)
        for t in threads:
            for fmt, factor in (("tflite", 1.0), ("onnx", 1.5)):
                m = 10.0 * factor / t
                add(store, device=device, fmt=fmt, threads=t, median=m,
                    accuracy=0.7 if n == 0 else None, load=5.0 if n == 0 else None,
                    temp=50.0 + n, khz=1_500_000, result=result(m))
        add(store, device=device, fmt="onnx", threads=3, median=2.0,
            result=result(2.0, profile=PROFILE))
        add(store, device=device, fmt="lce", binarize="bnn", median=2.0, size=250)
        add(store, device=device, fmt="onnx", threads=16, median=3.0,
            invalid=("too few samples: 3 < min_runs 50",))
        add(store, device=device, fmt="onnx", threads=16, status="failed", reason="agent crashed")
        add(store, device=device, kind="robustness", accuracy=0.4,
            result={"attack": "fgsm", "eps": 0.03, "robust_accuracy": 0.4 + n})
        _suite_record(store, "robust-corrupt", device=device,
                      summary={"mNR": 0.6} if n == 0 else {"mNR": 0.5, "mean_G": 0.2})
    store.finish(store.begin("train", {"model": "resnet18", "dataset": "cifar10", "epochs": 2},
                             {"aiot_version": "0.1.0"}, model="resnet18", device="host").id,
                 "ok", result={"test_accuracy": 0.71, "epochs_run": 2, "seconds": 12.5},
                 accuracy=0.71)


def headers(folder) -> dict[str, list[str]]:
    """Each CSV file's header row, by file name."""
    return {path.name: next(csv.reader(path.open(newline="")))
            for path in sorted(folder.glob("*.csv"))}


def reports(tmp_path, monkeypatch, summarised: bool = False):
    """The CSV files of a store with one device and of one with two: (one's, two's) folders."""
    if summarised:
        monkeypatch.setattr(scale, "DETAIL_LIMIT", 5)
        monkeypatch.setattr(scale, "ROW_LIMIT", 4)
    out = []
    for devices in (("pi4",), ("pi4", "pixel")):
        name = "-".join(devices)
        with open_store(tmp_path / name) as store:
            fill(store, devices)
            report = scale.report_of(store, name, generated_at="2026-01-02T03:04:05+00:00")
        write(report, "csv", tmp_path / f"{name}-csv")
        out.append(tmp_path / f"{name}-csv")
    return out


@pytest.mark.parametrize("summarised", [False, True], ids=["full", "summarised"])
def test_one_device_or_two_the_report_files_have_the_same_columns(tmp_path, monkeypatch,
                                                                   summarised):
    one, two = (headers(folder) for folder in reports(tmp_path, monkeypatch, summarised))
    # A suite's own tables are named by their record (one file per record): those aside,
    # the same files, each with the same header.
    common = {name for name in one if csv_header(name[:-4]) is not None}
    assert common == {name for name in two if csv_header(name[:-4]) is not None}
    assert common >= {f"{key}.csv" for key in CSV_COLUMNS if key != "trends"} | {
        "kind_robustness.csv", "robust_corrupt_summary.csv"}
    assert ("trends.csv" in common) is summarised
    for name in common:
        assert one[name] == two[name] == list(csv_header(name[:-4])), name
    # The report's files name the host right after the device, in every one with a device.
    for name in common:
        if "device" in one[name] and name not in ("leaderboard.csv", "devices.csv",
                                                  "telemetry.csv"):
            assert one[name][one[name].index("device") + 1] == "host", name


def test_a_constant_or_empty_column_stays_in_the_file_and_folds_on_the_page(tmp_path,
                                                                           monkeypatch):
    one, _two = reports(tmp_path, monkeypatch)
    best = list(csv.DictReader((one / "best.csv").open(newline="")))
    assert {r["device"] for r in best} == {"pi4"} and {r["host"] for r in best} == {
        identity.this_host()}
    runs = list(csv.DictReader((one / "runs.csv").open(newline="")))
    assert {r["input_values"] for r in runs} == {""}  # no row has a value: the column stays
    # The page names the one device above its first table instead of in every row.
    with open_store(tmp_path / "pi4") as store:
        report = build(collect(store), "pi4")
    first = report.sections()[0]
    table = first.tables[0]
    assert {"device", "host"} <= {c.key for c in table.columns}
    assert not {"device", "host"} & {c.key for c in table.shown()}
    assert "Every row was measured on pi4 from host" in first.intro
    with open_store(tmp_path / "pi4-pixel") as store:
        two = build(collect(store), "pi4-pixel").sections()[0].tables[0]
    assert "device" in {c.key for c in two.shown()} and "host" not in {c.key for c in two.shown()}


def test_formats_and_metrics_are_rows_of_their_files(tmp_path, monkeypatch):
    _one, two = reports(tmp_path, monkeypatch)
    formats = list(csv.DictReader((two / "formats.csv").open(newline="")))
    pixel = {(r["variant"], r["threads"]): r for r in formats if r["device"] == "pixel"}
    assert set(pixel) >= {("tflite", "1"), ("tflite", "4"), ("onnx", "8")}
    assert float(pixel["tflite", "4"]["median_ms"]) == 2.5
    assert pixel["tflite", "4"]["fastest_at_threads"]
    assert not pixel["onnx", "4"]["fastest_at_threads"]
    summary = list(csv.DictReader((two / "robust_corrupt_summary.csv").open(newline="")))
    assert {(r["device"], r["metric"]) for r in summary} == {
        ("pi4", "mNR"), ("pixel", "mNR"), ("pixel", "mean_G")}


def test_two_hosts_runs_show_a_host_column_on_the_page_too(tmp_path, monkeypatch):
    with open_store(tmp_path / "results") as store:
        for host in ("lab-a", "lab-b"):
            monkeypatch.setenv(identity.HOST_ENV, host)
            add(store, fmt="tflite", result=result(5.0))
            add(store, fmt="onnx", result=result(4.0))
        report = build(collect(store), "results")
    best = report.sections()[0].tables[0]
    assert "host" in {c.key for c in best.shown()} and "device" not in {c.key for c in best.shown()}
    assert {r["host"] for r in best.rows} == {"lab-a", "lab-b"}
    write(report, "csv", tmp_path / "csv")
    rows = list(csv.DictReader((tmp_path / "csv" / "runs.csv").open(newline="")))
    assert sorted(r["host"] for r in rows) == ["lab-a", "lab-a", "lab-b", "lab-b"]
    # The first screen ranks within one host's device; a plot panel and the header name both.
    assert [r["fastest"] is not None for r in best.rows] == [True, False, True, False]
    from aiot.host.report.html import _summary
    from aiot.host.report.plots import latency_threads

    assert "Devices: pi4, from hosts lab-a, lab-b." in _summary(report)[1]
    titles = [ax.get_title() for ax in latency_threads(report).axes if ax.get_visible()]
    assert titles == ["pi4 · lab-a", "pi4 · lab-b"]


def test_one_device_or_two_the_export_has_the_same_columns(cli, tmp_path):
    texts = []
    for devices in (("pi4",), ("pi4", "pixel")):
        folder = tmp_path / "-".join(devices)
        with open_store(folder) as store:
            for device in devices:
                add(store, device=device, accuracy=None if device == "pixel" else 0.7)
        texts.append(cli("--results-dir", str(folder), "results", "export", "-f", "csv").stdout)
    one, two = (list(csv.reader(io.StringIO(text))) for text in texts)
    assert one[0] == two[0] == list(record_view.CSV_COLUMNS)
    assert one[0][one[0].index("device") + 1] == "host"
    rows = list(csv.DictReader(io.StringIO(texts[0])))
    assert [r["host"] for r in rows] == [identity.this_host()]
    # An empty export has the header alone, the same one.
    empty = cli("--results-dir", str(tmp_path / "none"), "results", "export", "-f", "csv").stdout
    assert next(csv.reader(io.StringIO(empty))) == list(record_view.CSV_COLUMNS)


def test_an_old_record_exports_its_host_name():
    old = RunRecord(id="a" * 32, kind="latency", status="ok", spec={}, device="pi4",
                    created_at="2025-01-01T00:00:00+00:00", provenance={"host": {"hostname": "ws"}})
    (row,) = csv.DictReader(io.StringIO(record_view.to_csv([old])))
    assert row["host"] == "ws" and row["device"] == "pi4"
