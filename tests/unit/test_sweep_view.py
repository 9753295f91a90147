"""The sweep table's rows: order, speed-up, throughput, INVALID reasons, emulated devices."""

from __future__ import annotations

from aiot.host.cli._output import out
from aiot.host.cli.run_table import print_run_table
from aiot.host.cli.sweep_view import device_cell, sort_key, speedups, status_cell, throughput
from aiot.host.store.store import RunRecord

EMULATED = {"device": {"labels": {"emulated": "adb"}}}


def _record(rid, threads, median, device="phone", fmt="tflite", validity="VALID", reasons=(),
            prov=None, status="ok", **spec):
    return RunRecord(id=rid, kind="latency", status=status, created_at="2026-01-01T00:00:00+00:00",
                     spec={"threads": threads, **spec}, provenance=prov or {"device": {}},
                     device=device, model="tiny_cnn", format=fmt, threads=threads,
                     median_ms=median, validity=validity,
                     result={"stats_ms": {"median": median},
                             "validity": {"verdict": validity, "reasons": list(reasons)}})


def test_rows_sort_by_device_model_format_threads_and_gain_over_one_thread():
    runs = [_record("c", 4, 2.5), _record("a", 1, 10.0), _record("b", 2, 5.0),
            _record("d", 1, 8.0, fmt="onnx"), _record("e", 2, 4.0, device="board"),
            _record("f", 2, 2.0, cluster="big")]  # no 1-thread run on the big cluster
    assert [r.id for r in sorted(runs, key=sort_key)] == ["e", "d", "a", "b", "f", "c"]
    gains = speedups(runs)
    assert gains["a"] == 1.0 and gains["b"] == 2.0 and gains["c"] == 4.0
    assert gains["e"] is None and gains["f"] is None  # nothing at 1 thread to compare with
    assert throughput(runs[1]) == 100.0  # 1000 / 10 ms
    failed = _record("g", 2, None, status="failed")
    assert speedups([runs[1], failed])["g"] is None and throughput(failed) is None


def test_invalid_says_why_and_emulated_devices_are_labelled():
    bad = _record("x", 8, 1.0, validity="INVALID", reasons=[
        "threads above online cores: 8 threads > 2 online cores, …", "device busy: 1.2 CPUs"],
        prov=EMULATED, via="app")
    assert status_cell(bad) == "[green]ok[/] [yellow]INVALID[/]: threads above online cores; device busy"
    assert device_cell(bad) == "phone (via app) (emulated)"
    assert device_cell(_record("y", 1, 1.0)) == "phone"


def test_the_printed_sweep_table_has_the_new_columns():
    runs = [_record("b2", 2, 5.0, validity="INVALID", reasons=["CV above limit: robust CV 0.3"]),
            _record("a1", 1, 10.0, prov=EMULATED)]
    with out.capture() as captured:
        print_run_table(runs, sweep=True)
    text = captured.get()
    assert "speed-up" in text and "inf/s" in text
    lines = [line for line in text.splitlines() if "tiny_cnn" in line]
    assert "a1" in lines[0] and "1.00×" in lines[0] and "100.0" in lines[0] and "(emulated)" in lines[0]
    assert "b2" in lines[1] and "2.00×" in lines[1] and "INVALID: CV above limit" in lines[1]


def _column_cells(text: str, column: int) -> list[str]:
    """Each row's whole cell in ``column`` of a boxed Rich table, its folded lines joined."""
    cells = []
    for line in text.splitlines():
        if not line.startswith("│"):
            continue
        parts = line.split("│")
        if parts[1].strip():  # a row's first line (its id); the others continue the row
            cells.append("")
        cells[-1] += parts[column + 1].strip()
    return cells


def test_names_are_never_cut_at_100_columns(monkeypatch):
    """Issue 39: rows of one sweep must be told apart at 100 columns (``mynet.py:ma…`` ×3 was):
    a long name folds onto a second line, whole. (The 12-column table itself is still wider than
    100 columns: Rich's boxed columns need about 120.)"""
    runs = []
    for i, factory in enumerate(("make_small", "make_medium", "make_large")):
        run = _record(f"{i}" * 32, 1, 12.5, device="face_detection_board")
        run.model = f"mynet.py:{factory}"
        runs.append(run)
    monkeypatch.setattr(out, "width", 100)
    with out.capture() as captured:
        print_run_table(runs)
    text = captured.get()
    assert _column_cells(text, 0) == ["0" * 8, "1" * 8, "2" * 8]
    assert _column_cells(text, 1) == ["face_detection_board"] * 3
    assert _column_cells(text, 2) == ["mynet.py:make_small", "mynet.py:make_medium", "mynet.py:make_large"]
