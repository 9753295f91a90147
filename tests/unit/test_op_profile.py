"""TFLite ``benchmark_model``'s op profiling read into a per-operator profile.

Every expected number was read off the recorded fixture text by hand (see
``fixtures/native/SOURCES.md``): a node's time per inference is its ``[avg ms]`` (per call)
times ``[times called]`` (per run).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aiot.host.native import get_adapter
from aiot.host.native.op_profile import TOOL, parse_op_profile

FIXTURES = Path(__file__).parent / "fixtures" / "native" / "benchmark_model"


def read(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_tab_separated_tables_with_a_start_column():
    profile = parse_op_profile(read("2022-02-riscv64-op-profiling.txt"))
    assert profile["available"] and profile["tool"] == TOOL and profile["complete"]
    assert profile["runs"] == 50  # "Timings (microseconds): count=50" of the regular runs
    assert len(profile["ops"]) == 31  # "31 nodes observed"
    top = profile["ops"][0]
    assert top == {"name": "[MobilenetV1/MobilenetV1/Conv2d_5_pointwise/Relu6]:10",
                   "type": "CONV_2D", "ms": 277.374, "calls": 1.0, "pct": pytest.approx(9.403, abs=0.01)}
    # Slowest first, by time per inference; the Init section's AllocateTensors is not an op.
    assert [op["ms"] for op in profile["ops"][:3]] == [277.374, 249.023, 248.456]
    assert "AllocateTensors" not in {op["type"] for op in profile["ops"]}
    # The sum of the Run Order's avg ms, against the tool's own 2.9499e+06 us per run.
    assert profile["total_ms"] == pytest.approx(2949.9, abs=0.1)
    assert profile["by_type"][0] == {"type": "CONV_2D", "ms": 2651.853, "count": 15, "pct": 89.897}
    assert [t["type"] for t in profile["by_type"]] == [
        "CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "SOFTMAX", "SQUEEZE"]


def test_a_delegate_that_takes_the_whole_graph_is_one_node():
    profile = parse_op_profile(read("2022-02-imx8mp-vx-delegate-op-profiling.txt"))
    assert profile["ops"] == [{"name": "[MobilenetV1/Predictions/Reshape_1]:31", "type": "Vx Delegate",
                               "ms": 2.504, "calls": 1.0, "pct": 100.0}]
    assert profile["runs"] == 379


def test_space_aligned_tables_with_multi_word_node_types():
    """The 2023-24 layout: no [start] column, XNNPACK's per-operator rows, names with spaces."""
    profile = parse_op_profile(read("2024-x86-64-xnnpack-op-profiling-excerpt.txt"))
    assert profile["runs"] == 64 and not profile["complete"]  # Run Order cut in this excerpt
    names = [op["name"] for op in profile["ops"]]
    assert names[0] == ("[StatefulPartitionedCall:3, StatefulPartitionedCall:2, "
                        "StatefulPartitionedCall:1, StatefulPartitionedCall:0]:266")
    assert profile["ops"][1]["type"] == "Convert (NC, QS8, F32)"
    # DWConv:7 runs twice per inference at 0.258 ms a call.
    dw7 = next(op for op in profile["ops"] if op["name"] == "Delegate/Convolution (NHWC, QC8) DWConv:7")
    assert dw7["ms"] == pytest.approx(0.516) and dw7["calls"] == 2.0
    # Without the Run Order the total is the summary's (every node), not the top ten's.
    assert profile["total_ms"] == pytest.approx(15.238, abs=1e-3)
    assert profile["by_type"][0] == {"type": "Convolution (NHWC, QC8) GEMM", "ms": 5.236, "count": 62,
                                     "pct": 34.361}
    assert len(profile["by_type"]) == 11


def test_the_timing_parse_is_unchanged_by_the_profiling_tables():
    record = get_adapter("benchmark_model").parse(read("2022-02-imx8mp-cpu-op-profiling.txt"))
    assert record["stats_ms"]["count"] == 50 and record["stats_ms"]["mean"] == pytest.approx(162.980)
    assert parse_op_profile(read("2022-02-imx8mp-cpu-op-profiling.txt"))["total_ms"] == pytest.approx(
        162.908, abs=1e-3)


@pytest.mark.parametrize("name", ["2019-08-yuenshome-77.txt", "2020-08-tensorflow-42507.txt",
                                  "2021-09-xnnpack-999.txt"])
def test_outputs_without_op_profiling_give_none(name):
    assert parse_op_profile(read(name)) is None


def test_the_adapters_ask_for_op_profiling():
    for tool in ("benchmark_model", "lce_benchmark_model"):
        adapter = get_adapter(tool)
        assert adapter.profile_flags == ("--enable_op_profiling=true",)
        assert adapter.parse_profile(read("2022-02-riscv64-op-profiling.txt"))["runs"] == 50
    assert get_adapter("speed_benchmark_torch").profile_flags == ()
