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


@pytest.mark.slow
def test_native_profile_is_a_second_run_with_op_profiling(cli, tmp_path):
    """``--profile --native benchmark_model``: the timed run as usual, then a separate run
    with ``--enable_op_profiling=true`` whose tables become the record's profile."""
    recorded = FIXTURE.parent / "2022-02-riscv64-op-profiling.txt"
    script = tmp_path / "benchmark_model"
    script.write_text(f'#!/bin/sh\necho "$@" >> "{tmp_path}/argv.txt"\ncat "{recorded}"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (row,) = cli.json("run", "-m", "tiny_cnn", "-f", "tflite", "--native", "benchmark_model",
                      "--binary", str(script), "--profile", "--cooldown-max-s", "0")
    assert row["status"] == "ok", row["reason"]
    calls = (tmp_path / "argv.txt").read_text().splitlines()
    assert len(calls) == 2 and "--enable_op_profiling=true" not in calls[0]
    assert calls[1].endswith("--enable_op_profiling=true")
    profile = row["result"]["profile"]
    assert profile["tool"] == "benchmark_model --enable_op_profiling" and profile["runs"] == 50
    assert profile["ops"][0]["ms"] == 277.374 and len(profile["ops"]) == 31
    res = cli("run", "-m", "tiny_cnn", "-f", "tflite", "--native", "benchmark_model",
              "--binary", str(script), "--profile", "--cooldown-max-s", "0")
    assert "Conv2d_5_pointwise" in res.stdout and "CONV_2D" in res.stdout
