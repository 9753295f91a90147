"""Native benchmark binaries through the same run/sweep path as the agent.

The "binary" here is a test double: a shell script that prints a recorded output of TFLite's
``benchmark_model`` (tests/unit/fixtures/native). It tests aiot's plumbing — flags, push by
hash, parsing into the store, provenance — not the tool.
"""

import stat
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parents[1] / "unit" / "fixtures" / "native" / "benchmark_model" / "2021-09-xnnpack-999.txt"

pytest.importorskip("litert_torch")


@pytest.fixture
def fake_benchmark_model(tmp_path):
    script = tmp_path / "benchmark_model"
    # Records its argv so the test can check the flags aiot passed.
    script.write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/argv.txt"\ncat "{FIXTURE}"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.mark.slow
def test_tflite_run_through_a_native_binary_lands_in_the_store(cli, fake_benchmark_model, tmp_path):
    rows = cli.json("run", "-m", "tiny_cnn", "-f", "tflite", "--threads", "2", "--native",
                    "benchmark_model", "--binary", str(fake_benchmark_model), "--min-runs", "7")
    row = rows[0]
    assert row["status"] == "ok", row["reason"]
    assert row["result"]["backend"] == "native:benchmark_model"
    assert row["result"]["stats_ms"]["mean"] > 0 and row["median_ms"] is None  # never invented
    assert row["spec"]["native"] == "benchmark_model"
    assert row["provenance"]["runtime"]["binary"] == "benchmark_model"
    argv = (tmp_path / "argv.txt").read_text()
    assert "--num_threads=2" in argv and "--num_runs=7" in argv and ".tflite" in argv


def test_native_options_are_checked_before_any_work(cli, fake_benchmark_model):
    res = cli("run", "-m", "tiny_cnn", "-f", "onnx", "--native", "benchmark_model", "--binary",
              str(fake_benchmark_model), code=2)
    assert "benchmark_model does not run onnx artifacts" in res.stderr
    res = cli("run", "-m", "tiny_cnn", "-f", "tflite", "--delegate", "nnapi", code=2)
    assert "needs --native" in res.stderr
    res = cli("run", "-m", "tiny_cnn", "-f", "tflite", "--native", "benchmark_model", "--delegate",
              "hexagon", "--binary", str(fake_benchmark_model), code=2)
    assert "has no delegate 'hexagon'" in res.stderr


def test_missing_binary_names_the_inventory_line(cli):
    # Known before any conversion: refused in one line, no failed record.
    res = cli("run", "-m", "tiny_cnn", "-f", "tflite", "--native", "benchmark_model", "--json", code=2)
    assert "no benchmark_model binary configured" in res.stderr and not res.stdout
