"""``aiot paper aiotbench`` on local: every (model, test) row, skips with reasons, accuracy,
and a second call resuming instead of measuring again."""

from __future__ import annotations

import pytest

pytest.importorskip("litert_torch")

FAST = ("--min-runs", "5", "--min-s", "0")  # `paper aiotbench` takes only these two


@pytest.mark.slow
def test_aiotbench_rows_on_local(cli):
    rows = cli.json("paper", "aiotbench", "--models", "tiny_cnn", "--dataset", "fashion-mnist",
                    "--limit", "64", *FAST)
    by_test = {r["test"]: r for r in rows}
    assert sorted(by_test) == ["caffe2", "pytorch", "tflite-cpu", "tflite-nnapi"]
    assert "NNAPI is Android's" in by_test["tflite-nnapi"]["reason"]
    assert by_test["tflite-nnapi"]["status"] == by_test["caffe2"]["status"] == "skipped"
    assert "speed_benchmark" in by_test["caffe2"]["reason"]
    for name in ("tflite-cpu", "pytorch"):
        r = by_test[name]
        assert r["status"] == "ok" and r["load_ms"] > 0 and r["mean_ms"] > 0 and r["size_bytes"] > 0
        assert 0 <= r["accuracy"] <= 1 and r["validity"] == "VALID"
    again = cli("paper", "aiotbench", "--models", "tiny_cnn", "--dataset", "fashion-mnist",
                "--limit", "64", *FAST, "--json")
    assert "resuming" in again.stderr
    assert len(cli.json("results", "list")) == 4  # nothing measured twice
