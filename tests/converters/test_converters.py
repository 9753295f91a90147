"""Real exports of small models, loaded by the real runtimes, compared with PyTorch."""

import json
import re
import subprocess
import sys

import pytest

from aiot.converters import format_table, get_converter
from aiot.converters.api import build_source_model, convert_model, state_sha256
from aiot.converters.conversion_cache import SWITCH
from aiot.converters.naming import artifact_name
from aiot.converters.parity import check_parity, compare_outputs
from aiot.converters.sidecar import read_sidecar, verify_artifact
from aiot.core.errors import AccuracyMismatch, ArtifactError, UnknownName, UsageError

torch = pytest.importorskip("torch")
FORMATS = ["onnx", "ort", "ptl", "tflite"]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("litert_torch")
    out = tmp_path_factory.mktemp("artifacts")
    with pytest.MonkeyPatch.context() as patch:  # each format really converts here
        patch.setenv(SWITCH, "off")
        return out, {fmt: convert_model("tiny_cnn", fmt, out) for fmt in FORMATS}


@pytest.mark.parametrize("fmt", FORMATS)
def test_artifact_matches_pytorch(converted, fmt):
    res = converted[1][fmt]
    assert res.artifact.exists() and not res.cached
    assert res.parity["ok"] and res.parity["max_abs"] < 1e-4 and res.parity["top1_agreement"] == 1.0
    assert res.parity["n"] == 8


@pytest.mark.parametrize("fmt", FORMATS)
def test_sidecar_describes_the_artifact(converted, fmt):
    res = converted[1][fmt]
    side = read_sidecar(res.artifact)
    assert side["artifact"]["sha256"] == res.sha256 and side["artifact"]["size_bytes"] == res.size_bytes
    assert side["source"]["model"] == "tiny_cnn" and side["source"]["random_init_seed"] == 0
    assert side["input"]["shape"] == [1, 28, 28] and side["input"]["batch"] == 1
    assert side["toolchain"]["torch"].startswith("2.13") and side["parity"] == res.parity
    assert side["converter"]["ops"] and side["format"] == fmt
    assert verify_artifact(res.artifact)["format"] == fmt


def test_ort_is_saved_at_basic_level_with_recorded_runtime_optimizations(converted):
    res = converted[1]["ort"]
    assert res.artifact.read_bytes()[4:8] == b"ORTM"
    converter = read_sidecar(res.artifact)["converter"]
    assert converter["optimization"] == "runtime" and converter["optimization_style"] == "runtime"
    assert converter["optimization_level"] == "basic"
    # tiny_cnn's three Conv+Relu pairs stay unfused in the file (an NNAPI/CoreML EP can take
    # them) and are recorded for the CPU to fuse at load time.
    assert {"Conv", "Relu"} <= set(converter["ops"]) and "FusedConv" not in converter["ops"]
    assert converter["runtime_optimizations"] == {"ConvActivationFusion": 3}
    assert "Conv" in converter["source_ops"]


def test_agent_session_replays_the_recorded_optimizations(converted):
    """The agent's own backend, with ONNX Runtime's verbose log on: every recorded action is
    applied, and the graph that runs has the fused Conv+Relu."""
    artifact = converted[1]["ort"].artifact
    code = ("import sys, onnxruntime as ort; ort.set_default_logger_severity(0); "
            "ort.set_default_logger_verbosity(0); "
            "from aiot.device_agent.backends import onnxruntime_backend as b; "
            "s = b.open(sys.argv[1], 1); "
            "print(s._sess.get_session_options().get_session_config_entry(b.REPLAY_KEY))")
    out = subprocess.run([sys.executable, "-c", code, str(artifact)], capture_output=True, text=True,
                         check=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "1"
    applied = re.findall(r"Applying runtime optimization action (\w+) for transformer (\w+)", out.stderr)
    assert applied == [("ConvAct", "ConvActivationFusion")] * 3
    assert re.search(r"GraphTransformer ConvActivationFusion modified: 1", out.stderr)


def test_ort_fixed_levels_stay_selectable(tmp_path):
    res = convert_model("tiny_cnn", "ort", tmp_path, options={"optimization": "extended"})
    converter = read_sidecar(res.artifact)["converter"]
    assert converter["optimization_style"] == "fixed" and converter["optimization_level"] == "extended"
    assert "FusedConv" in converter["ops"] and "Relu" not in converter["ops"]
    assert converter["runtime_optimizations"] == {} and res.parity["ok"]


def test_ort_refuses_the_machine_specific_level(tmp_path):
    with pytest.raises(UsageError, match="specific to this machine"):
        convert_model("tiny_cnn", "ort", tmp_path, options={"optimization": "all"})
    assert list(tmp_path.iterdir()) == []


def test_ptl_carries_its_input_shape_and_keeps_host_threads(converted):
    from aiot.device_agent.backends.pytorch_mobile_backend import input_meta

    res = converted[1]["ptl"]
    assert input_meta(str(res.artifact)) == {"shape": [1, 1, 28, 28], "dtype": "float32", "name": "input"}
    converter = read_sidecar(res.artifact)["converter"]
    assert "aten::_convolution" in converter["ops"] or "aten::conv2d" in converter["ops"] \
        or "prepacked::conv2d_clamp_run" in converter["ops"]
    before = torch.get_num_threads()
    check_parity("ptl", "pytorch_mobile", res.artifact, build_source_model("tiny_cnn")[1],
                 torch.randn(2, 1, 28, 28), 1e-4)
    assert torch.get_num_threads() == before


def _torch_has_xnnpack() -> bool:
    return bool(getattr(torch._C, "_is_xnnpack_enabled", lambda: False)())


def test_ptl_is_at_the_lite_interpreters_best(tmp_path):
    """resnet18_mnist has BatchNorm and Conv+ReLU: with XNNPACK they become prepacked XNNPACK ops;
    without it (the 2.13 CPU wheel) the module is frozen with BatchNorm folded, and the sidecar
    says why optimize_for_mobile did not run. Either way the input is made channels-last."""
    res = convert_model("resnet18_mnist", "ptl", tmp_path)
    converter = read_sidecar(res.artifact)["converter"]
    ops = converter["ops"]
    assert res.parity["ok"] and converter["layout"] == "channels_last" and "aten::contiguous" in ops
    assert converter["frozen"] and not any("batch_norm" in op for op in ops)
    if _torch_has_xnnpack():
        assert converter["optimize_for_mobile"] and "prepacked::conv2d_clamp_run" in ops
        assert converter["xnnpack_prepacked"]
    else:
        assert not converter["optimize_for_mobile"] and converter["xnnpack_prepacked"] == []
        assert "XNNPACK" in converter["why_not_optimized"]


def test_ptl_optimize_yes_is_refused_clearly_without_xnnpack(tmp_path):
    from aiot.converters.ptl import _maybe_optimize
    from aiot.core.errors import ConversionError

    traced = torch.jit.trace(torch.nn.Conv2d(1, 2, 3).eval(), torch.randn(1, 1, 8, 8))
    try:
        _, optimized = _maybe_optimize(traced, "yes")
    except ConversionError as exc:
        assert "XNNPACK" in exc.one_line()
    else:
        assert optimized  # this torch has XNNPACK: the optimization really ran
    assert _maybe_optimize(traced, "no")[1] is False


def test_ptl_layout_choice_is_checked(tmp_path):
    with pytest.raises(UsageError, match="layout must be one of"):
        convert_model("tiny_cnn", "ptl", tmp_path, options={"layout": "nhwc"})
    res = convert_model("tiny_cnn", "ptl", tmp_path, options={"layout": "contiguous"})
    converter = read_sidecar(res.artifact)["converter"]
    assert converter["layout"] == "contiguous" and "aten::contiguous" not in converter["ops"]


def test_convert_list_says_what_keeps_ort_and_ptl_from_their_best():
    rows = {r["name"]: r for r in format_table()}
    assert "NCHWc" in rows["ort"]["limits"] and "XNNPACK" in rows["ptl"]["limits"]
    assert rows["tflite"]["limits"] is None


def test_formats_are_converters_listed_in_a_fixed_order():
    """Every format subclasses Converter and the table's order does not depend on which
    format's module happens to import another (LCE reads TFLite's op list)."""
    from aiot.converters import CONVERTERS, Converter

    assert CONVERTERS.names() == ["caffe2", "dabnn", "executorch", "lce", "null", "onnx", "ort",
                                  "ptl", "tflite"]
    assert [r["name"] for r in format_table()] == [n for n in CONVERTERS.names() if n != "null"]
    for conv in CONVERTERS:
        assert isinstance(conv, Converter) and CONVERTERS.get(conv.name) is conv
        assert conv.extension.startswith(".") and conv.description and conv.atol >= 0


def test_tflite_ops_are_builtin(converted):
    ops = read_sidecar(converted[1]["tflite"].artifact)["converter"]["ops"]
    assert "CONV_2D" in ops and not any(op.startswith("CUSTOM") for op in ops)


@pytest.mark.parametrize("fmt", FORMATS)
def test_second_conversion_is_reused(converted, fmt):
    out, first = converted
    again = convert_model("tiny_cnn", fmt, out)
    assert again.cached and again.sha256 == first[fmt].sha256


def test_changed_weights_are_reexported(converted, tmp_path):
    out, first = converted
    spec, model = build_source_model("tiny_cnn")
    with torch.no_grad():
        next(model.parameters()).add_(0.5)
    weights = tmp_path / "w.pt"
    torch.save(model.state_dict(), weights)
    res = convert_model("tiny_cnn", "onnx", out / "other", weights=weights)
    assert not res.cached and res.sha256 != first["onnx"].sha256
    assert read_sidecar(res.artifact)["source"]["state_sha256"] == state_sha256(model)


def test_tampered_model_fails_parity(converted):
    spec, model = build_source_model("tiny_cnn")
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.5)
    with pytest.raises(AccuracyMismatch) as info:
        check_parity("onnx", "onnxruntime", converted[1]["onnx"].artifact, model,
                     spec.example_input(batch=4, seed=3), atol=1e-4)
    assert info.value.report["max_abs"] > 1e-4 and not info.value.report["ok"]


def test_parity_failure_leaves_no_artifact(tmp_path, monkeypatch, fresh_conversions):
    pytest.importorskip("onnxruntime")
    from aiot.converters import api

    def never_ok(*a, **k):
        raise AccuracyMismatch("onnx", {"max_abs": 1.0, "atol": 1e-4, "top1_agreement": 0.5})

    monkeypatch.setattr("aiot.converters.api.check_parity", never_ok)
    with pytest.raises(AccuracyMismatch):
        api.convert_model("tiny_cnn", "onnx", tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_truncated_artifact_is_named(converted, fmt, tmp_path):
    res = converted[1][fmt]
    broken = tmp_path / res.artifact.name
    broken.write_bytes(res.artifact.read_bytes()[: res.size_bytes // 3])
    (tmp_path / (res.artifact.name + ".aiot.json")).write_text(res.sidecar.read_text())
    with pytest.raises(ArtifactError, match="truncated"):
        verify_artifact(broken)
    spec, model = build_source_model("tiny_cnn")
    with pytest.raises(ArtifactError, match=broken.name):
        check_parity(fmt, get_converter(fmt).backend, broken, model, spec.example_input(2), atol=1e-4)


def test_corrupt_cached_artifact_is_reexported(tmp_path, fresh_conversions):
    pytest.importorskip("onnxruntime")
    first = convert_model("tiny_cnn", "onnx", tmp_path)
    first.artifact.write_bytes(first.artifact.read_bytes()[:100])
    again = convert_model("tiny_cnn", "onnx", tmp_path)
    assert not again.cached and again.sha256 == first.sha256


def test_options_are_validated_before_work(tmp_path):
    with pytest.raises(UsageError, match="no option bogus") as info:
        convert_model("tiny_cnn", "onnx", tmp_path, options={"bogus": "1"})
    assert "opset" in info.value.hint
    with pytest.raises(UsageError, match="opset must be"):
        convert_model("tiny_cnn", "onnx", tmp_path, options={"opset": "99"})
    with pytest.raises(UsageError, match="quant must be one of fp32, fp16, dynamic-int8, int8"):
        convert_model("tiny_cnn", "tflite", tmp_path, options={"quant": "int4"})
    with pytest.raises(UsageError, match="calibration_samples must be a positive integer"):
        convert_model("tiny_cnn", "tflite", tmp_path, options={"quant": "int8", "calibration_samples": "0"})
    with pytest.raises(UnknownName, match="dataset"):
        convert_model("tiny_cnn", "tflite", tmp_path, options={"quant": "int8", "calibration": "fmnst"})
    assert not list(tmp_path.glob("*.onnx")) and not list(tmp_path.glob("*.tflite"))


def test_unknown_format_and_model_suggest():
    with pytest.raises(UnknownName) as info:
        get_converter("tflit")
    assert info.value.close[0] == "tflite"
    with pytest.raises(UnknownName, match="model"):
        convert_model("resnet19", "onnx", ".")


def test_format_table_rows():
    rows = {r["name"]: r for r in format_table()}
    assert set(rows) >= {"onnx", "tflite"}
    assert rows["tflite"]["backend"] == "litert" and rows["onnx"]["extension"] == ".onnx"
    assert "opset" in rows["onnx"]["options"]


def test_artifact_names():
    assert artifact_name("resnet18", "tflite", ".tflite") == "resnet18.tflite"
    assert artifact_name("resnet18", "lce", ".tflite") == "resnet18.lce.tflite"
    assert artifact_name("r", "lce", ".tflite", "w-1a2b3c4d") == "r.w-1a2b3c4d.lce.tflite"


def test_artifact_variants_tell_options_and_weights_apart():
    from aiot.converters import get_converter
    from aiot.converters.naming import artifact_variant
    from aiot.converters.base import resolve_options

    tflite = get_converter("tflite")

    def variant(weights=None, **given):
        return artifact_variant(tflite, resolve_options(tflite, given), weights)

    assert variant() == variant(quant="fp32") == ""  # the defaults keep the plain name
    assert variant(quant="int8") == "quant-int8"
    assert variant(quant="int8", calibration_samples="50") == "calibration_samples-50_quant-int8"
    assert variant("ab" * 32, quant="fp16") == "quant-fp16.w-abababab"
    odd = variant(quant="int8", calibration="folder:/data/x")  # not file-name-safe: hashed
    assert re.fullmatch(r"opt-[0-9a-f]{8}", odd) and odd != variant(quant="int8", calibration="folder:/data/y")


def test_compare_outputs_shape_mismatch_and_relative_tolerance():
    import numpy as np

    assert not compare_outputs(np.zeros((2, 3)), np.zeros((2, 4)), 1e-4, 1e-3)["ok"]
    big = np.full((1, 3), 1e12)
    assert compare_outputs(big, big * (1 + 1e-6), 1e-4, 1e-3)["ok"]


def test_importing_converters_stays_light():
    code = ("import sys, aiot.converters as c; c.format_table(); "
            "print(sorted(m for m in ('torch', 'onnx', 'litert_torch', 'onnxruntime', 'ai_edge_litert') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.replace("'", '"')) == []


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_resnet18_issue_acceptance(fmt, tmp_path):
    """`aiot convert resnet18 --format tflite|onnx` is within tolerance."""
    pytest.importorskip("litert_torch")
    res = convert_model("resnet18", fmt, tmp_path)
    assert res.parity["ok"] and res.parity["top1_agreement"] == 1.0


def test_binarized_model_in_a_float_runtime_is_judged_on_top1(tmp_path):
    """sign(x) flips where x is within rounding of 0 once a runtime folds BatchNorm, so logits
    of a BNN in ONNX Runtime cannot match PyTorch's exactly; top-1 on real images must."""
    pytest.importorskip("onnxruntime")
    res = convert_model("tiny_bnn", "onnx", tmp_path)
    assert res.parity["ok"] and res.parity["min_top1"] == 0.9
    assert res.parity["dataset"]["top1_agreement"] >= 0.9


def test_truncated_tflite_is_refused_before_litert_reads_it(converted, tmp_path):
    """LiteRT trusts a file's offsets and can crash the process on a truncated model (it
    did, once, in this suite); the backend walks the flatbuffer first, bounds-checked."""
    from aiot.device_agent.backends.litert_backend import check_flatbuffer

    data = converted[1]["tflite"].artifact.read_bytes()
    check_flatbuffer(str(converted[1]["tflite"].artifact))
    broken = tmp_path / "cut.tflite"
    for fraction in (0.05, 0.2, 0.33, 0.5, 0.8, 0.99):
        broken.write_bytes(data[: int(len(data) * fraction)])
        with pytest.raises(ValueError, match="truncated or corrupt|not a TFLite"):
            check_flatbuffer(str(broken))
