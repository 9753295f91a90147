"""Artifacts like users bring, made by the tools that make them in the wild (TensorFlow's
TFLiteConverter, ExecuTorch), read and run by the device agent's backends: LiteRT here, LCE
and ExecuTorch in their toolchain environments, as parity runs them.

The builders (tests/third_party.py) need the ``lce`` and ``executorch`` toolchains, which
``scripts/bootstrap.sh`` installs; without them these tests skip.
"""

import numpy as np
import pytest

from aiot.device_agent import agent as agent_mod
from aiot.device_agent import signature
from tests.third_party import agent_answer

pytestmark = pytest.mark.slow


def _litert(path, **over):
    return {"backend": "litert", "artifact": str(path), **over}


def _entry(name, shape, dtype="float32", quant=None):
    return signature.entry(name, shape, dtype, quant)


# -- an int8 model with uint8 input and output (TFLiteConverter) ----------------------------


def test_int8_tflite_signature_has_uint8_io_and_its_quantization(int8_uint8_tflite):
    pytest.importorskip("ai_edge_litert")
    ans = agent_answer("inspect", _litert(int8_uint8_tflite))
    assert ans["event"] == "signature", ans
    (image,), (logits,) = ans["inputs"], ans["outputs"]
    assert (image["name"], image["shape"], image["dtype"]) == ("image", [1, 8, 8, 3], "uint8")
    assert (logits["name"], logits["shape"], logits["dtype"]) == ("logits", [1, 5], "uint8")
    assert 0 < image["quantization"]["scale"] < 0.01 and image["quantization"]["zero_point"] == 0
    assert logits["quantization"]["scale"] > 0


def test_int8_tflite_runs_on_raw_uint8_values(int8_uint8_tflite):
    pytest.importorskip("ai_edge_litert")
    res = agent_answer("run", _litert(int8_uint8_tflite, seed=4))
    assert res["event"] == "result", res
    (used,) = res["inputs"]
    assert used["dtype"] == "uint8" and used["source"] == "generated"
    spec = _entry("image", [1, 8, 8, 3], "uint8", used["quantization"])
    (x,), _ = signature.prepare([spec], [[1, 8, 8, 3]], 4, None)
    assert x.min() < 20 and x.max() > 235  # uniform over the whole uint8 range
    (out,) = res["outputs"]
    assert out["dtype"] == "uint8" and out["shape"] == [1, 5]
    # ``output`` keeps the single-input path's float view: the dequantized first output
    quant = out["quantization"]
    raw = np.array(out["fingerprint"]["head"])
    assert np.allclose(res["output"]["head"], (raw - quant["zero_point"]) * quant["scale"],
                       rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("api", ["compiled_model", "interpreter"])
def test_both_litert_apis_take_artifact_dtypes_and_keep_float_for_run(int8_uint8_tflite, api):
    pytest.importorskip("ai_edge_litert")
    from aiot.device_agent.backends import litert_backend

    session = litert_backend.open(str(int8_uint8_tflite), 1, api=api)
    assert session.api == api and session.input_dtype == np.float32  # the legacy path
    x = np.random.default_rng(0).integers(0, 256, (1, 8, 8, 3), dtype=np.uint8)
    session.set_inputs([x])
    session.invoke()
    (raw,) = session.outputs_all()
    assert raw.dtype == np.uint8 and raw.shape == (1, 5)
    scale = session.inputs[0]["quantization"]["scale"]
    out = session.run(x.astype(np.float32) * scale)  # float in: quantized back to x
    assert out.dtype == np.float32
    quant = session.outputs[0]["quantization"]
    assert np.allclose(out, (raw.astype(np.float32) - quant["zero_point"]) * quant["scale"])


def test_flatbuffer_reader_agrees_with_litert(int8_uint8_tflite, dynamic_two_input_tflite):
    pytest.importorskip("ai_edge_litert")
    from ai_edge_litert.interpreter import Interpreter

    from aiot.device_agent.backends.tflite_io import read_io

    for path in (int8_uint8_tflite, dynamic_two_input_tflite):
        inputs, outputs, in_pos, out_pos = read_io(path.read_bytes())
        interp = Interpreter(model_path=str(path))
        runner = interp.get_signature_runner()
        sig_in, sig_out = runner.get_input_details(), runner.get_output_details()
        details = interp.get_input_details()
        for spec, pos in zip(inputs, in_pos):
            want = sig_in[spec["name"]]
            assert details[pos]["index"] == want["index"]
            assert spec["shape"] == list(want["shape_signature"])
            assert spec["dtype"] == np.dtype(want["dtype"]).name
            scale, zero = want["quantization"]
            assert spec["quantization"] == signature.quantization(scale, zero)
        out_details = interp.get_output_details()
        for spec, pos in zip(outputs, out_pos):
            assert out_details[pos]["index"] == sig_out[spec["name"]]["index"]


@pytest.mark.parametrize("backend", ["litert", "lce"])
def test_lce_reads_and_runs_the_int8_model_like_litert(int8_uint8_tflite, backend):
    from aiot.core.toolchains import backend_toolchain

    if backend == "litert":
        pytest.importorskip("ai_edge_litert")
    toolchain = backend_toolchain(backend)
    spec = {"backend": backend, "artifact": str(int8_uint8_tflite), "seed": 1}
    ans = agent_answer("inspect", spec, toolchain)
    assert ans["event"] == "signature", ans
    assert [i["name"] for i in ans["inputs"]] == ["image"]
    assert ans["inputs"][0]["dtype"] == "uint8" and ans["outputs"][0]["dtype"] == "uint8"
    res = agent_answer("run", spec, toolchain)
    assert res["event"] == "result", res
    assert res["inputs"][0]["sha256"] == _seeded_image_sha(res["inputs"][0]["quantization"], 1)
    head = res["outputs"][0]["fingerprint"]["head"]
    assert all(0 <= v <= 255 for v in head)


def _seeded_image_sha(quant, seed):
    spec = _entry("image", [1, 8, 8, 3], "uint8", quant)
    return signature.prepare([spec], [[1, 8, 8, 3]], seed, None)[1][0]["sha256"]


# -- dynamic batch, two inputs (signature order differs from the subgraph's) ----------------


@pytest.mark.parametrize("api", ["compiled_model", "interpreter"])
def test_dynamic_tflite_resizes_for_overrides_and_npz(dynamic_two_input_tflite, api, tmp_path):
    pytest.importorskip("ai_edge_litert")
    from aiot.device_agent.backends import litert_backend

    session = litert_backend.open(str(dynamic_two_input_tflite), 1, {"a": [3, 4], "b": [3, 4]},
                                  api=api)
    assert [s["name"] for s in session.inputs] == ["a", "b"]
    assert [s["shape"] for s in session.inputs] == [[-1, 4], [-1, 4]]  # as declared
    assert session.shapes == [[3, 4], [3, 4]]
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    session.set_inputs([a, np.ones_like(a)])
    session.invoke()
    proj, summed = session.outputs_all()
    assert proj.shape == (3, 2) and np.array_equal(summed, a + 1)
    # another batch through set_inputs: resized again, outside any timing
    b = np.ones((5, 4), np.float32)
    session.set_inputs([b, b])
    session.invoke()
    assert session.outputs_all()[1].shape == (5, 4) and session.shapes == [[5, 4], [5, 4]]


def test_dynamic_tflite_through_the_agent(dynamic_two_input_tflite, tmp_path):
    pytest.importorskip("ai_edge_litert")
    spec = _litert(dynamic_two_input_tflite)
    ans = agent_answer("run", spec)
    assert ans["event"] == "error" and "input 'a' has dynamic dims [0]" in ans["message"]
    res = agent_answer("run", {**spec, "input_shapes": {"a": [2, 4], "b": [2, 4]}, "seed": 9})
    assert res["event"] == "result", res
    a, b = signature.prepare([_entry("a", [2, 4]), _entry("b", [2, 4])], [[2, 4], [2, 4]],
                             9, None)[0]
    (proj, summed) = res["outputs"]
    assert (proj["name"], proj["shape"], summed["name"]) == ("proj", [2, 2], "sum")
    assert np.allclose(summed["fingerprint"]["head"], (a + b).ravel())
    path = tmp_path / "x.npz"
    np.savez(path, a=np.ones((6, 4), np.float32), b=np.ones((6, 4), np.float32))
    res = agent_answer("run", {**spec, "inputs": str(path)})
    assert res["event"] == "result", res
    assert res["outputs"][1]["shape"] == [6, 4] and res["outputs"][1]["fingerprint"]["l2"] > 0


def test_lce_cannot_resize_and_says_so(dynamic_two_input_tflite):
    from aiot.core.toolchains import backend_toolchain

    toolchain = backend_toolchain("lce")
    spec = {"backend": "lce", "artifact": str(dynamic_two_input_tflite)}
    ans = agent_answer("inspect", spec, toolchain)
    assert [(i["name"], i["shape"]) for i in ans["inputs"]] == [("a", [-1, 4]), ("b", [-1, 4])]
    ans = agent_answer("run", {**spec, "input_shapes": {"a": [3, 4], "b": [3, 4]}}, toolchain)
    assert ans["event"] == "error" and ans["type"] == "SpecError"
    assert "cannot resize input 'a' to [3, 4]: it runs at [1, 4]" in ans["message"]
    res = agent_answer("run", {**spec, "input_shapes": {"a": [1, 4], "b": [1, 4]}, "seed": 2},
                       toolchain)
    assert res["event"] == "result", res
    a, b = signature.prepare([_entry("a", [1, 4]), _entry("b", [1, 4])], [[1, 4], [1, 4]],
                             2, None)[0]
    assert np.allclose(res["outputs"][1]["fingerprint"]["head"], (a + b).ravel())


# -- an ExecuTorch program with a float and an int64 input -----------------------------------


def test_pte_signature_and_run_in_the_executorch_toolchain(two_input_pte):
    from aiot.core.toolchains import backend_toolchain
    from aiot.device_agent.backends.executorch_backend import declared_signature

    toolchain = backend_toolchain("executorch")
    spec = {"backend": "executorch", "artifact": str(two_input_pte), "seed": 6}
    ans = agent_answer("inspect", spec, toolchain)
    assert ans["event"] == "signature", ans
    assert ans["inputs"] == [_entry("input_0", [1, 8]), _entry("input_1", [1, 3], "int64")]
    assert ans["outputs"] == [_entry("output_0", [1, 3]), _entry("output_1", [1, 3])]
    # what the host reads from the file without the runtime (models info, run's check)
    assert declared_signature(str(two_input_pte)) == (ans["inputs"], ans["outputs"])
    res = agent_answer("run", spec, toolchain)
    assert res["event"] == "result", res
    _x, idx = signature.prepare(ans["inputs"], [[1, 8], [1, 3]], 6, None)[0]
    assert res["inputs"][1]["dtype"] == "int64" and idx.max() < 10
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    assert np.allclose(res["outputs"][1]["fingerprint"]["head"], table[idx].sum(axis=-1).ravel())
    ans = agent_answer("run", {**spec, "input_shapes": {"input_0": [2, 8]}}, toolchain)
    assert ans["event"] == "error" and ans["type"] == "SpecError"


def test_output_fingerprints_match_the_legacy_one(two_input_pte):
    """``output`` is still the first output's fingerprint, as every older record has it."""
    from aiot.core.toolchains import backend_toolchain

    spec = {"backend": "executorch", "artifact": str(two_input_pte)}
    res = agent_answer("run", spec, backend_toolchain("executorch"))
    assert res["output"] == res["outputs"][0]["fingerprint"]
    assert set(res["output"]) == set(agent_mod.output_fingerprint(np.zeros(1)))
