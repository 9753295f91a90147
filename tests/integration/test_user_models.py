"""The design card's commands as written, and models as users name them, on `local`."""

from __future__ import annotations

import textwrap

import pytest

from tests.helpers import FAST, single_error

pytest.importorskip("torch")


def test_sweep_without_model_measures_what_was_last_pushed(cli, monkeypatch):
    result = cli("push", "--device", "local", "--model", "tiny_cnn")
    assert "tiny_cnn as tflite" in result.stdout and "aiot sweep --device local" in result.stdout
    monkeypatch.setenv("AIOT_DEVICE", "local")
    records = cli.json("sweep", "--threads", "1,2", *FAST)
    assert sorted((r["model"], r["format"], r["threads"], r["status"]) for r in records) == [
        ("tiny_cnn", "tflite", 1, "ok"), ("tiny_cnn", "tflite", 2, "ok")]


@pytest.mark.slow
def test_the_design_cards_two_commands_as_written(cli, monkeypatch):
    """`aiot push --device local --model resnet18_bnn`, then `aiot sweep --threads 1,2`."""
    pushed = cli("push", "--device", "local", "--model", "resnet18_bnn")
    assert "resnet18_bnn as lce" in pushed.stdout
    monkeypatch.setenv("AIOT_DEVICE", "local")
    records = cli.json("sweep", "--threads", "1,2", *FAST)
    assert sorted((r["model"], r["spec"]["binarize"], r["format"], r["threads"], r["status"])
                  for r in records) == [("resnet18", "bnn", "lce", 1, "ok"),
                                        ("resnet18", "bnn", "lce", 2, "ok")]
    parity = records[0]["provenance"]["artifact"]["parity"]
    assert parity["rule"] == "sign-agreement" and parity["signs"]["ok"]


def test_sweep_without_model_and_nothing_pushed_says_how_to_push(cli):
    result = cli("sweep", "--device", "local", "--threads", "1", code=2)
    single_error(result, "nothing was pushed to local yet", "aiot push --device local")


MYNET = textwrap.dedent("""
    import torch
    from torch import nn


    def make():
        torch.manual_seed(3)
        return nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 3)), torch.randn(1, 12)
""")


@pytest.mark.slow
def test_a_factory_and_a_zoo_model_sweep_together(cli, tmp_path):
    """Two formats make the sweep a grid; each format's conversion of a factory (ExecuTorch's
    included) is tests/converters/test_user_code.py's, with parity."""
    mynet = tmp_path / "mynet.py"
    mynet.write_text(MYNET)
    records = cli.json("sweep", "-d", "local", "-m", f"{mynet}:make,tiny_cnn", "-f",
                       "tflite,onnx", "--threads", "1", *FAST)
    ran = sorted((r["model"], r["format"], r["status"]) for r in records)
    assert ran == [(m, f, "ok") for m in ("mynet.py:make", "tiny_cnn")
                   for f in ("onnx", "tflite")], [r["reason"] for r in records]
    mine = next(r for r in records if r["model"] == "mynet.py:make")
    source = mine["provenance"]["source"]
    assert source["kind"] == "code" and source["sha256"] == mine["spec"]["model_sha256"]
    assert str(tmp_path) not in str(mine["spec"]) + str(mine["provenance"]["source"])
    assert mine["provenance"]["artifact"]["parity"]["ok"]


def test_bad_references_and_inputs_are_one_line_exit_2(cli, tmp_path):
    mynet = tmp_path / "mynet.py"
    mynet.write_text(MYNET)
    single_error(cli("run", "-m", str(tmp_path / "none.tflite"), code=2),
                    "none.tflite does not exist")
    single_error(cli("run", "-m", f"{mynet}:missing", code=2), "has no function 'missing'")
    single_error(cli("run", "-m", f"{mynet}:make", "--dataset", "digits", code=2),
                    "--dataset measures a zoo image classifier's accuracy")
    single_error(cli("run", "-m", "tiny_cnn", "--input-shape", "x=1xA", code=2),
                    "--input-shape 'x=1xA' is not [MODEL:][NAME=]DxD")
    single_error(cli("run", "-m", "tiny_cnn", "--inputs", str(tmp_path / "no.npz"), code=2),
                    "--inputs file")
    single_error(cli("robust", "sysnoise", "-m", f"{mynet}:make", code=2),
                    "is not a zoo model")
    single_error(cli("run", "-m", "tiny_cnn_bnn", "-f", "lce", "--binarize", "xnor", code=2),
                    "already binarized with bnn")
