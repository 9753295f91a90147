"""``aiot report`` answers "how fast is my model, where" first: the best median per model,
device and format; the formats of a model compared on a device; runs at different input
shapes never merged; the slowest operators of profiled runs; and plots that stay readable
with 20 series (distinct colours, legends off the data, tick labels that do not overlap)."""

from __future__ import annotations

import pytest

from aiot.host.report.build import build, collect
from aiot.host.report.html import write
from aiot.host.report.summary import FASTEST
from aiot.host.store import open_store
from tests.unit.test_report import add

LONG = "yolov8n_detector_exported_from_ultralytics_with_dynamic_batch_{}.onnx"


def result(median: float, shape=(1, 3, 224, 224), profile=None, invalid=()) -> dict:
    found = {"stats_ms": {"median": median, "mean": median, "p90": median * 1.1},
             "validity": {"verdict": "INVALID" if invalid else "VALID", "reasons": list(invalid)},
             "input_shape": list(shape), "inputs": [{"name": "x", "shape": list(shape)}]}
    if profile is not None:
        found["profile"] = profile
    return found


def report_of(tmp_path, fill) -> object:
    with open_store(tmp_path / "results") as store:
        fill(store)
        records = collect(store)
    return build(records, source="results", generated_at="2026-01-02T03:04:05+00:00")


def three_formats(store) -> None:
    for fmt, factor in (("tflite", 1.0), ("onnx", 0.8), ("ptl", 1.6)):
        for threads, median in ((1, 10.0), (2, 6.0), (4, 5.0)):
            m = median * factor
            add(store, fmt=fmt, threads=threads, median=m, result=result(m))
    # onnx is fastest at 1 and 2 threads, but at 4 threads tflite wins.
    add(store, fmt="tflite", threads=4, median=3.0, result=result(3.0))


def test_the_first_part_is_the_best_median_per_model_device_and_format(tmp_path):
    report = report_of(tmp_path, three_formats)
    first = report.sections()[0]
    assert first.key == "summary" and first.title == "How fast is each model, where"
    rows = first.tables[0].rows
    assert [(r["variant"], r["median_ms"], r["threads"]) for r in rows] == [
        ("tflite", 3.0, 4), ("onnx", 4.0, 4), ("ptl", 8.0, 4)]
    assert rows[0]["fastest"] == FASTEST and rows[1]["fastest"] is None
    assert rows[1]["vs_fastest"] == pytest.approx(4.0 / 3.0)
    assert rows[0]["per_s"] == pytest.approx(1000 / 3.0) and rows[0]["input_shape"] == "1x3x224x224"


def test_formats_compared_per_thread_count_with_the_fastest_marked(tmp_path):
    report = report_of(tmp_path, three_formats)
    section = next(s for s in report.sections() if s.key == "formats")
    table = section.tables[0]
    assert [c.key for c in table.columns][6:9] == ["t1", "t2", "t4"]
    rows = {r["variant"]: r for r in table.rows}
    assert rows["onnx"]["t1"] == pytest.approx(8.0) and rows["ptl"]["t2"] == pytest.approx(9.6)
    assert rows["onnx"]["fastest_at"] == "1t, 2t" and rows["tflite"]["fastest_at"] == "4t"
    assert rows["tflite"]["fastest"] == FASTEST and rows["ptl"]["fastest_at"] is None


def test_one_format_per_device_has_no_comparison_and_empty_parts_are_left_out(tmp_path):
    report = report_of(tmp_path, lambda store: add(store, result=result(5.0)))
    keys = [s.key for s in report.sections()]
    assert "formats" not in keys and "bnn" not in keys and "telemetry" not in keys
    assert keys[0] == "summary" and report.sections()[0].tables[0].rows[0]["fastest"] is None
    assert set(report.left_out()) >= {"bnn", "telemetry"}


def test_runs_at_different_input_shapes_are_never_merged(tmp_path):
    def fill(store):
        for threads in (1, 2):
            add(store, fmt="onnx", threads=threads, median=4.0 * threads,
                result=result(4.0 * threads, (1, 3, 320, 320)), shapes={"x": [1, 3, 320, 320]})
            add(store, fmt="onnx", threads=threads, median=9.0 * threads,
                result=result(9.0 * threads, (1, 3, 640, 640)), shapes={"x": [1, 3, 640, 640]})

    report = report_of(tmp_path, fill)
    assert len(report.plotted_runs()) == 4  # newest per config: the shape is part of it
    rows = report.sections()[0].tables[0].rows
    assert {(r["input_shape"], r["median_ms"]) for r in rows} == {("1x3x320x320", 4.0),
                                                                   ("1x3x640x640", 9.0)}
    from aiot.host.report.plots import latency_threads

    fig = latency_threads(report)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["resnet18 · onnx · 1x3x320x320", "resnet18 · onnx · 1x3x640x640"]


def test_slowest_operators_of_profiled_runs(tmp_path):
    profile = {"available": True, "tool": "ONNX Runtime session profiling", "runs": 20,
               "ops": [{"name": f"/conv{i}", "type": "Conv", "ms": 0.1 * i, "pct": 5.0 * i}
                       for i in range(1, 13)]}
    none = {"available": False, "reason": "ai-edge-litert's Python Interpreter has no profiler"}

    def fill(store):
        add(store, fmt="onnx", median=2.0, result=result(2.0, profile=profile))
        add(store, fmt="tflite", median=3.0, result=result(3.0, profile=none))

    report = report_of(tmp_path, fill)
    rows = next(s for s in report.sections() if s.key == "operators").tables[0].rows
    onnx = [r for r in rows if r["variant"] == "onnx"]
    assert [r["op"] for r in onnx] == [f"/conv{i}" for i in range(12, 2, -1)]  # top 10, slowest first
    assert onnx[0]["pct"] == pytest.approx(0.6) and onnx[0]["notes"].startswith("ONNX Runtime")
    (tflite,) = [r for r in rows if r["variant"] == "tflite"]
    assert tflite["notes"] == "no per-operator times: " + none["reason"]


def twenty_series(store) -> None:
    for i in range(10):
        for fmt, factor in (("onnx", 1.0), ("tflite", 1.3)):
            for threads in (1, 2, 4, 8):
                m = (5.0 + i) * factor / threads ** 0.5
                add(store, model=LONG.format(i), fmt=fmt, threads=threads, median=m, load=3.0 + i,
                    result=result(m))


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_plots_stay_readable_at_twenty_series(tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_hex

    from aiot.host.report.plots import latency_threads, load_time

    report = report_of(tmp_path, twenty_series)
    fig = latency_threads(report)
    FigureCanvasAgg(fig).draw()
    (ax,) = [a for a in fig.axes if a.get_visible()]
    colours = [to_hex(bar.lines[0].get_color()) for bar in ax.containers]  # each series' line
    assert len(colours) == 20 and len(set(colours)) == 20  # no repeated colour
    (legend,) = fig.legends
    assert len(legend.get_texts()) == 20
    renderer = fig.canvas.get_renderer()
    assert not _overlap(legend.get_window_extent(renderer), ax.get_window_extent(renderer))
    assert all(len(t.get_text()) <= 44 for t in legend.get_texts())  # long names shortened

    fig = load_time(report)
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    ticks = [t.get_window_extent(renderer) for t in ax.get_yticklabels() if t.get_text()]
    assert len(ticks) == 20
    assert not any(_overlap(a, b) for i, a in enumerate(ticks) for b in ticks[i + 1:])


def test_the_page_opens_with_the_answer(tmp_path):
    pytest.importorskip("matplotlib")
    report = report_of(tmp_path, three_formats)
    files, _ = write(report, "html", tmp_path / "out")
    page = files[0].read_text()
    first = page.index('<section id="summary">')
    assert first < page.index('id="formats"') < page.index('id="latency"') < page.index(
        'id="provenance"') < page.index('id="runs"')
    assert '<tr class="fastest">' in page and FASTEST in page
