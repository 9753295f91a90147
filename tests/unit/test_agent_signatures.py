"""The device agent reads any input signature: several inputs and outputs, any dtype, scalar
inputs, dynamic dims set by ``input_shapes`` or by a pushed ``.npz`` (``inputs``).

Fast: the null backend, ONNX Runtime on graphs made with ``onnx.helper`` and a ``.ptl`` saved
by plain PyTorch, all in this process. The TFLite and ExecuTorch artifacts, which need the
toolchain environments to build or run, are in tests/converters/test_third_party_artifacts.py.
"""

import json
import subprocess
import sys

import numpy as np
import pytest

from aiot.device_agent import agent as agent_mod
from aiot.device_agent import protocol, signature
from aiot.device_agent.signature import SpecError
from aiot.device_agent.spec import RunSpec
from tests.third_party import agent_answer, agent_events


def _entry(name, shape, dtype="float32", quant=None):
    return signature.entry(name, shape, dtype, quant)


# -- signature helpers ---------------------------------------------------------------------


def test_entries_mark_symbolic_and_missing_dims_dynamic():
    spec = signature.entry("x", ["N", None, 3, -1], "float16")
    assert spec == {"name": "x", "shape": [-1, -1, 3, -1], "dtype": "float16",
                    "quantization": None}
    assert signature.quantization(0.5, 3) == {"scale": 0.5, "zero_point": 3}
    assert signature.quantization(0.0, 0) is None and signature.quantization(None, 0) is None


def test_overrides_set_dynamic_dims_only_and_name_what_is_wrong():
    inputs = [_entry("a", [-1, 8]), _entry("k", [], "int64")]
    assert signature.resolve(inputs, {"a": [3, 8]}) == [[3, 8], []]
    assert signature.resolve(inputs, None) == [[-1, 8], []]
    with pytest.raises(SpecError, match=r"names 'x', which is no input .*inputs: a, k"):
        signature.resolve(inputs, {"x": [1]})
    with pytest.raises(SpecError, match=r"gives 'a' shape \[3, 9\]; .* is \[-1, 8\]"):
        signature.resolve(inputs, {"a": [3, 9]})  # a fixed dim cannot change
    with pytest.raises(SpecError, match="gives 'a' shape"):
        signature.resolve(inputs, {"a": [3]})  # nor the rank


def test_generated_inputs_follow_their_element_type():
    rng = np.random.default_rng(0)
    u8 = signature.generate(_entry("q", [4096], "uint8", {"scale": 0.1, "zero_point": 0}),
                            [4096], rng)
    assert u8.dtype == np.uint8 and u8.min() == 0 and u8.max() == 255  # the whole range
    i8 = signature.generate(_entry("q", [4096], "int8", {"scale": 0.1, "zero_point": 0}),
                            [4096], rng)
    assert i8.min() == -128 and i8.max() == 127
    idx = signature.generate(_entry("ids", [1000], "int64"), [1000], rng)
    assert idx.dtype == np.int64 and set(np.unique(idx)) == set(range(10))  # small: indices
    raw_u8 = signature.generate(_entry("pixels", [1000], "uint8"), [1000], rng)
    assert raw_u8.max() < 10  # not quantized: an integer like any other
    flags = signature.generate(_entry("mask", [1000], "bool"), [1000], rng)
    assert flags.dtype == np.bool_ and 300 < flags.sum() < 700
    half = signature.generate(_entry("h", [2, 3], "float16"), [2, 3], rng)
    assert half.dtype == np.float16 and half.shape == (2, 3)
    scalar = signature.generate(_entry("k", [], "int64"), [], rng)
    assert scalar.shape == () and scalar.dtype == np.int64
    with pytest.raises(SpecError, match="give --inputs"):
        signature.generate(_entry("s", [1], "string"), [1], rng)


def test_the_first_float_input_is_the_one_older_agents_generated():
    inputs = [_entry("ids", [1, 3], "int64"), _entry("x", [1, 4]), _entry("y", [1, 4])]
    arrays, used = signature.prepare(inputs, [[1, 3], [1, 4], [1, 4]], 7, None)
    legacy = np.random.default_rng(7).standard_normal((1, 4)).astype(np.float32)
    assert np.array_equal(arrays[1], legacy)
    assert not np.array_equal(arrays[2], legacy)  # its own stream
    assert [u["source"] for u in used] == ["generated"] * 3
    assert used[0]["sha256"] == __import__("hashlib").sha256(arrays[0].tobytes()).hexdigest()
    again, _ = signature.prepare(inputs, [[1, 3], [1, 4], [1, 4]], 7, None)
    assert all(np.array_equal(a, b) for a, b in zip(arrays, again))


def test_a_dynamic_dim_without_override_or_file_is_refused_with_the_fix():
    inputs = [_entry("x", [-1, -1])]
    with pytest.raises(SpecError) as err:
        signature.prepare(inputs, [[-1, -1]], 0, None)
    assert str(err.value) == ("input 'x' has dynamic dims [0, 1]: give --input-shape x=1x1 "
                              "or --inputs FILE.npz")
    inputs = [_entry("x", [-1, 512])]
    with pytest.raises(SpecError, match=r"dims \[0\]: give --input-shape x=1x512 or"):
        signature.prepare(inputs, [[-1, 512]], 0, None)


def test_npz_inputs_are_checked_against_the_signature(tmp_path):
    inputs = [_entry("a", [-1, 8]), _entry("k", [], "int64")]
    good = tmp_path / "good.npz"
    np.savez(good, a=np.ones((5, 8), np.float32), k=np.array(3, np.int64), extra=np.zeros(1))
    arrays, used = signature.prepare(inputs, [[-1, 8], []], 0, str(good))
    assert arrays[0].shape == (5, 8) and int(arrays[1]) == 3  # the dynamic dim takes 5
    assert used[0]["shape"] == [5, 8] and used[0]["source"] == "npz"
    cases = {
        "missing": ({"a": np.ones((5, 8), np.float32)}, r"has no array 'k'"),
        "dtype": ({"a": np.ones((5, 8)), "k": np.array(3)},
                  r"input 'a': the model takes float32 \[-1, 8\] .*gives float64 \[5, 8\]"),
        "shape": ({"a": np.ones((5, 7), np.float32), "k": np.array(3)},
                  r"input 'a': the model takes float32 \[-1, 8\] .*gives float32 \[5, 7\]"),
    }
    for name, (arrays_in, message) in cases.items():
        path = tmp_path / f"{name}.npz"
        np.savez(path, **arrays_in)
        with pytest.raises(SpecError, match=message):
            signature.prepare(inputs, [[-1, 8], []], 0, str(path))
    # An override pins the dim: the file must agree with it.
    with pytest.raises(SpecError, match=r"takes float32 \[2, 8\]"):
        signature.prepare(inputs, [[2, 8], []], 0, str(good))
    single = tmp_path / "one.npy"
    np.save(single, np.ones(3))
    with pytest.raises(SpecError, match="must name a .npz"):
        signature.prepare(inputs, [[-1, 8], []], 0, str(single))
    with pytest.raises(SpecError, match="field 'inputs': cannot read"):
        signature.prepare(inputs, [[-1, 8], []], 0, str(tmp_path / "gone.npz"))


def test_spec_validation_names_the_new_fields():
    base = {"v": 1, "backend": "null", "artifact": "m.json"}
    spec = RunSpec.from_wire(base)
    assert spec.input_shapes is None and spec.inputs is None
    for bad in ({"x": [0, 3]}, {"x": "1x3"}, [[1, 3]], {"x": [True]}):
        with pytest.raises(SpecError, match="field 'input_shapes'"):
            RunSpec.from_wire({**base, "input_shapes": bad})
    with pytest.raises(SpecError, match="field 'inputs'"):
        RunSpec.from_wire({**base, "inputs": 3})
    assert RunSpec.from_wire({**base, "input_shapes": {"x": [1, 3]}}).input_shapes


# -- the null backend: one input, the legacy path ------------------------------------------


@pytest.fixture
def null_artifact(tmp_path):
    path = tmp_path / "null.json"
    path.write_text(json.dumps({"format": "aiot-null", "sleep_ms": 0, "input_shape": [1, 3],
                                "outputs": 4}))
    return path


def test_null_backend_declares_its_signature(null_artifact):
    ans = agent_answer("inspect", {"backend": "null", "artifact": str(null_artifact)})
    assert ans["event"] == "signature" and ans["backend"] == "null"
    assert ans["inputs"] == [_entry("input", [1, 3])]
    assert ans["outputs"] == [_entry("output", [1, 4])]


def test_run_records_inputs_and_outputs(null_artifact):
    res = agent_answer("run", {"backend": "null", "artifact": str(null_artifact), "seed": 3})
    assert res["event"] == "result"
    x = np.random.default_rng(3).standard_normal((1, 3)).astype(np.float32)
    (used,) = res["inputs"]
    assert used["name"] == "input" and used["shape"] == [1, 3] and used["dtype"] == "float32"
    assert used["sha256"] == __import__("hashlib").sha256(x.tobytes()).hexdigest()
    (out,) = res["outputs"]
    assert out["name"] == "output" and out["shape"] == [1, 4] and out["dtype"] == "float32"
    assert out["fingerprint"] == res["output"] == agent_mod.output_fingerprint(np.zeros((1, 4)))


def test_memory_uses_the_same_inputs(null_artifact):
    spec = {"backend": "null", "artifact": str(null_artifact), "input_shapes": {"nope": [1]}}
    ans = agent_answer("memory", spec)
    assert ans["event"] == "error" and ans["type"] == "SpecError" and "'nope'" in ans["message"]
    ans = agent_answer("memory", {"backend": "null", "artifact": str(null_artifact)})
    assert ans["event"] == "memory" and ans["runs"] == agent_mod.MEMORY_RUNS


def test_the_session_answers_inspect_in_a_child(null_artifact):
    proc = subprocess.Popen([sys.executable, "-m", "aiot.device_agent", "session"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    try:
        assert protocol.decode(proc.stdout.readline())["event"] == "ready"
        request = {"op": "inspect", "id": 9, "spec": {"v": 1, "backend": "null",
                                                      "artifact": str(null_artifact)}}
        # stdin stays open until the answer: closing it would end the session, child and all
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        answer = protocol.decode(proc.stdout.readline())
        assert answer["event"] == "signature" and answer["id"] == 9
        assert answer["inputs"][0]["shape"] == [1, 3]
        proc.stdin.write(json.dumps({"op": "close"}) + "\n")
        proc.stdin.flush()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -- ONNX Runtime: several inputs and outputs, a scalar, a dynamic dim ---------------------


@pytest.fixture(scope="module")
def ort_ready():
    pytest.importorskip("onnxruntime")


def _onnx(path, **over):
    return {"backend": "onnxruntime", "artifact": str(path), **over}


def _reference(a, b, k):
    return (a + b) * np.float32(k), (a * b).sum(axis=1)


def test_onnx_signature_has_dynamic_dims_and_a_scalar(ort_ready, two_input_onnx):
    ans = agent_answer("inspect", _onnx(two_input_onnx))
    assert ans["event"] == "signature" and ans["backend"] == "onnxruntime"
    assert ans["runtime_version"]
    assert ans["inputs"] == [_entry("a", [-1, 8]), _entry("b", [-1, 8]),
                             _entry("k", [], "int64")]
    assert ans["outputs"] == [_entry("scaled_sum", [-1, 8]), _entry("dot", [-1])]
    # an override is checked at inspect too, and the declared shapes stay as declared
    ans = agent_answer("inspect", _onnx(two_input_onnx, input_shapes={"a": [2, 8]}))
    assert ans["inputs"][0]["shape"] == [-1, 8]
    ans = agent_answer("inspect", _onnx(two_input_onnx, input_shapes={"a": [2, 9]}))
    assert ans["event"] == "error" and ans["type"] == "SpecError"


def test_onnx_run_without_shapes_names_the_dynamic_input(ort_ready, two_input_onnx):
    ans = agent_answer("run", _onnx(two_input_onnx))
    assert ans["event"] == "error" and ans["type"] == "SpecError"
    assert ans["message"] == ("input 'a' has dynamic dims [0]: give --input-shape a=1x8 or "
                              "--inputs FILE.npz")


def test_onnx_run_with_shapes_generates_every_input(ort_ready, two_input_onnx):
    shapes = {"a": [3, 8], "b": [3, 8]}
    res = agent_answer("run", _onnx(two_input_onnx, input_shapes=shapes, seed=5))
    assert res["event"] == "result", res
    assert [(i["name"], i["shape"], i["dtype"], i["source"]) for i in res["inputs"]] == [
        ("a", [3, 8], "float32", "generated"), ("b", [3, 8], "float32", "generated"),
        ("k", [], "int64", "generated")]
    arrays, _ = signature.prepare([_entry("a", [3, 8]), _entry("b", [3, 8]),
                                   _entry("k", [], "int64")], [[3, 8], [3, 8], []], 5, None)
    assert 0 <= int(arrays[2]) < 10
    want = _reference(*arrays)
    outs = res["outputs"]
    assert [(o["name"], o["shape"], o["dtype"]) for o in outs] == [
        ("scaled_sum", [3, 8], "float32"), ("dot", [3], "float32")]
    for out, ref in zip(outs, want):
        assert out["fingerprint"]["size"] == ref.size
        assert np.allclose(out["fingerprint"]["head"], ref.ravel()[:64], rtol=1e-5, atol=1e-5)
    assert res["output"] == outs[0]["fingerprint"] and res["input_shape"] == [3, 8]


def test_onnx_run_from_an_npz(ort_ready, two_input_onnx, tmp_path):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((4, 8), np.float32), rng.standard_normal((4, 8), np.float32)
    path = tmp_path / "inputs.npz"
    np.savez(path, a=a, b=b, k=np.array(2, np.int64))
    res = agent_answer("run", _onnx(two_input_onnx, inputs=str(path)))
    assert res["event"] == "result", res
    assert {i["source"] for i in res["inputs"]} == {"npz"} and res["inputs"][0]["shape"] == [4, 8]
    ref = _reference(a, b, 2)
    assert np.allclose(res["outputs"][1]["fingerprint"]["head"], ref[1], rtol=1e-5)
    np.savez(path, a=a, b=b, k=np.array(2, np.int32))
    ans = agent_answer("run", _onnx(two_input_onnx, inputs=str(path)))
    assert ans["event"] == "error" and ans["type"] == "SpecError"
    assert "input 'k': the model takes int64 []" in ans["message"] and "int32" in ans["message"]


def test_ort_file_runs_like_its_onnx(ort_ready, two_input_ort):
    ans = agent_answer("inspect", _onnx(two_input_ort))
    assert [i["shape"] for i in ans["inputs"]] == [[2, 8], [2, 8], []]
    res = agent_answer("run", _onnx(two_input_ort))
    assert res["event"] == "result", res
    assert [o["shape"] for o in res["outputs"]] == [[2, 8], [2]]


def test_session_api_for_several_inputs(ort_ready, two_input_onnx):
    from aiot.device_agent.backends import onnxruntime_backend

    session = onnxruntime_backend.open(str(two_input_onnx), 1, {"a": [2, 8], "b": [2, 8]})
    assert session.shapes == [[2, 8], [2, 8], []] and session.input_shape == (2, 8)
    assert session.input_dtype == np.float32
    a = np.ones((2, 8), np.float32)
    session.set_inputs([a, a, np.array(3, np.int64)])
    session.invoke()
    summed, dot = session.outputs_all()
    assert np.allclose(summed, 6.0) and np.allclose(dot, 8.0)
    # the single-input path refuses a model with several inputs, saying why
    with pytest.raises(ValueError, match=r"takes 3 input\(s\) \(a, b, k\), got 1"):
        session.set_input(a)


def test_a_single_float_input_model_is_fed_as_before(ort_ready, tmp_path):
    """Byte-identical to older agents: the same seeded input, the same fingerprint."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["input"], ["logits"])], "g",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 2, 3])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "relu.onnx"
    onnx.save(model, path)
    res = agent_answer("run", _onnx(path, seed=11))
    x = np.random.default_rng(11).standard_normal((1, 2, 3)).astype(np.float32)
    want = ort.InferenceSession(str(path)).run(None, {"input": x})[0]
    assert res["output"] == agent_mod.output_fingerprint(want)
    assert res["input_shape"] == [1, 2, 3]


# -- a lite module saved without aiot's description -------------------------------------------


def test_foreign_ptl_needs_input_shapes(foreign_ptl):
    ans = agent_answer("inspect", {"backend": "pytorch_mobile", "artifact": str(foreign_ptl)})
    assert ans["event"] == "error" and ans["type"] == "SpecError"
    assert "its forward(x) are unknown: give --input-shape x=DxD" in ans["message"]
    # A shape for another model's input (one sweep, several models) is not this module's.
    spec = {"backend": "pytorch_mobile", "artifact": str(foreign_ptl),
            "input_shapes": {"x": [2, 4], "a": [1, 8]}}
    ans = agent_answer("inspect", spec)
    assert ans["inputs"] == [_entry("x", [2, 4])] and ans["outputs"] == []
    res = agent_answer("run", {**spec, "seed": 2})
    assert res["event"] == "result", res
    x = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    assert [(o["name"], o["shape"]) for o in res["outputs"]] == [("output_0", [2, 4]),
                                                                  ("output_1", [2])]
    assert np.allclose(res["outputs"][1]["fingerprint"]["head"], (x * 2 + 1).sum(axis=1))


def test_events_helper_drops_progress(null_artifact):
    events = agent_events("run", {"backend": "null", "artifact": str(null_artifact)})
    assert [e["event"] for e in events] == ["result"]


def test_predict_takes_an_npz_of_batches(ort_ready, two_input_onnx, tmp_path):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 2, 8), np.float32)  # 4 rows, each an input of shape [2, 8]
    b = rng.standard_normal((4, 2, 8), np.float32)
    k = np.arange(4, dtype=np.int64)  # 4 scalar rows
    inputs, outputs = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, a=a, b=b, k=k)
    ans = agent_answer("predict", _onnx(two_input_onnx, inputs=str(inputs),
                                        outputs=str(outputs)))
    assert ans["event"] == "predicted", ans
    assert ans["n"] == 4 and ans["output_shape"] == [4, 2, 8]
    assert ans["outputs"] == [{"name": "scaled_sum", "shape": [4, 2, 8], "dtype": "float32"},
                              {"name": "dot", "shape": [4, 2], "dtype": "float32"}]
    with np.load(outputs) as got:
        for i in range(4):
            want = _reference(a[i], b[i], k[i])
            assert np.allclose(got["scaled_sum"][i], want[0], atol=1e-5)
            assert np.allclose(got["dot"][i], want[1], atol=1e-5)
    np.savez(inputs, a=a, b=b, k=k[:3])
    ans = agent_answer("predict", _onnx(two_input_onnx, inputs=str(inputs),
                                        outputs=str(outputs)))
    assert ans["event"] == "error" and "different lengths (a: 4, b: 4, k: 3)" in ans["message"]
