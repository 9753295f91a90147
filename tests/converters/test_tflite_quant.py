"""TFLite FP16 / dynamic INT8 / full INT8 (calibrated on Fashion-MNIST) with their parity rules."""

import numpy as np
import pytest

from aiot.converters.api import convert_model
from aiot.converters.parity import PARITY_IMAGES
from aiot.converters.sidecar import read_sidecar
from aiot.converters.tflite import TOLERANCE

pytest.importorskip("litert_torch")
pytest.importorskip("ai_edge_quantizer")


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    out = tmp_path_factory.mktemp("quant")
    fp32 = convert_model("tiny_cnn", "tflite", out)
    variants = {}
    for quant in ("fp16", "dynamic-int8", "int8"):
        sub = out / quant  # same file name per model and format: one folder per variant
        variants[quant] = convert_model("tiny_cnn", "tflite", sub, options={"quant": quant})
    return fp32, variants


@pytest.mark.slow
def test_quantized_artifacts_are_smaller_and_say_what_they_are(quantized):
    fp32, variants = quantized
    assert variants["fp16"].size_bytes < 0.6 * fp32.size_bytes
    assert variants["dynamic-int8"].size_bytes < 0.35 * fp32.size_bytes
    assert variants["int8"].size_bytes < 0.35 * fp32.size_bytes
    for quant, res in variants.items():
        side = read_sidecar(res.artifact)
        assert side["converter"]["quant"] == quant and side["converter"]["options"]["quant"] == quant
        assert "ai-edge-quantizer" in side["toolchain"]
    int8 = read_sidecar(variants["int8"].artifact)["converter"]
    assert int8["calibration"] == {"dataset": "fashion-mnist", "split": "train", "samples": 100}
    from aiot.device_agent.backends.litert_backend import _io_params

    (in_scale, _zi, in_type), (_so, _zo, out_type) = _io_params(str(variants["int8"].artifact))
    assert in_type == out_type == "int8" and in_scale > 0  # full integer, I/O included
    assert _io_params(str(variants["fp16"].artifact)) == (None, None)


@pytest.mark.slow
def test_each_mode_meets_its_own_parity_rule(quantized):
    _fp32, variants = quantized
    assert variants["fp16"].parity["max_abs"] < TOLERANCE["fp16"]["atol"]
    for quant in ("dynamic-int8", "int8"):
        parity = variants[quant].parity
        assert parity["min_top1"] == TOLERANCE[quant]["min_top1"]
        assert parity["dataset"]["n"] == PARITY_IMAGES  # its loose rule allows 3 disagreements on 32
        assert parity["dataset"]["top1_agreement"] >= TOLERANCE[quant]["min_top1"]


@pytest.mark.slow
def test_int8_model_takes_and_returns_float_in_the_agent_backend(quantized):
    from aiot.device_agent.backends import litert_backend

    path = str(quantized[1]["int8"].artifact)
    for api in ("compiled_model", "interpreter"):
        session = litert_backend.open(path, 1, api=api)
        assert np.dtype(session.input_dtype) == np.float32
        out = session.run(np.zeros(session.input_shape, np.float32))
        assert out.dtype == np.float32 and out.shape == (1, 10) and np.isfinite(out).all()
