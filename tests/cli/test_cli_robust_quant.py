"""The robustness suites on RobustMQ's quantized models (issue 38): a quantized zoo model
(``tiny_cnn_lsq4``) runs fake-quantized in PyTorch, ``--bits`` sweeps its bit-width (one
record and one table row per width), its ``aiot train --quantize`` weights are picked by
default, and only LSQ 8-bit runs on a device (int8 ONNX); the others are refused there."""

from __future__ import annotations

import hashlib
import importlib.util
import json

import pytest

needs_stack = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("torch", "torchattacks", "sklearn")),
    reason="torch, torchattacks or scikit-learn is not installed")
ATTACK = ("robust", "attack", "--dataset", "digits", "--limit", "6", "--attacks", "fgsm,pgd",
          "--steps", "2")


@needs_stack
def test_attack_sweeps_bit_widths_one_record_and_row_per_width(cli):
    data = cli.json(*ATTACK, "-m", "tiny_cnn_lsq4", "--bits", "2,8")
    runs = data["sweep"]
    assert [r["quantization"] for r in runs] == [{"method": "lsq", "bits": 2},
                                                 {"method": "lsq", "bits": 8}]
    for run, bits in zip(runs, (2, 8), strict=True):
        record = cli.record(run["record"])
        assert (record.kind, record.status, record.model) == ("robust-attack", "ok", f"tiny_cnn.lsq{bits}")
        assert record.result["quantization"]["bits"] == bits
        assert record.spec["target"]["quantization"] == {"method": "lsq", "bits": bits}
        assert 0 <= run["summary"]["wcar_reference"] <= run["summary"]["clean_reference"]
    out = cli(*ATTACK, "-m", "tiny_cnn_lsq2", "--bits", "2,4").stdout
    assert "attacks over bit-widths" in out and "fgsm AR" in out and "pgd AAI" in out and "WCAR" in out
    rows = [line for line in out.splitlines() if line.startswith("│ lsq")]
    assert [row.split("│")[2].strip() for row in rows] == ["2", "4"]


def test_gradient_attacks_reach_the_input_through_the_rounding():
    """LSQ's straight-through estimator: a loss on the fake-quantized model has a non-zero
    input gradient, so FGSM/PGD attack the quantized model itself."""
    torch = pytest.importorskip("torch")
    from aiot.host.robust.target import Target, reference_model

    for bits in (2, 8):
        spec, model = reference_model(Target("tiny_cnn", quantize=f"lsq:{bits}"))
        assert model.quantized_with.bits == bits
        x = spec.example_input(batch=4, seed=1).requires_grad_(True)
        torch.nn.functional.cross_entropy(model(x), torch.zeros(4, dtype=torch.long)).backward()
        assert x.grad is not None and float(x.grad.abs().sum()) > 0


@needs_stack
def test_corrupt_and_sysnoise_sweep_bit_widths(cli):
    corrupt = cli.json("robust", "corrupt", "-m", "tiny_cnn_lsq4", "--bits", "2,4", "--corruptions",
                       "fog", "--severities", "3", "--limit", "6", "--frames", "3")["sweep"]
    assert [r["quantization"]["bits"] for r in corrupt] == [2, 4]
    assert all({"mNR", "mFP", "mean_NCI"} <= set(r["summary"]) for r in corrupt)
    out = cli("robust", "sysnoise", "-m", "tiny_cnn_lsq4", "--bits", "4,8", "--limit", "6",
              "--types", "colour").stdout
    assert "system noise over bit-widths" in out and "colour dACC" in out
    assert cli.record(cli.json("robust", "sysnoise", "-m", "tiny_cnn_lsq8", "--limit", "6",
                               "--types", "colour")["record"]).model == "tiny_cnn.lsq8"


@pytest.mark.parametrize(("args", "message"), [
    (("-m", "tiny_cnn_lsq4", "-f", "onnx"), "LSQ 4-bit is not deployable: int8 is the narrowest"),
    (("-m", "tiny_cnn_lsq8", "--bits", "2,8", "-f", "onnx"), "tiny_cnn_lsq2 cannot be evaluated as an onnx"),
    (("-m", "tiny_cnn_lsq8", "-f", "ort"), "no ort export of its learned scales"),
    (("-m", "tiny_cnn", "--bits", "2,4"), "tiny_cnn is not quantized"),
    (("-m", "tiny_cnn_lsq4", "--bits", "3"), "3 bits is not one of"),
])
def test_refusals_are_one_line_before_any_work(cli, args, message):
    for suite in ("attack", "corrupt", "sysnoise"):
        result = cli("robust", suite, *args, "--limit", "4", code=2)
        assert message in result.stderr and "Traceback" not in result.stderr


def test_the_quantized_training_of_that_width_is_picked_by_default(tmp_path, monkeypatch):
    """``aiot train tiny_cnn --quantize lsq:4`` is what tiny_cnn_lsq4 runs with; the float
    model's and another width's trainings are not."""
    from aiot.host.engine.weights import TRAINED, choose_weights
    from aiot.host.training.trainer import SUMMARY_VERSION
    from aiot.models.model_ref import resolve_model

    monkeypatch.setenv("AIOT_WEIGHTS_DIR", str(tmp_path))
    for name, quantize in (("float", None), ("lsq4", "lsq:4"), ("lsq8", "lsq:8")):
        (tmp_path / f"{name}.pt").write_bytes(name.encode())
        (tmp_path / f"{name}.json").write_text(json.dumps({
            "v": SUMMARY_VERSION, "model": "tiny_cnn", "weights_file": f"{name}.pt",
            "weights_sha256": hashlib.sha256(name.encode()).hexdigest(),
            "config": {"dataset": "fashion-mnist", "binarize": None, "quantize": quantize}}))
    for model, file in (("tiny_cnn_lsq4", "lsq4.pt"), ("tiny_cnn_lsq8", "lsq8.pt"), ("tiny_cnn", "float.pt")):
        picked = choose_weights(resolve_model(model, quantized_ok=True), None, "fashion-mnist")
        assert (picked.origin, picked.path.name) == (TRAINED, file)
    assert choose_weights(resolve_model("tiny_cnn_lsq2", quantized_ok=True), None, "fashion-mnist").untrained


@needs_stack
@pytest.mark.slow
def test_lsq8_attacks_run_on_its_int8_onnx_artifact(cli):
    pytest.importorskip("onnxruntime")
    data = cli.json(*ATTACK, "-m", "tiny_cnn_lsq8", "-f", "onnx", "--device", "local")
    record = cli.record(data["record"])
    assert (record.format, record.status, record.model) == ("onnx", "ok", "tiny_cnn.lsq8")
    assert record.artifact_sha256 and data["quantization"] == {"method": "lsq", "bits": 8}
    assert "accuracy (onnx@local)" in data["tables"][0]["columns"]
    # the integer artifact agrees with the fake-quantized model (parity bar: 99 % top-1)
    assert abs(data["summary"]["clean_deployed"] - data["summary"]["clean_reference"]) <= 1 / 6
