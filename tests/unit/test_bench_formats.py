"""bench/formats.py's speed gate (the script is loaded from its file, as in test_bench_campaign)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def formats():
    sys.path.insert(0, str(BENCH))  # for its ``_common`` / ``_best_paths`` imports
    try:
        spec = importlib.util.spec_from_file_location("bench_formats", BENCH / "formats.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


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
