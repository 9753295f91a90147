"""The sweep table's int8 speed-up: an int8 run against the float run of the same model,
runtime, device and thread count (issue 38), and only when the sweep holds both."""

from __future__ import annotations

from aiot.host.cli._output import out
from aiot.host.cli.run_table import print_run_table
from aiot.host.cli.sweep_view import float_twin, int8_speedups
from aiot.host.store.store import RunRecord


def _run(rid, model, fmt, threads, median, device="phone", options=None, status="ok"):
    spec = {"model": model, "format": fmt, "threads": threads, "device": device,
            **({"options": options} if options else {})}
    return RunRecord(id=rid, kind="latency", status=status, created_at="2026-01-01T00:00:00+00:00",
                     spec=spec, provenance={"device": {}}, device=device, model=model, format=fmt,
                     threads=threads, median_ms=median, validity="VALID",
                     result={"stats_ms": {"median": median}, "validity": {"verdict": "VALID", "reasons": []}})


def test_int8_runs_are_paired_with_their_float_run_per_runtime_device_and_threads():
    runs = [_run("f1", "tiny_cnn", "tflite", 1, 8.0), _run("q1", "tiny_cnn", "tflite", 1, 2.0,
                                                           options={"quant": "int8"}),
            _run("f2", "tiny_cnn", "tflite", 2, 5.0), _run("q2", "tiny_cnn", "tflite", 2, 2.5,
                                                           options={"quant": "dynamic-int8"}),
            _run("o1", "tiny_cnn", "onnx", 1, 6.0), _run("l1", "tiny_cnn_lsq8", "onnx", 1, 3.0),
            _run("l4", "tiny_cnn_lsq8", "onnx", 4, 1.0),  # no float run at 4 threads
            _run("t1", "tiny_cnn_lsq8", "tflite", 1, 4.0),  # beside plain tiny_cnn as tflite
            _run("qb", "tiny_cnn", "tflite", 1, 1.0, device="board", options={"quant": "int8"}),
            _run("fp16", "tiny_cnn", "tflite", 1, 7.0, options={"quant": "fp16"})]
    gains = int8_speedups(runs)
    assert gains == {"q1": 4.0, "q2": 2.0, "l1": 2.0, "l4": None, "t1": 2.0, "qb": None}
    assert float_twin(runs[0]) is None and float_twin(runs[-1]) is None  # float, fp16: not int8
    assert float_twin(_run("d8", "tiny_cnn_dorefa8", "onnx", 1, 1.0)) is None  # not deployed as int8
    assert float_twin(_run("l2", "tiny_cnn_lsq2", "onnx", 1, 1.0)) is None
    assert float_twin(_run("bnn", "resnet18_bnn", "onnx", 1, 1.0)) is None
    failed = _run("qf", "tiny_cnn", "tflite", 1, None, options={"quant": "int8"}, status="failed")
    assert int8_speedups([runs[0], failed]) == {"qf": None}


def test_the_column_shows_only_when_a_sweep_holds_an_int8_run_and_its_float_run():
    with out.capture() as captured:
        print_run_table([_run("f1", "tiny_cnn", "onnx", 1, 6.0), _run("l1", "tiny_cnn_lsq8", "onnx", 1, 3.0)],
                        sweep=True)
    text = captured.get()
    assert "int8 ×" in text and "the float run's median" in text
    (row,) = [line for line in text.splitlines() if "tiny_cnn_lsq8" in line]
    assert row.count("2.00×") == 1  # the int8 gain (its 1-thread speed-up reads 1.00×)
    with out.capture() as captured:
        print_run_table([_run("f1", "tiny_cnn", "onnx", 1, 6.0), _run("f2", "tiny_cnn", "onnx", 2, 3.0)],
                        sweep=True)
    assert "int8 ×" not in captured.get()
