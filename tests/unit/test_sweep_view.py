"""The sweep table's rows: order, speed-up, throughput, INVALID reasons, emulated devices."""

from __future__ import annotations

import re

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


def test_a_failed_or_skipped_run_says_why_in_its_status_cell():
    from dataclasses import replace

    from aiot.host.cli.sweep_view import STATUS_REASON_CHARS, brief_reason

    failed = replace(_record("f", 1, None, status="failed", validity=None),
                     reason="tflite conversion failed at export: RuntimeError: Lowering not found: "
                            "aten._linalg_det.default (run with --verbose for the toolchain's traceback)")
    assert status_cell(failed) == ("[red]failed[/]: tflite export: RuntimeError: Lowering not found: "
                                   "aten._linalg_det.default")
    skipped = replace(_record("s", 16, None, status="skipped", validity=None),
                      reason="16 threads but the device has 4 cores")
    assert status_cell(skipped) == "[red]skipped[/]: 16 threads but the device has 4 cores"
    # A reason from a device is one line in the cell, its markup shown as it is, and cut short.
    long = brief_reason("AgentError: [bold]boom[/]\n" + "x" * 300)
    assert "\n" not in long and len(long) == STATUS_REASON_CHARS and long.endswith("…")
    hostile = replace(failed, reason="phone: [red]not red[/] \x1b[2J")
    assert "\\[red]" in status_cell(hostile) and "\x1b" not in status_cell(hostile)
    assert status_cell(replace(failed, reason=None)) == "[red]failed[/]"


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
    """Each row's whole cell in ``column`` of the run table (no box: columns start where
    their headers do), its folded lines joined."""
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("id "))
    starts = [m.start() for m in re.finditer(r"\S+", lines[head])] + [None]
    cells = []
    for line in lines[head + 1:]:
        if not line.strip():
            break
        if line[:starts[1]].strip():  # a row's first line (its id); the others continue the row
            cells.append("")
        cells[-1] += line[starts[column]:starts[column + 1]].strip()
    return cells


def test_names_are_never_cut_at_100_columns(monkeypatch):
    """Issue 39: rows of one sweep must be told apart at 100 columns (``mynet.py:ma…`` ×3 was):
    a long name folds onto a second line, whole."""
    runs = []
    for i, factory in enumerate(("make_small", "make_medium", "make_large")):
        run = _record(f"{i}" * 32, 1, 12.5, device="face_detection_board")
        run.model = f"mynet.py:{factory}"
        runs.append(run)
    monkeypatch.setattr(out, "width", 100)
    with out.capture() as captured:
        print_run_table(runs)
    text = captured.get()
    assert max(len(line) for line in text.splitlines()) <= 100, text
    assert _column_cells(text, 0) == ["0" * 8, "1" * 8, "2" * 8]
    # The device, the same in every row, is said once above the table, whole.
    assert text.splitlines()[0].startswith("every run: device face_detection_board,")
    assert _column_cells(text, 1) == ["mynet.py:make_small", "mynet.py:make_medium", "mynet.py:make_large"]


def test_a_12_run_sweep_table_fits_100_columns(monkeypatch):
    """Issue 39: the sweep's table of 12 runs (4 formats × 3 thread counts, INVALID for load)
    was about 120 columns wide; every row and every column now fits 100, and the columns the
    same in every row (device, input) are said once above it."""
    runs = [_record(f"{fmt}{threads}" + "0" * 30, threads, 10.0 / threads, fmt=fmt, validity="INVALID",
                    reasons=["device busy: other processes kept 1.7 CPUs busy", "CV above limit: x"],
                    device="face_detection_board")
            for fmt in ("onnx", "tflite", "ptl", "lce") for threads in (1, 2, 4)]
    monkeypatch.setattr(out, "width", 100)
    with out.capture() as captured:
        print_run_table(runs, sweep=True)
    lines = captured.get().splitlines()
    table = lines[:lines.index(next(line for line in lines if line.startswith("speed-up:")))]
    assert max(len(line) for line in table) <= 100, "\n".join(table)
    assert table[0].startswith("every run: device face_detection_board")
    assert len(_column_cells("\n".join(table), 0)) == 12
    assert all("INVALID" in cell for cell in _column_cells("\n".join(table), 10)), table
