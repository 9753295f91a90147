"""RobustMQ's 8-bit LSQ models deployed as real int8 ONNX (QDQ with the learned scales, run by
ONNX Runtime's integer kernels), ExecuTorch (XNNPACK QS8) and TFLite (int8 CONV_2D), parity
against the fake-quantized PyTorch model, and the one-line refusals of what does not deploy
(2/4/6 bits, DoReFa/PACT weights, other formats)."""

from __future__ import annotations

import pytest

FAST = ["--min-runs", "3", "--min-s", "0", "--warmup-min-s", "0", "--cooldown-max-s", "0"]


@pytest.mark.parametrize("option, fmt, words", [
    ("lsq:4", "onnx", "int8 is the narrowest integer type"),
    ("lsq:2", "onnx", "int8 is the narrowest integer type"),
    ("pact:8", "onnx", "zero point 127.5"),
    ("dorefa:8", "onnx", "zero point 127.5"),
    ("lsq:8", "ort", "no ort export"),
    ("lsq:4", "executorch", "int8 is the narrowest integer type"),
])
def test_what_does_not_deploy_says_why(option, fmt, words):
    from aiot.models.quant.deploy import deployment_refusal
    from aiot.models.quant.methods import parse_quantize

    assert words in deployment_refusal(parse_quantize(option), fmt)
    assert deployment_refusal(parse_quantize("lsq:8"), "onnx") is None
    assert deployment_refusal(parse_quantize("lsq:8"), "executorch") is None
    assert deployment_refusal(parse_quantize("lsq:8"), "tflite") is None


@pytest.mark.parametrize("args, words", [
    (["-m", "tiny_cnn_lsq4"], "tiny_cnn_lsq4 cannot run as onnx: LSQ 4-bit is not deployable"),
    (["-m", "tiny_cnn_lsq8", "-f", "ort"], "tiny_cnn_lsq8 cannot run as ort"),
])
def test_run_refuses_an_undeployable_quantized_model_in_one_line(cli, args, words):
    result = cli("run", "-d", "local", *args, code=2)
    error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and words in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr


def _trained_like_model():
    """tiny_cnn_lsq8 with trained-like BatchNorms (one negative gamma, so the per-channel
    folding's sign path runs), steps set from seeded images, and conv2's weight step below
    zero, as a real ``aiot train resnet18_mnist --quantize lsq:8`` left layer4.1.conv1's
    (``s q`` is then ``|s| (-q)``; a negative scale in the file broke litert-torch's
    conversion and XNNPACK's load): channel 0 of conv2 has both signs, and they cancel."""
    import torch

    from aiot.models import get_model_spec
    from aiot.models.quant import build_quantized, parse_quantize

    spec = get_model_spec("tiny_cnn")
    torch.manual_seed(3)
    model = build_quantized(spec, parse_quantize("lsq:8"))
    with torch.no_grad():
        model(spec.example_input(batch=8, seed=2))
        for bn in (m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)):
            bn.weight.uniform_(0.5, 1.5)
            bn.weight[0] = -0.7
            bn.bias.uniform_(-0.2, 0.2)
            bn.running_mean.uniform_(-0.1, 0.1)
            bn.running_var.uniform_(0.5, 2.0)
        model.features.conv2.weight_step.neg_()
    return spec, model


def _trained_like(tmp_path):
    """:func:`_trained_like_model`'s state dict as a --weights file."""
    import torch

    path = tmp_path / "tiny_cnn_lsq8.pt"
    torch.save(_trained_like_model()[1].state_dict(), path)
    return path


@pytest.mark.parametrize("fmt", ["onnx", "executorch", "tflite"])
def test_a_negative_learned_step_deploys_on_positive_scales_with_the_same_arithmetic(fmt):
    """Every runtime holds positive int8 scales only: a step training drove below zero has
    its sign moved into the levels (``|s| (-q)``), so each rewrite computes the fake-quantized
    model's outputs in PyTorch, before any export."""
    import torch

    from aiot.converters.qdq import _QDQLayer, qdq_model

    spec, model = _trained_like_model()
    model.eval()
    rewritten = qdq_model(model, fmt)
    layers = [m for m in rewritten.modules() if isinstance(m, _QDQLayer)]
    assert len(layers) == 2 and all(bool((m.scales > 0).all()) for m in layers)
    x = spec.example_input(batch=16, seed=5)
    with torch.no_grad():
        reference, actual = model(x), rewritten(x)
    assert torch.equal(reference.argmax(1), actual.argmax(1))
    assert float((reference - actual).abs().max()) < 1e-3 * float(reference.abs().max())


@pytest.mark.slow
def test_lsq8_exports_int8_qdq_that_onnx_runtime_runs_with_integer_kernels(tmp_path):
    import onnx
    import onnxruntime as ort

    from aiot.converters.api import convert_model, read_sidecar

    weights = _trained_like(tmp_path)
    result = convert_model("tiny_cnn_lsq8", "onnx", tmp_path / "out", weights=weights)
    graph = onnx.load(str(result.artifact)).graph
    ops = {node.op_type for node in graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    int8 = [t for t in graph.initializer if t.data_type == onnx.TensorProto.INT8]
    assert len(int8) == 2  # conv2's and conv3's weights, stored as int8 (the others stay float)
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(result.artifact), options, providers=["CPUExecutionProvider"])
    optimized = {node.op_type for node in onnx.load(options.optimized_model_filepath).graph.node}
    assert "QLinearConv" in optimized  # conv2 feeds conv3's quantizer: an integer convolution
    parity = read_sidecar(result.artifact)["parity"]
    assert parity["verdict"] == "pass" and parity["min_top1"] == 0.99
    assert parity["dataset"]["n"] == 300  # a 99 % rule on enough images to allow 3 disagreements
    # Same int8 grid; BN folded in float and QLinearConv's requantization round a value at a
    # level boundary one level over now and then (measured: 99.6 % top-1 on 256 images, max
    # abs 1.0e-3 on logits of order 0.1), never more than a few levels.
    assert parity["dataset"]["top1_agreement"] >= 0.99
    assert parity["max_abs"] < 1e-2 and parity["dataset"]["max_abs"] < 1e-2
    assert read_sidecar(result.artifact)["source"]["quantize"] == "lsq:8"


@pytest.mark.slow
def test_lsq8_runs_on_local_as_onnx_and_stores_an_ok_record(cli, tmp_path):
    weights = _trained_like(tmp_path)
    (record,) = cli.json("run", "-d", "local", "-m", "tiny_cnn_lsq8", "-f", "onnx",
                         "--weights", str(weights), "--threads", "1", "--dataset",
                         "fashion-mnist", "--limit", "20", *FAST)
    assert record["status"] == "ok", record["reason"]
    assert record["model"] == "tiny_cnn_lsq8"
    assert record["accuracy"] is not None  # its test split prepared for tiny_cnn's input
    assert record["provenance"]["artifact"]["parity"]["verdict"] == "pass"


@pytest.mark.slow
def test_resnet18_lsq8_blocks_first_convs_become_integer_convolutions(tmp_path):
    """The data flow, not the registration order, decides: each block's conv1 → bn1 → relu →
    conv2 fuses into QLinearConv; conv2 (into the residual addition) stays DQ→Conv."""
    import onnx
    import onnxruntime as ort

    from aiot.converters.api import convert_model

    result = convert_model("resnet18_lsq8", "onnx", tmp_path / "out", parity_samples=4,
                           dataset_samples=8)
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(result.artifact), options, providers=["CPUExecutionProvider"])
    optimized = [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]
    assert optimized.count("QLinearConv") == 8
    assert result.parity["top1_agreement"] == 1.0


def test_a_quantized_training_is_never_taken_for_the_float_models_weights(tmp_path):
    """``aiot train tiny_cnn --quantize lsq:8`` caches weights under the model tiny_cnn; the
    float tiny_cnn must not pick them up (its keys would not fit)."""
    import json

    from aiot.host.engine.weights import trained_weights
    from aiot.host.training.trainer import SUMMARY_VERSION

    for name, quantize in (("float", None), ("lsq8", "lsq:8")):
        (tmp_path / f"{name}.pt").write_bytes(b"w")
        (tmp_path / f"{name}.json").write_text(json.dumps({
            "v": SUMMARY_VERSION, "model": "tiny_cnn", "weights_file": f"{name}.pt",
            "weights_sha256": "0" * 64, "config": {"dataset": "fashion-mnist",
                                                    "binarize": None, "quantize": quantize}}))
    found = trained_weights("tiny_cnn", None, "fashion-mnist", folder=tmp_path)
    assert [f.path.name for f in found] == ["float.pt"]


def test_format_all_leaves_out_what_a_quantized_model_does_not_deploy_to():
    from aiot.converters.base import formats_for
    from aiot.models.model_ref import resolve_model

    fits, left_out = formats_for(["onnx", "tflite", "ort", "executorch"],
                                 resolve_model("tiny_cnn_lsq8", quantized_ok=True))
    assert fits == ["onnx", "tflite", "executorch"] and all("export of its learned scales" in why for why in left_out)
    fits, left_out = formats_for(["onnx"], resolve_model("tiny_cnn_lsq4", quantized_ok=True))
    assert fits == [] and "int8 is the narrowest" in left_out[0]


@pytest.mark.slow
def test_lsq8_lowers_to_xnnpack_int8_convolutions_in_executorch_with_parity(tmp_path):
    """ExecuTorch: the same learned scales as quantized_decomposed Q/DQ, lowered whole to
    XNNPACK, whose partition runs conv2 (DQ→Conv→Q) as an int8 convolution; the first conv and
    conv3 (it feeds the float classifier) stay float, as in the ONNX graph."""
    from aiot.converters.api import convert_model, read_sidecar
    from aiot.core.errors import UsageError
    from tests.converters.conftest import need_toolchain

    need_toolchain("executorch")
    weights = _trained_like(tmp_path)
    result = convert_model("tiny_cnn_lsq8", "executorch", tmp_path / "out", weights=weights)
    side = read_sidecar(result.artifact)
    assert side["converter"]["delegated_convs"] == {"int8": 1, "float": 2}
    assert side["converter"]["portable_ops"] == [] and side["converter"]["xnnpack_partitions"] == 1
    assert result.artifact.read_bytes()[4:8] == b"ET12"
    parity = side["parity"]
    assert parity["verdict"] == "pass" and parity["min_top1"] == 0.99
    assert parity["dataset"]["top1_agreement"] >= 0.99 and parity["dataset"]["max_abs"] < 1e-2
    with pytest.raises(UsageError, match="portable kernels have no quantized operators"):
        convert_model("tiny_cnn_lsq8", "executorch", tmp_path / "portable", weights=weights,
                      options={"delegate": "portable"})


@pytest.mark.slow
def test_lsq8_converts_to_tflite_int8_convolutions_with_the_learned_scales(tmp_path):
    """TFLite: the same plan, converted by litert-torch's static Q/DQ mode into an int8 CONV_2D
    (conv2: int8 input, weight and output in the file) whose tensors carry the learned steps,
    not calibrated ones; the first conv and conv3 stay float, as in the ONNX graph. One
    conversion serves every check."""
    import numpy as np
    import torch
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    from aiot.converters.api import convert_model, read_sidecar
    from aiot.core.errors import UsageError
    from aiot.device_agent.backends import litert_backend

    weights = _trained_like(tmp_path)
    result = convert_model("tiny_cnn_lsq8", "tflite", tmp_path / "out", weights=weights)
    side = read_sidecar(result.artifact)
    assert side["converter"]["convs"] == {"int8": 1, "float": 2}
    assert side["converter"]["quant"] == "int8-learned"
    interpreter = Interpreter(model_path=str(result.artifact), experimental_op_resolver_type=
                              OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)  # the file's own ops
    tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
    ops = [op for op in interpreter._get_ops_details() if "CONV_2D" in op["op_name"]]
    integer = [op for op in ops if tensors[op["inputs"][1]]["dtype"] == np.int8]
    assert len(ops) == 3 and len(integer) == 1
    (conv,) = integer
    x, w, y = (tensors[i] for i in (*conv["inputs"][:2], conv["outputs"][0]))
    assert x["dtype"] == y["dtype"] == np.int8 and tensors[conv["inputs"][2]]["dtype"] == np.int32
    state = torch.load(weights)
    for tensor, step in ((x, "features.conv2.input_step"), (y, "features.conv3.input_step")):
        assert tensor["quantization_parameters"]["scales"][0] == pytest.approx(float(state[step]), rel=1e-6)
        assert tensor["quantization_parameters"]["zero_points"][0] == -128  # uint8 levels as int8
    assert not w["quantization_parameters"]["zero_points"].any()  # symmetric per-channel weights
    parity = side["parity"]
    assert parity["verdict"] == "pass" and parity["min_top1"] == 0.99
    assert parity["dataset"]["top1_agreement"] >= 0.99 and parity["dataset"]["max_abs"] < 1e-2
    session = litert_backend.open(str(result.artifact), 1)  # as the device agent runs it
    assert session.run(np.zeros(session.input_shape, np.float32)).shape == (1, 10)
    with pytest.raises(UsageError, match="own learned int8 scales"):
        convert_model("tiny_cnn_lsq8", "tflite", tmp_path / "int8", weights=weights,
                      options={"quant": "int8"})


@pytest.mark.slow
def test_resnet18_lsq8_blocks_first_convs_become_tflite_int8_convolutions(tmp_path):
    """As in ONNX: each block's conv1 → bn1 → relu → conv2 is an int8 CONV_2D; conv2 (into the
    residual addition), the downsampling convs and the stem stay float."""
    from aiot.converters.api import convert_model, read_sidecar

    result = convert_model("resnet18_lsq8", "tflite", tmp_path / "out", parity_samples=4,
                           dataset_samples=8)
    assert read_sidecar(result.artifact)["converter"]["convs"] == {"int8": 8, "float": 12}
    assert result.parity["top1_agreement"] == 1.0


def test_a_collapsed_activation_step_is_refused_in_one_line():
    """An activation step at or below zero has no int8 form (its sign cannot move into levels
    the data make at run time): refused before any export, naming the layer."""
    import torch

    from aiot.converters.qdq import qdq_model
    from aiot.core.errors import ConversionError

    _spec, model = _trained_like_model()
    with torch.no_grad():
        model.features.conv3.input_step.fill_(-0.02)
    with pytest.raises(ConversionError, match="features.conv3's learned activation step is -0.02"):
        qdq_model(model.eval(), "tflite")
