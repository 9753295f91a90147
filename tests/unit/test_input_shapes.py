"""``--input-shape`` parsing, binding to a sweep's models, the shape proposed for free dims,
and how a record's shape is shown. Fast: ONNX graphs made with ``onnx.helper`` (inspected by
ONNX Runtime in this process) and plain records."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from aiot.core.errors import UsageError
from aiot.host.engine.input_shapes import (
    bind_shapes,
    flat_shapes,
    parse_shape_args,
)
from aiot.host.engine.runs import RunRequest, expand_targets
from aiot.host.engine.shape_guess import propose
from aiot.host.store.identity import shape_detail, shape_label
from aiot.models.model_ref import resolve_model


def test_the_four_forms_parse():
    args = parse_shape_args(["1x3x640x640", "x=1x512", "rec.onnx:x=1x3x48x320",
                             "cls.onnx:1X3X48X192", "serving_default_x:0=1x4"])
    assert [(a.left, a.bare_scoped, a.dims) for a in args] == [
        (None, False, (1, 3, 640, 640)), ("x", False, (1, 512)),
        ("rec.onnx:x", False, (1, 3, 48, 320)), ("cls.onnx", True, (1, 3, 48, 192)),
        ("serving_default_x:0", False, (1, 4))]


@pytest.mark.parametrize("bad", ["x=", "=1x2", "x=1xA", "x=0x3", "1x-1", ":1x2", "x=1x2x"])
def test_malformed_values_are_one_line(bad):
    with pytest.raises(UsageError, match=r"is not \[MODEL:\]\[NAME=\]DxD"):
        parse_shape_args([bad])


def test_a_repeated_input_is_refused_unless_it_repeats_the_same_shape():
    assert len(parse_shape_args(["x=1x8", "x=1x8"])) == 1
    with pytest.raises(UsageError, match="x=1x8 and x=2x8 give one input two shapes") as caught:
        parse_shape_args(["x=1x8", "x=2x8"])
    assert "MODEL:NAME=DxD" in caught.value.hint
    with pytest.raises(UsageError, match="two shapes"):
        parse_shape_args(["1x8", "2x8"])


def test_a_single_model_command_takes_any_form():
    assert flat_shapes(parse_shape_args(["1x3x8x8"])) == {"input": [1, 3, 8, 8]}
    assert flat_shapes(parse_shape_args(["f.py:make:x=1x4"])) == {"x": [1, 4]}


@pytest.fixture
def onnx_pair(tmp_path):
    """``two_inputs.onnx`` (a, b [N, 8], k []) and a one-input graph ``one.onnx`` whose input
    is also called ``a`` ([N, C] with both free)."""
    pytest.importorskip("onnxruntime")
    import onnx
    from onnx import TensorProto, helper

    from tests.third_party import onnx_two_inputs

    two = onnx_two_inputs(tmp_path)
    graph = helper.make_graph(
        [helper.make_node("Relu", ["a"], ["y"])], "one",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", "channels"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "channels"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    one = tmp_path / "one.onnx"
    onnx.save(model, one)
    return two, one


def _requests(*paths):
    targets = [(resolve_model(str(p)), ["onnx"]) for p in paths]
    return expand_targets(["local"], targets, [1])


def test_a_free_batch_dim_alone_is_set_to_1_and_said(onnx_pair):
    two, _ = onnx_pair
    (request,), notes = bind_shapes(_requests(two), ())
    assert request.shapes() == {"a": [1, 8], "b": [1, 8]}
    assert request.batch_defaulted == ("a", "b")
    assert notes == ["two_inputs.onnx: free batch dim set to 1 (a=1x8, b=1x8), as "
                     "benchmark_model and onnxruntime_perf_test do; --input-shape sets another"]
    assert "batch_defaulted" not in request.to_spec()  # provenance, not part of the run's key
    # a given shape beats the default; the others still default
    (request,), _ = bind_shapes(_requests(two), parse_shape_args(["a=4x8"]))
    assert request.shapes() == {"a": [4, 8], "b": [1, 8]} and request.batch_defaulted == ("b",)
    # real values decide the shapes: nothing is defaulted
    with_npz = replace(_requests(two)[0], inputs=two.with_suffix(".npz"))
    (request,), notes = bind_shapes([with_npz], ())
    assert request.input_shapes is None and not notes


def test_shapes_scope_to_their_model(onnx_pair):
    two, one = onnx_pair
    args = parse_shape_args(["one.onnx:a=2x16", "a=3x8", f"{two}:b=5x8"])
    bound = {r.model: r for r in bind_shapes(_requests(two, one), args)[0]}
    assert bound["one.onnx"].shapes() == {"a": [2, 16]}  # its own beats the sweep's
    assert bound["two_inputs.onnx"].shapes() == {"a": [3, 8], "b": [5, 8]}


def test_a_bare_shape_needs_a_single_input(onnx_pair):
    two, one = onnx_pair
    (request,), _ = bind_shapes(_requests(one), parse_shape_args(["2x5"]))
    assert request.shapes() == {"a": [2, 5]}
    with pytest.raises(UsageError, match=r"gives one shape, but two_inputs.onnx has 3 inputs "
                                         r"\(a, b, k\)"):
        bind_shapes(_requests(two), parse_shape_args(["two_inputs:2x5"]))


def test_names_and_scopes_that_fit_nothing_are_refused(onnx_pair):
    two, one = onnx_pair
    with pytest.raises(UsageError, match="'nope.onnx' is no model of this run"):
        bind_shapes(_requests(two, one), parse_shape_args(["nope.onnx:a=1x8"]))
    with pytest.raises(UsageError, match="one.onnx has no input 'b'"):
        bind_shapes(_requests(two, one), parse_shape_args(["one:b=1x8"]))
    with pytest.raises(UsageError, match="no model here has an input 'z' with a dynamic dim"):
        bind_shapes(_requests(two, one), parse_shape_args(["z=1x8"]))
    with pytest.raises(UsageError, match="give two_inputs.onnx's input 'a' two shapes"):
        bind_shapes(_requests(two), parse_shape_args(["two_inputs:a=1x8", f"{two}:a=2x8"]))


def test_rank_and_fixed_dims_are_checked_with_what_to_give(onnx_pair):
    from aiot.host.engine.signature import check_run_inputs

    two, _ = onnx_pair
    (request,), _ = bind_shapes(_requests(two), parse_shape_args(["a=1x8x1"]))
    with pytest.raises(UsageError, match="has 3 dims, but two_inputs.onnx's input 'a' has rank 2"
                                         r".*the rank is wrong") as caught:
        check_run_inputs(request)
    assert caught.value.hint == "give 2 dims, e.g. a=1x8"
    (request,), _ = bind_shapes(_requests(two), parse_shape_args(["a=1x9"]))
    with pytest.raises(UsageError, match="does not fit .* dim 1 is fixed at 8") as caught:
        check_run_inputs(request)
    assert caught.value.hint.startswith("only dynamic dims (-1) can be set")


def test_proposals_read_the_file_first_then_guess():
    images = {"name": "images", "shape": [-1, 3, -1, -1]}
    assert propose(images, facts=({"imgsz": "[480, 640]"}, {})) == (
        [1, 3, 480, 640], "imgsz in the model's metadata")
    assert propose(images, facts=({"imgsz": "320"}, {}))[0] == [1, 3, 320, 320]
    dims, why = propose(images, facts=({}, {}))
    assert dims == [1, 3, 640, 640] and why.startswith("a guess")
    assert propose({"name": "input", "shape": [-1, -1, -1, 3]}, facts=({}, {}))[0] == [1, 224, 224, 3]
    # the dims' own names say which are height and width
    named = ({}, {"pixels": ["N", "height", "width", "C"]})
    assert propose({"name": "pixels", "shape": [-1, -1, -1, -1]}, facts=named)[0] == [1, 224, 224, 128]
    # a text line 48 high: 4 times as wide
    assert propose({"name": "x", "shape": [-1, 3, 48, -1]}, facts=({}, {}))[0] == [1, 3, 48, 192]
    # tokens: a sequence of 128
    dims, why = propose({"name": "input_ids", "shape": [-1, -1]}, facts=({}, {}))
    assert dims == [1, 128] and "a guess: 128" in why


def test_the_onnx_metadata_and_dim_names_are_read(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from aiot.host.engine.shape_guess import onnx_facts

    graph = helper.make_graph(
        [helper.make_node("Relu", ["images"], ["y"])], "det",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, "h", "w"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    helper.set_model_props(model, {"imgsz": "[256, 256]"})
    path = tmp_path / "det.onnx"
    onnx.save(model, path)
    assert onnx_facts(path) == ({"imgsz": "[256, 256]"}, {"images": ["batch", "", "h", "w"]})
    assert propose({"name": "images", "shape": [-1, 3, -1, -1]}, path)[0] == [1, 3, 256, 256]
    assert onnx_facts(tmp_path / "missing.onnx") == ({}, {})


def _record(result=None, spec=None, provenance=None):
    return SimpleNamespace(result=result, spec=spec or {}, provenance=provenance or {})


def test_records_show_the_shape_they_ran_at():
    ran = _record({"inputs": [{"name": "images", "shape": [1, 3, 640, 640]}]},
                  provenance={"input_shapes_defaulted": ["images"]})
    assert shape_label(ran) == "1x3x640x640"
    assert shape_detail(ran) == "images 1x3x640x640 (free batch dim set to 1: images)"
    several = _record({"inputs": [{"name": "a", "shape": [1, 8]}, {"name": "k", "shape": []}]})
    assert shape_label(several) == "a=1x8 k=scalar"
    assert shape_label(_record({"input_shape": [1, 224, 224, 3]})) == "1x224x224x3"  # native
    failed = _record(None, spec={"input_shapes": {"x": [1, 3, 48, 320]}})
    assert shape_label(failed) == "1x3x48x320"
    assert shape_label(_record()) == "—"
    long = _record({"inputs": [{"name": f"input_{i}", "shape": [1, 512]} for i in range(4)]})
    assert len(shape_label(long)) == 24 and shape_label(long).endswith("…")


def test_a_request_without_shapes_keeps_its_spec():
    request = RunRequest("local", "tiny_cnn", "tflite", 1)
    assert "input_shapes" not in request.to_spec() and "batch_defaulted" not in request.to_spec()


def test_a_zoo_model_takes_no_shape(onnx_pair):
    two, _ = onnx_pair
    targets = [(resolve_model("tiny_cnn"), ["tflite"]), (resolve_model(str(two)), ["onnx"])]
    requests = expand_targets(["local"], targets, [1])
    bound = {r.model: r for r in bind_shapes(requests, parse_shape_args(["a=2x8"]))[0]}
    assert bound["tiny_cnn"].input_shapes is None  # its spec (and run key) stay as they were
    assert bound["two_inputs.onnx"].shapes() == {"a": [2, 8], "b": [1, 8]}
    with pytest.raises(UsageError, match="tiny_cnn is a zoo model, whose input shape is fixed"):
        bind_shapes(requests, parse_shape_args(["tiny_cnn:1x1x32x32"]))
    with pytest.raises(UsageError, match="no model here has an input 'z'"):
        bind_shapes(requests, parse_shape_args(["z=1x8"]))

