"""Placement, read from each runtime's own account: the readers of the agent's backends on
hand-made and recorded inputs (LiteRT's node list, ONNX Runtime's session profile, an
ExecuTorch program's calls, a lite module's bytecode, LCE's operators, benchmark_model's
delegation lines of several versions), the host's checks of what a device sends and of what
an import brings, and the one reader every view and the gate share."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from aiot.device_agent import agent, protocol
from aiot.device_agent.backends.base import placement_entry
from aiot.device_agent.backends.executorch_backend import program_placement
from aiot.device_agent.backends.litert_backend import plan_placement
from aiot.device_agent.backends.onnxruntime_backend import provider_placement
from aiot.device_agent.backends.pytorch_mobile_backend import bytecode_ops, module_placement
from aiot.device_agent.backends.tflite_io import operator_codes
from aiot.host.devices.agent_messages import (
    DeviceMessageError,
    check_answer,
    placement_problem,
    read_message,
)
from aiot.host.native.delegation import delegations, native_placement
from aiot.host.native.registry import get_adapter
from aiot.host.store import readable
from aiot.host.store.placement import (
    fallback_failure,
    partly_delegated,
    placement_text,
    short_text,
)
from aiot.host.store.validate import BadRecord, check_record

FIXTURES = Path(__file__).parent / "fixtures"
NATIVE = FIXTURES / "native" / "benchmark_model"

#: LiteRT's nodes for CONV_2D → CUMSUM → MEAN → FULLY_CONNECTED (tensors 0 in, 9 out; 1-4
#: weights), as an interpreter lists them after XNNPACK cut the graph around CUMSUM.
NAMES = ["CONV_2D", "CUMSUM", "MEAN", "FULLY_CONNECTED", "DELEGATE", "DELEGATE"]
INPUTS = [[0, 1, 2], [5, 6], [7, 3], [8, 4, -1], [0, 1, 2], [7, 3, 4]]
OUTPUTS = [[5], [7], [8], [9], [5], [9]]


# -- LiteRT: which nodes each partition replaced ------------------------------------------------

def test_the_execution_plan_says_which_nodes_xnnpack_took():
    found = plan_placement(4, NAMES, INPUTS, OUTPUTS)
    assert found == {"total": 4, "delegated": 3, "partitions": 2, "outside": {"CUMSUM": 1}}
    entry = placement_entry("xnnpack", "execution plan", **found)
    assert entry["complete"] is False and entry["outside_nodes"] == 1
    assert placement_problem(entry) is None


def test_a_graph_in_one_partition_is_complete_and_one_without_a_delegate_is_all_outside():
    whole = plan_placement(4, [*NAMES[:4], "DELEGATE"], [*INPUTS[:4], [0, 1, 2, 3, 4, 6]],
                           [*OUTPUTS[:4], [9]])
    assert whole == {"total": 4, "delegated": 4, "partitions": 1, "outside": {}}
    assert placement_entry("xnnpack", "plan", **whole)["complete"] is True
    bare = plan_placement(4, NAMES[:4], INPUTS[:4], OUTPUTS[:4])
    assert bare["delegated"] == 0 and bare["partitions"] == 0 and sum(bare["outside"].values()) == 4


def test_a_custom_operators_long_name_is_cut_to_what_the_host_reads():
    name = "MyVendorCustomOperator" * 6  # 132 characters from the file
    entry = placement_entry("xnnpack", "plan", total=3, delegated=1, outside={name: 2})
    (kept,) = entry["outside"]
    assert kept == name[:80] and entry["outside"][kept] == 2
    line = protocol.PREFIX + json.dumps({**RESULT, "placement": entry})
    assert read_message(line, "phone")["placement"]["outside_nodes"] == 2


# -- ONNX Runtime: nodes per execution provider --------------------------------------------------

def test_a_cpu_session_profile_puts_every_node_on_the_cpu():
    events = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 90},
              *({"cat": "Node", "name": f"/n{i}_kernel_time", "ts": i, "dur": 1,
                 "args": {"op_name": op, "provider": "CPUExecutionProvider"}}
                for i, op in enumerate(["Conv", "Relu", "Gemm"]))]
    found = provider_placement(events, "CPUExecutionProvider")
    assert found["complete"] is True and found["total_nodes"] == found["delegated_nodes"] == 3
    assert found["by_engine"] == {"CPUExecutionProvider": 3}
    assert found["source"] == "session profile"


def test_a_multi_provider_profile_names_the_nodes_outside_the_requested_provider():
    events = json.loads((FIXTURES / "placement" / "ort-profile-nnapi-xnnpack-cpu-synthesized.json")
                        .read_text())
    found = provider_placement(events, "NnapiExecutionProvider")
    # six nodes, each once though the trace holds two runs; fence events are not nodes
    assert found["total_nodes"] == 6 and found["delegated_nodes"] == 2
    assert found["by_engine"] == {"CPUExecutionProvider": 2, "NnapiExecutionProvider": 2,
                                  "XnnpackExecutionProvider": 2}
    assert found["outside"] == {"ArgMax": 1, "Flatten": 1, "Gemm": 1, "GlobalAveragePool": 1}
    assert found["complete"] is False and placement_problem(found) is None
    xnnpack = provider_placement(events, "XnnpackExecutionProvider")
    assert xnnpack["delegated_nodes"] == 2
    assert xnnpack["outside"]["NnapiExecutionProvider_NNAPI_10405346519880164096_0"] == 1


# -- ExecuTorch and PyTorch Mobile -------------------------------------------------------------

def test_an_executorch_program_is_delegated_partitions_against_its_own_kernels():
    full = program_placement({"XnnpackBackend": 1}, {})
    assert (full["engine"], full["partitions"], full["complete"]) == ("xnnpack", 1, True)
    part = program_placement({"XnnpackBackend": 2}, {"aten::cumsum.out": 1, "aten::add.out": 2})
    assert part["complete"] is False and part["outside_nodes"] == 3
    assert "aten::add.out ×2, aten::cumsum.out ×1" in placement_text({"placement": part})
    portable = program_placement({}, {"aten::convolution.out": 2, "aten::relu.out": 2})
    assert (portable["engine"], portable["complete"]) == ("portable", True)
    assert portable["delegated_nodes"] == 4
    assert "no delegate" in portable["note"]


def test_a_lite_module_counts_its_operator_calls_and_says_when_torch_has_no_xnnpack(tmp_path):
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x + 1).flatten(1).sum(1)

    path = tmp_path / "net.ptl"
    torch.jit.script(Net())._save_for_lite_interpreter(str(path))
    ops = bytecode_ops(str(path))
    assert ops["aten::relu"] == 1 and ops["aten::flatten.using_ints"] == 1
    assert sum(ops.values()) >= 3
    aten = module_placement(ops, xnnpack=False)
    assert (aten["engine"], aten["complete"], aten["outside_nodes"]) == ("aten", True, 0)
    assert "built without XNNPACK" in aten["note"]  # said so, not called a fallback
    xnn = module_placement({"prepacked::linear_clamp_run": 2, "aten::flatten.using_ints": 1}, True)
    assert (xnn["delegated_nodes"], xnn["outside"]) == (2, {"aten::flatten.using_ints": 1})
    with pytest.raises(ValueError, match="unreadable bytecode"):
        bytecode_ops(__file__)  # not a lite module


# -- LCE: its custom operators are its own -----------------------------------------------------

def _tflite_with(ops: list[str | int]) -> bytes:
    """A flatbuffer whose one subgraph runs ``ops`` (custom names or builtin codes) alone."""
    flatbuffers = pytest.importorskip("flatbuffers")
    schema = pytest.importorskip("ai_edge_litert.schema_py_generated")
    model, codes, order = schema.ModelT(), [], []
    for op in ops:
        if op not in order:
            order.append(op)
            code = schema.OperatorCodeT()
            custom = isinstance(op, str)
            code.builtinCode = schema.BuiltinOperator.CUSTOM if custom else op
            code.deprecatedBuiltinCode = 32 if custom else op
            code.customCode = op if custom else None
            codes.append(code)
    graph = schema.SubGraphT()
    graph.operators = []
    for op in ops:
        node = schema.OperatorT()
        node.opcodeIndex, node.inputs, node.outputs = order.index(op), [], []
        graph.operators.append(node)
    graph.tensors, graph.inputs, graph.outputs = [], [], []
    model.version, model.operatorCodes, model.subgraphs = 3, codes, [graph]
    model.buffers = [schema.BufferT()]
    builder = flatbuffers.Builder(0)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def test_lce_benchmark_model_counts_lce_operators_as_its_own(tmp_path):
    artifact = tmp_path / "bnn.tflite"
    artifact.write_bytes(_tflite_with([3, "LceQuantize", "LceBconv2d", "LceBconv2d", 3, 9]))
    assert operator_codes(artifact.read_bytes()) == [3, "LceQuantize", "LceBconv2d",
                                                     "LceBconv2d", 3, 9]
    text = ("INFO: Replacing 2 out of 6 node(s) with delegate (TfLiteXNNPackDelegate) node, "
            "yielding 2 partitions for the whole graph.\nInference timings in us: Init: 1, "
            "First inference: 2, Warmup (avg): 2, Inference (avg): 2\n")
    adapter = get_adapter("lce_benchmark_model")
    found = adapter.placement(adapter.parse(text), artifact, None)
    # 2 XNNPACK + 3 LCE operators of 6: one operator is outside both
    assert found["engine"] == "lce" and found["by_engine"] == {"xnnpack": 2, "lce": 3}
    assert (found["delegated_nodes"], found["outside_nodes"], found["complete"]) == (5, 1, False)


# -- benchmark_model's delegation lines, recorded outputs of several versions --------------------

def _native(name: str, delegate: str | None = None, artifact=None) -> dict | None:
    adapter = get_adapter("benchmark_model")
    record = adapter.parse((NATIVE / name).read_text(encoding="utf-8"))
    return adapter.placement(record, artifact or Path("/nonexistent"), delegate)


def test_a_logcat_line_of_a_partly_delegated_graph():
    found = _native("2026-07-logcat-xnnpack-792-of-836.txt")
    assert (found["engine"], found["total_nodes"]) == ("xnnpack", 836)
    assert found["delegated_nodes"] == 792
    assert (found["outside_nodes"], found["partitions"], found["complete"]) == (44, 21, False)
    assert found["source"].startswith("tool output: Replacing 792 out of 836")  # no logcat prefix
    assert "44 operators (types not reported)" in placement_text({"placement": found})


def test_whole_graph_and_subgraph_spellings_of_a_complete_delegation():
    nnapi = _native("2024-tf2.15-synaptics-nnapi-whole-graph.txt", "nnapi")
    assert (nnapi["engine"], nnapi["delegated_nodes"], nnapi["complete"]) == ("nnapi", 31, True)
    xnn = _native("code-index-mask-estimator-xnnpack-49-of-49.txt")
    assert (xnn["engine"], xnn["total_nodes"], xnn["complete"]) == ("xnnpack", 49, True)


def test_the_requested_delegate_is_judged_when_two_are_applied():
    gpu = _native("code-index-mask-estimator-gpu-then-nnapi.txt", "gpu")
    assert (gpu["engine"], gpu["delegated_nodes"], gpu["complete"]) == ("gpu", 49, True)
    nnapi = _native("code-index-mask-estimator-gpu-then-nnapi.txt", "nnapi")
    assert (nnapi["engine"], nnapi["partitions"], nnapi["complete"]) == ("nnapi", 0, False)


def test_the_tools_summary_line_without_the_interpreters():
    partial = _native("2021-11-rpi4-xnnpack-partial-22-kernels.txt", "xnnpack")
    assert (partial["partitions"], partial["complete"]) == (22, False)
    assert "total_nodes" not in partial and partly_delegated({"placement": partial})
    vx = _native("2022-02-imx8mp-vx-delegate-op-profiling.txt")
    assert (vx["engine"], vx["complete"]) == ("external", True)


def test_the_old_line_without_out_of_m_counts_against_the_file(tmp_path):
    said = _native("synaptics-nnapi-cache-excerpt-old-line.txt", "nnapi")
    assert said["partitions"] == 1 and "complete" not in said  # M unknown: not judged
    artifact = tmp_path / "m.tflite"
    artifact.write_bytes(_tflite_with([3] * 31))
    counted = _native("synaptics-nnapi-cache-excerpt-old-line.txt", "nnapi", artifact)
    assert (counted["total_nodes"], counted["complete"]) == (31, True)
    artifact.write_bytes(_tflite_with([3] * 20))  # the tool says 31 of a 20-node file: not believed
    assert _native("synaptics-nnapi-cache-excerpt-old-line.txt", "nnapi", artifact) is None


def test_outputs_without_a_delegation_line_have_no_placement():
    for name in ("2019-08-yuenshome-77.txt", "2021-09-xnnpack-999.txt",
                 "2022-02-imx8mp-cpu-op-profiling.txt"):
        assert _native(name) is None, name
    assert delegations("Replacing 3 out of 5 node(s) with delegate (TfLiteXNNPackDelegate) node, "
                       "yielding 1 partitions for subgraph 1.") == []  # a control-flow body
    assert native_placement([], "gpu") is None


# -- what a device sends, and what an import brings ----------------------------------------------

RESULT = {"v": 1, "event": "result", "backend": "litert", "load_ms": 1.0,
          "stats_ms": {"count": 1, "min": 1.0, "max": 1.0, "mean": 1.0, "median": 1.0, "p90": 1.0}}
GOOD = {"engine": "xnnpack", "source": "execution plan", "total_nodes": 4, "delegated_nodes": 3,
        "outside_nodes": 1, "partitions": 2, "outside": {"CUMSUM": 1}, "complete": False}


@pytest.mark.parametrize("change, says", [
    ({"delegated_nodes": 9}, "delegated_nodes 9 is more than total_nodes 4"),
    ({"outside": {"CUMSUM": 2}}, "outside lists 2 node(s) but outside_nodes is 1"),
    ({"delegated_nodes": 2}, "delegated_nodes 2 and outside_nodes 1 are not total_nodes 4"),
    ({"complete": True}, "complete is true with 1 node(s) outside"),
])
def test_a_placement_that_contradicts_itself_is_not_believed(change, says):
    placement = {**GOOD, **change}
    assert placement_problem(placement) == says
    with pytest.raises(DeviceMessageError, match=re.escape(f"invalid result: placement: {says}")):
        check_answer("result", {**RESULT, "placement": placement}, {"backend": "litert"}, "phone")
    check_answer("result", {**RESULT, "placement": GOOD}, {"backend": "litert"}, "phone")


def test_the_protocol_checks_a_placements_kinds():
    lying = {**GOOD, "outside": {"CUMSUM": -1}}
    line = protocol.PREFIX + json.dumps({**RESULT, "placement": lying})
    with pytest.raises(DeviceMessageError, match=r"placement\.outside\.CUMSUM is -1"):
        read_message(line, "phone")
    assert read_message(protocol.PREFIX + json.dumps({**RESULT, "placement": GOOD}),
                        "phone")["placement"] == GOOD


def _record(placement) -> dict:
    return {"id": "a" * 32, "kind": "latency", "status": "ok",
            "created_at": "2026-12-01T00:00:00+00:00", "spec": {}, "provenance": {},
            "result": {"placement": placement}}


def test_an_import_checks_the_placement_as_a_devices():
    check_record(_record(GOOD), 100)
    with pytest.raises(BadRecord, match="result.placement: complete is true with 1 node"):
        check_record(_record({**GOOD, "complete": True}), 100)
    with pytest.raises(BadRecord, match="result.placement.total_nodes is str"):
        check_record(_record({**GOOD, "total_nodes": "4"}), 100)
    # readers read a damaged one as missing, and no view fails on it
    assert readable.repaired("result", {"placement": {"source": "x"}}) == {"placement": None}


def test_a_runtime_that_cannot_tell_leaves_a_note_not_a_failed_run():
    class Broken:
        def placement(self):
            raise RuntimeError("no node accessors in this build")

    found = agent._placement(Broken(), "litert")
    assert found == {"engine": "litert", "source": "none",
                     "note": "placement not read: RuntimeError: no node accessors in this build"}
    assert placement_text({"placement": found}).startswith("not judged: placement not read")
    assert fallback_failure({"placement": GOOD}, {"placement": found}) is None


# -- the one reader: the views' line and the gate ----------------------------------------------

def test_views_say_partly_and_fully_delegated():
    assert placement_text({"placement": GOOD}) == (
        "partly delegated: xnnpack took 3 of 4 operators in 2 partitions; outside: CUMSUM ×1 "
        "(execution plan)")
    assert short_text({"placement": GOOD}) == "xnnpack left CUMSUM ×1 outside"
    full = {**GOOD, "delegated_nodes": 4, "outside_nodes": 0, "partitions": 1, "outside": {},
            "complete": True}
    assert placement_text({"placement": full}) == ("fully delegated: all 4 operators on xnnpack "
                                                   "in 1 partition (execution plan)")
    assert short_text({"placement": full}) is None and not partly_delegated({"placement": full})
    assert placement_text({}) is None and placement_text(None) is None


def test_the_gate_fails_a_candidate_whose_operators_fall_back_and_names_them():
    full = {**GOOD, "delegated_nodes": 4, "outside_nodes": 0, "outside": {}, "complete": True}
    assert fallback_failure({"placement": full}, {"placement": GOOD}) == (
        "placement: 1 more operator(s) fall back outside xnnpack: CUMSUM +1 (A 0 outside, B 1)")
    assert fallback_failure({"placement": GOOD}, {"placement": full}) is None  # fewer: better
    assert fallback_failure({"placement": GOOD}, {"placement": GOOD}) is None
    counted = {k: v for k, v in GOOD.items() if k != "outside"}  # a native tool's: counts only
    assert fallback_failure({"placement": {**counted, "outside_nodes": 0, "delegated_nodes": 4,
                                           "complete": True}}, {"placement": counted}) == (
        "placement: 1 more operator(s) fall back outside xnnpack (A 0 outside, B 1)")
    portable = program_placement({}, {"aten::relu.out": 1})
    assert fallback_failure({"placement": full}, {"placement": portable}) == (
        "placement: B ran on portable, A on xnnpack")
    assert fallback_failure({}, {"placement": GOOD}) is None  # a baseline without one
