"""What a user reads when runs fail or cannot start (issue 51): a failure is one line with its
reason in the run's output, in the table's status column and in the stored record, whatever
raised it, and its traceback is only in the debug log (``-v``); a run of several models with
free input dims is refused once, naming each model's dims with a shape scoped to it; a
binarized model run in float says so in the tables."""

from __future__ import annotations

import logging
import re
import textwrap
from pathlib import Path

import pytest

from aiot.host.engine import executor
from tests.helpers import fast, single_error

FAST = fast(warmup_runs=1)

#: A runtime's error as ONNX Runtime or LiteRT write them: the reason, then pages of frames.
LONG_ERROR = ("the runtime refused input 0: expected int64, got float32\n"
              + "\n".join(f"  frame {i}: in a C++ function far below" for i in range(40)))
REASON = "RuntimeError: the runtime refused input 0: expected int64, got float32"


def test_an_unforeseen_failure_is_one_line_everywhere_and_its_traceback_only_in_the_debug_log(
        cli, monkeypatch, caplog):
    def refuse(request, workspace, listener, provenance):
        raise RuntimeError(LONG_ERROR)  # not an AiotError: nothing in aiot foresaw it

    monkeypatch.setattr(executor, "_measure", refuse)
    caplog.set_level(logging.DEBUG, logger="aiot")
    result = cli("sweep", "-m", "tiny_cnn", "-f", "onnx,tflite", "--threads", "1", *FAST, code=1)
    assert "Traceback" not in result.output and "frame 1:" not in result.output
    said = [line.strip() for line in result.stderr.splitlines() if "failed" in line]
    assert said == [f"failed local: {REASON}"] * 2, result.stderr
    rows = [line for line in result.stdout.splitlines() if "tiny_cnn" in line]
    assert len(rows) == 2 and all(f"failed: {REASON}" in " ".join(r.split()) for r in rows), result.stdout
    records = cli.json("results", "list")
    assert [r["reason"] for r in records] == [REASON] * 2  # the store keeps the one line
    assert {r["result"]["error"]["type"] for r in records} == {"RuntimeError"}
    assert f"failed: {REASON}" in " ".join(cli("results", "list").stdout.split())
    # The traceback went to the log at DEBUG (what -v shows), never at a level a plain run shows.
    loud = [r for r in caplog.records if r.name.startswith("aiot") and r.levelno >= logging.WARNING]
    assert not [r for r in loud if r.exc_info], [r.getMessage() for r in loud]
    traced = [r for r in caplog.records if r.exc_info and "failed unexpectedly" in r.getMessage()]
    assert len(traced) == 2 and all(r.levelno == logging.DEBUG for r in traced)
    assert traced[0].exc_info[0] is RuntimeError


@pytest.mark.slow
def test_a_toolchain_failure_names_the_format_stage_and_reason_in_the_status_column(cli, tmp_path):
    (tmp_path / "half.py").write_text(textwrap.dedent("""
        import torch


        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(8, 3)

            def forward(self, x):
                if torch.compiler.is_exporting():  # litert-torch exports; ONNX's exporter traces
                    raise RuntimeError("this layer has no export\\nand a second line")
                return self.fc(x)


        def make():
            return Net().eval(), torch.rand(1, 8)
    """))
    result = cli("sweep", "-m", f"{tmp_path / 'half.py'}:make", "-f", "onnx,tflite",
                 "--threads", "1", *FAST, code=1)
    assert "Traceback" not in result.output and "second line" not in result.output
    assert ("failed local: tflite conversion failed at export: RuntimeError: this layer has no "
            "export") in result.stderr
    table = {line.split()[2]: " ".join(line.split()) for line in result.stdout.splitlines()
             if "half.py:make" in line}
    assert "failed: tflite export: RuntimeError: this layer has no export" in table["tflite"]
    assert " ok" in table["onnx"]
    failed = [r for r in cli.json("results", "list") if r["status"] == "failed"]
    assert [r["reason"].split(" (")[0] for r in failed] == [
        "tflite conversion failed at export: RuntimeError: this layer has no export"]


def _free_onnx(path: Path, dims: list) -> Path:
    """An ONNX graph (onnx.helper) of one input ``x`` with these dims (names: free)."""
    import onnx
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    graph = helper.make_graph([helper.make_node("ReduceMean", ["x"], ["y"], keepdims=0)], "g",
                              inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_a_run_of_several_models_names_every_model_with_free_dims_scoped_to_it(cli, tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    image = _free_onnx(tmp_path / "image.onnx", ["batch", 3, "height", "width"])
    text = _free_onnx(tmp_path / "text.onnx", ["batch", 3, 48, "width"])
    fixed = _free_onnx(tmp_path / "fixed.onnx", ["batch", 3, 32, 32])  # batch only: runs at 1
    models = ",".join(str(p) for p in (image, text, fixed))
    error = single_error(cli("sweep", "-m", models, "--threads", "1", *FAST, code=2))
    assert "2 models have free input dims" in error
    assert "input 'x' of image.onnx has dynamic dims [0, 2, 3]" in error
    assert "input 'x' of text.onnx has dynamic dims [0, 3]" in error
    hint = cli("sweep", "-m", models, "--threads", "1", *FAST, code=2).stderr.split("hint: ")[1]
    flags = re.findall(r"--input-shape (\S+)", hint)
    assert flags == ["image.onnx:x=1x3x224x224", "text.onnx:x=1x3x48x192"], hint
    assert "fixed.onnx" not in hint and not re.search(r"--input-shape x=", hint)
    # The hint as given runs every model, each at its own shape.
    given = [arg for flag in flags for arg in ("--input-shape", flag)]
    cli("sweep", "-m", models, "--threads", "1", *given, *FAST)
    shapes = {r["model"]: r["spec"]["input_shapes"]["x"] for r in cli.json("results", "list")}
    assert shapes == {"image.onnx": [1, 3, 224, 224], "text.onnx": [1, 3, 48, 192],
                      "fixed.onnx": [1, 3, 32, 32]}
    # One model alone keeps the plain NAME=DxD (there is no other model for it to reach).
    alone = cli("run", "-m", str(image), *FAST, code=2).stderr
    assert "--input-shape x=1x3x224x224" in alone and "image.onnx:x=" not in alone


@pytest.mark.slow
def test_a_binarized_model_run_as_tflite_says_it_runs_as_float(cli, tmp_path):
    result = cli("run", "-m", "tiny_vgg_bnn", "-f", "tflite", *FAST)
    assert "tflite (BNN as float)" in result.stdout
    (record,) = cli.json("results", "list")
    assert record["status"] == "ok", record["reason"]
    assert record["spec"]["binarize"] == "bnn" and record["format"] == "tflite"
    assert "tflite (BNN as float)" in cli("results", "list").stdout
    shown = " ".join(cli("results", "show", record["id"][:8]).stdout.split())
    assert re.search(r"format │? ?tflite \(BNN as float\)", shown), shown
    report = cli.json("report", "--format", "md", "--out", str(tmp_path / "md"))
    assert "tflite (BNN as float)" in Path(report["files"][0]).read_text()
