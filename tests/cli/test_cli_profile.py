"""``aiot run/sweep --profile``: per-operator time from each runtime's own profiler, on the
local device, stored with the record and shown as the slowest ops."""

from __future__ import annotations

import importlib.util

import pytest

from tests.helpers import fast

FAST = fast(5, warmup_runs=1)


def need(*modules: str) -> None:
    for module in modules:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")


def check_profile(profile: dict, tool: str, types: set[str]) -> None:
    assert profile["available"] and tool in profile["tool"]
    assert profile["runs"] == 20 and profile["unit"] == "ms per inference"
    ops = profile["ops"]
    assert ops and all(op["ms"] >= 0 for op in ops)
    assert [op["ms"] for op in ops] == sorted((op["ms"] for op in ops), reverse=True)
    assert sum(op["pct"] for op in ops) == pytest.approx(100, abs=0.5)
    assert profile["total_ms"] == pytest.approx(sum(op["ms"] for op in ops), rel=1e-3)
    assert types <= {op["type"] for op in ops}
    assert {t["type"] for t in profile["by_type"]} == {op["type"] for op in ops}


@pytest.mark.slow
def test_onnx_and_ptl_runs_show_their_slowest_operators(cli):
    need("onnxruntime", "torch")
    rows = cli.json("sweep", "-m", "tiny_cnn", "-f", "onnx,ptl", "--threads", "1", "--profile",
                    *FAST)
    by_format = {r["format"]: r for r in rows}
    assert set(by_format) == {"onnx", "ptl"}
    onnx = by_format["onnx"]["result"]["profile"]
    check_profile(onnx, "ONNX Runtime session profiling", {"Conv", "Gemm", "MaxPool"})
    # ONNX Runtime names its (fused) nodes: tiny_cnn's three convolutions are three rows.
    assert sum(op["type"] == "Conv" for op in onnx["ops"]) == 3
    ptl = by_format["ptl"]["result"]["profile"]
    check_profile(ptl, "torch.autograd.profiler", {"aten::addmm"})
    # A lite module has no layer names: ops at distinct input shapes are told apart by them.
    convs = [op["name"] for op in ptl["ops"] if "conv2d" in op["type"] and "[" in op["name"]]
    assert len(set(convs)) >= 3
    # Stored with the record, as the CLI printed it.
    stored = cli.record(by_format["onnx"]["id"])
    assert stored.result["profile"]["ops"] == onnx["ops"]
    # The timed run is not the profiled one: a profiled run's spec says so, and its key differs.
    assert by_format["onnx"]["spec"]["params"]["profile"] is True

    res = cli("run", "-m", "tiny_cnn", "-f", "onnx", "--profile", *FAST)
    assert "slowest operators, tiny_cnn · onnx · 1t @ local: ONNX Runtime session profiling" in res.stdout
    top = onnx["ops"][0]["type"]
    assert top in res.stdout and "ms / inference" in res.stdout
    # results show prints a stored run's slowest operators too.
    shown = cli("results", "show", by_format["ptl"]["id"]).stdout
    assert "slowest operators, tiny_cnn · ptl · 1t @ local: PyTorch profiler" in shown
    assert ptl["ops"][0]["type"] in shown


@pytest.mark.slow
def test_a_runtime_without_a_profiler_says_so(cli):
    need("ai_edge_litert", "litert_torch")
    (row,) = cli.json("run", "-m", "tiny_cnn", "-f", "tflite", "--profile", *FAST)
    profile = row["result"]["profile"]
    assert profile["available"] is False and "--native benchmark_model" in profile["reason"]
    res = cli("run", "-m", "tiny_cnn", "-f", "tflite", "--profile", *FAST)
    assert "no per-operator times: ai-edge-litert's Python Interpreter" in " ".join(res.stdout.split())


def test_runs_without_profile_keep_their_spec_and_key():
    from aiot.host.engine.campaign import run_key
    from aiot.host.engine.runs import MeasureParams, RunRequest

    plain = RunRequest("local", "tiny_cnn", "onnx", 1)
    assert "profile" not in plain.to_spec()["params"]
    profiled = RunRequest("local", "tiny_cnn", "onnx", 1, params=MeasureParams(profile=True))
    assert profiled.to_spec()["params"]["profile"] is True
    assert run_key(plain) != run_key(profiled)


def test_op_times_are_medians_of_calls():
    """One preempted call among many does not move an op up the table."""
    from aiot.device_agent.profiling import summarize

    rows = [{"name": "conv", "type": "Conv", "us": us} for us in (10, 10, 11, 900)]
    rows += [{"name": "relu", "type": "Relu", "us": 2.0} for _ in range(8)]  # 2 calls a run
    answer = summarize(rows, runs=4)
    assert [op["name"] for op in answer["ops"]] == ["conv", "relu"]
    assert answer["ops"][0]["ms"] == pytest.approx(0.0105)  # median 10.5 us, one call a run
    assert answer["ops"][1] == {"name": "relu", "type": "Relu", "ms": 0.004, "calls": 2.0,
                                "pct": pytest.approx(27.586, abs=1e-3)}
    assert answer["by_type"][0]["type"] == "Conv" and answer["ops_left_out"] == 0


@pytest.mark.slow
def test_executorch_ops_from_its_etdump(cli):
    """The .pte runs in the executorch toolchain; its ETDump names each XNNPACK operator."""
    from tests.converters.conftest import need_toolchain

    need_toolchain("executorch")
    (row,) = cli.json("run", "-m", "tiny_cnn", "-f", "executorch", "--profile", *FAST)
    profile = row["result"]["profile"]
    check_profile(profile, "ExecuTorch ETDump", {"Fully Connected (NC, F32) GEMM"})
    convs = [op for op in profile["ops"] if op["type"].startswith("Convolution")]
    assert len(convs) == 3 and all(op["name"].startswith(op["type"] + " #") for op in convs)
    # The delegate call around the ops is not an op of its own.
    assert "DELEGATE_CALL" not in {op["name"] for op in profile["ops"]}
