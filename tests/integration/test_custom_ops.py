"""A ``.tflite`` using a custom op its runtime lacks (issue 39, item 5): the refusal names the
op, read from the file's own operator table, and says what could run it."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiot.device_agent.backends.tflite_io import custom_ops
from aiot.models.model_ref import detect_format
from tests.helpers import single_error

REAL = Path(__file__).parents[1] / "faults" / "fixtures" / "two_inputs.tflite"


def _with_custom_op(out: Path, *names: str) -> Path:
    """A real TFLite file (TFLiteConverter's, two inputs and two outputs) whose first operator
    codes are rewritten to CUSTOM with the given ``custom_code`` names, as a model converted
    with a custom op (MediaPipe's, a vendor's, LCE's) carries them."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(bytearray(REAL.read_bytes()), 0)
    for code, name in zip(model.operatorCodes, names):
        code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.CUSTOM
        code.customCode = name
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    out.write_bytes(builder.Output())
    return out


def test_the_operator_table_names_custom_ops(tmp_path):
    assert custom_ops(REAL.read_bytes()) == []
    both = _with_custom_op(tmp_path / "two.tflite", "MyOp", "FlexEinsum")
    assert custom_ops(both.read_bytes()) == ["MyOp", "FlexEinsum"]
    with pytest.raises(ValueError, match="TFL3"):
        custom_ops(b"not a flatbuffer")
    with pytest.raises(ValueError, match="past the end"):  # a cut file: bounded, no crash
        custom_ops(both.read_bytes()[:60])


def test_an_unknown_custom_op_is_named_with_what_runs_it(cli, tmp_path):
    model = _with_custom_op(tmp_path / "vendor.tflite", "MyOp")
    assert detect_format(model) == "tflite"
    for args in (("models", "info", str(model)), ("run", "-m", str(model))):
        line = single_error(cli(*args, code=2), "custom op 'MyOp' is not among LiteRT's "
                            "builtin ops", "the runtime that defines it")
        assert "check that the file is complete" not in line
    assert cli.json("results", "list") == []  # refused up front: no record


def test_lce_ops_route_to_lce_and_flex_ops_say_so(cli, tmp_path):
    # any Lce* op in the operator table makes the file LCE's, not only LceBconv2d/LceQuantize
    lce = _with_custom_op(tmp_path / "binary.tflite", "LceBMaxPool2d")
    assert detect_format(lce) == "lce"
    flex = _with_custom_op(tmp_path / "flex.tflite", "FlexEinsum")
    single_error(cli("models", "info", str(flex), code=2), "custom op 'FlexEinsum'",
                 "Flex delegate")
