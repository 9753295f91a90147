"""A file a conversion has just written that its runtime then refuses is a conversion failure
with the runtime's reason, not "truncated or corrupt; re-convert it" (re-converting writes
the same file): trained resnet18_mnist_lsq8's .pte was refused by XNNPACK (a negative scale)
and the hint sent the user back to convert again."""

from __future__ import annotations

import pytest

from aiot.converters.parity import runtime_reason

#: What ExecuTorch's agent process wrote on stderr when XNNPACK refused that .pte (verbatim,
#: less the threadpool lines): cpuinfo's probes of optional files come first.
XNNPACK_STDERR = """\
[cpuinfo_utils.cpp:71] Reading file /sys/devices/soc0/image_version
[cpuinfo_utils.cpp:87] Failed to open midr file /sys/devices/soc0/image_version
[cpuinfo_utils.cpp:125] CPU info and manual query on # of cpus dont match.
[XNNCompiler.cpp:664] Failed to define tensor 91 with code: xnn_status_invalid_parameter
[XNNPACKBackend.cpp:143] XNNCompiler::compileModel failed: 0x1
[method.cpp:128] Init failed for backend XnnpackBackend: 0x1
"""


def test_the_runtime_reason_is_its_first_failure_not_a_probe():
    assert runtime_reason(XNNPACK_STDERR) == ("Failed to define tensor 91 with code: "
                                              "xnn_status_invalid_parameter")
    assert runtime_reason("[cpuinfo_utils.cpp:87] Failed to open midr file x\n") is None
    assert runtime_reason("") is None


def test_a_fresh_artifact_its_runtime_refuses_is_a_conversion_failure(tmp_path, monkeypatch):
    """A real ONNX file ONNX Runtime cannot run (an operator of an unknown domain), written by
    the onnx converter's export: the conversion fails at verify, names the runtime's words,
    says it is not a damaged file, and leaves no artifact behind."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from aiot.converters import api
    from aiot.core.errors import ConversionError

    def export(converter, model, example, artifact, options, spec=None):
        node = helper.make_node("Unheard", ["input"], ["logits"], domain="aiot.test")
        graph = helper.make_graph(
            [node], "g",
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 28, 28])],
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                          helper.make_opsetid("aiot.test", 1)]),
                  str(artifact))
        return {}

    monkeypatch.setattr(api, "_export", export)
    with pytest.raises(ConversionError) as caught:
        api.convert_model("tiny_cnn", "onnx", tmp_path, reuse=False)
    error = caught.value
    assert error.stage == "verify" and "refuses the file just written" in error.message
    assert "Unheard" in error.message  # the runtime's own words
    assert "not a damaged file" in error.hint and "truncated" not in error.hint
    assert not list(tmp_path.glob("*.onnx"))
