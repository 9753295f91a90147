"""bench/formats.py's speed gate (the script is loaded from its file, as in test_bench_campaign)."""

from __future__ import annotations

import sys

import pytest

from tests.helpers import load_bench_script


@pytest.fixture(scope="module")
def formats():
    return load_bench_script("formats")


def test_gate_fails_only_rows_slower_than_their_reference_by_more_than_the_ratio(formats):
    rows = [{"model": "m", "artifact": "ort", "ratio": 1.04},
            {"model": "m", "artifact": "ptl", "ratio": 1.30},
            {"model": "m", "artifact": "tflite", "skipped": "onnx2tf toolchain not installed"},
            {"model": "m", "artifact": "executorch", "ratio": 1.0}]
    assert [r["artifact"] for r in formats.gate_failures(rows, 1.05)] == ["ptl"]
    assert formats.gate_failures(rows, 1.5) == []
    assert [r["artifact"] for r in formats.gate_failures(rows, 1.0)] == ["ort", "ptl"]


def test_best_paths_pair_each_artifact_with_its_runtime_reference(formats):
    pairs = {ours: ref for _runtime, ours, ref, _portable in sys.modules["_best_paths"].PAIRS}
    assert pairs == {"ort": "onnx_all", "ptl": "torchscript_ofi", "tflite": "tflite_onnx2tf"}
