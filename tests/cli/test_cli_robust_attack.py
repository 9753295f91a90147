"""``aiot robust attack`` end to end on ``local``: tiny_cnn trained on digits, a few images."""

from __future__ import annotations

import importlib.util

import pytest

needs_stack = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("torch", "torchattacks", "sklearn")),
    reason="torch, torchattacks or scikit-learn is not installed")
SMALL = ("--model", "tiny_cnn", "--dataset", "digits", "--limit", "6", "--steps", "3", "--queries", "30")


@pytest.fixture
def weights(tiny_digits_weights) -> str:
    return tiny_digits_weights



def _rows(data: dict) -> dict:
    table = data["tables"][0]
    return {row[0]: dict(zip(table["columns"], row, strict=True)) for row in table["rows"]}


def test_unknown_attack_is_one_line_with_close_matches(cli):
    result = cli("robust", "attack", "--model", "tiny_cnn", "--attacks", "fgsm,pgdd", code=2)
    assert "unknown attack 'pgdd'" in result.stderr and "did you mean" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) <= 2


@pytest.mark.parametrize("args,message", [
    (("--eps-curve", "0,abc"), "--eps-curve takes comma-separated numbers"),
    (("--eps", "-0.1"), "--eps must be a finite budget"),
    (("--queries", "0"), "--queries must be at least 1"),
    (("--source-weights", "no-such.pt", "--attacks", "sinifgsm"), "source weights file no-such.pt does not exist"),
    (("--weights", "missing.pt"), "weights file missing.pt does not exist"),
    (("--dataset", "photos"), "the photos have no labels"),
])
def test_bad_options_fail_before_any_work(cli, args, message):
    assert message in cli("robust", "attack", "--model", "tiny_cnn", *args, code=2).stderr


@needs_stack
def test_local_run_stores_a_record(cli, weights):
    data = cli.json("robust", "attack", *SMALL, "--weights", weights, "--attacks", "fgsm,pgd,nattack",
                    "--eps", "0.1", "--eps-curve", "0,0.1")
    record = cli.record(data["record"])
    assert (record.kind, record.status, record.device, record.format) == ("robust-attack", "ok", "local", "pytorch")
    assert record.result["summary"] == data["summary"] and record.accuracy == data["clean_accuracy"]
    assert record.spec["attacks"] == ["fgsm", "pgd", "nattack"] and record.spec["queries"] == 30
    rows = _rows(data)
    assert rows["nattack"]["crafted on"] == "reference" and rows["nattack"]["queries per image"] <= 30
    assert rows["pgd"]["accuracy (reference)"] <= data["clean_accuracy"]
    for points in data["curves"][0]["series"].values():
        assert points[0] == [0.0, data["clean_accuracy"]]  # ε = 0 changes nothing


@needs_stack
def test_human_output(cli, weights):
    out = cli("robust", "attack", *SMALL, "--weights", weights, "--attacks", "fgsm,evolutionary").stdout
    assert "Accuracy under attack" in out and "evolutionary" in out and "WCAR" in out and "record:" in out


@needs_stack
@pytest.mark.slow
def test_ort_deployment_is_evaluated_on_the_device(cli, weights):
    pytest.importorskip("onnxruntime")
    data = cli.json("robust", "attack", *SMALL, "--weights", weights, "--attacks", "fgsm,square",
                    "--eps", "0.1", "--format", "ort", "--device", "local")
    record = cli.record(data["record"])
    assert record.format == "ort" and record.status == "ok" and record.artifact_sha256
    rows = _rows(data)
    assert "accuracy (ort@local)" in data["tables"][0]["columns"]
    assert rows["square"]["crafted on"] == "ort@local" and 0 < rows["square"]["queries"] <= 6 * 30
    # ONNX Runtime computes the same float function: the reference's images transfer one for one
    # (within one image of 6 for a prediction that sits on a decision boundary)
    assert abs(data["summary"]["clean_deployed"] - data["summary"]["clean_reference"]) <= 1 / 6
    assert abs(rows["fgsm"]["accuracy (ort@local)"] - rows["fgsm"]["accuracy (reference)"]) <= 1 / 6
    assert data["clean_accuracy"] == data["summary"]["clean_deployed"]
