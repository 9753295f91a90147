"""Usability faults: what a user did right that aiot quietly undid.

- weights from ``aiot train`` ignored by ``run`` and ``robust`` (chance-level accuracy of a
  random init reported as the model's), or accuracy measured untrained without a word;
- an int8 artifact overwritten by a later float run of the same model and format, and no way
  to ask ``run`` for the int8 one;
- a trained binarized network refused by the LCE parity check although the README's rule for
  binarized artifacts (signs per binary layer, not logits) holds.

Each test trains nothing it can copy: the session's ``tiny_digits_weights`` (tiny_cnn, one
epoch on digits) is put into this test's own weights cache, as ``aiot train`` leaves it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.faults.conftest import count_records, one_line_error
from tests.helpers import FAST

pytest.importorskip("torch")
needs_sklearn = pytest.mark.skipif(importlib.util.find_spec("sklearn") is None,
                                   reason="scikit-learn (the digits data set) is not installed")


def _sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _cache_training(weights: str, key: str | None = None, age_s: float = 0.0) -> Path:
    """Copy a finished training (weights + summary) into this test's weights cache, as
    ``aiot train`` leaves it; under another ``key`` (a different training of the same
    model) and ``age_s`` seconds older when asked. Returns the cached weights file."""
    source = Path(weights)
    folder = Path(os.environ["AIOT_WEIGHTS_DIR"])
    folder.mkdir(parents=True, exist_ok=True)
    summary = json.loads(source.with_suffix(".json").read_text())
    name = source.name if key is None else source.name.replace(summary["key"], key)
    target = folder / name
    shutil.copyfile(source, target)
    if key is not None:
        summary.update(key=key, weights_file=name)
    summary_path = target.with_suffix(".json")
    summary_path.write_text(json.dumps(summary))
    if age_s:
        stamp = summary_path.stat().st_mtime - age_s
        os.utime(summary_path, (stamp, stamp))
    return target


@pytest.mark.slow
@needs_sklearn
@pytest.mark.fault("run ignores the weights aiot train cached")
def test_run_measures_the_newest_training_of_the_model(cli, fault, tiny_digits_weights):
    older = _cache_training(tiny_digits_weights, key="0" * 16, age_s=3600)
    newest = _cache_training(tiny_digits_weights)
    # An older training that no longer matches its summary must not be what runs either.
    older.write_bytes(b"damaged")
    result = cli("run", "-m", "tiny_cnn", "-f", "onnx", "--dataset", "digits", "--json", *FAST)
    (record,) = json.loads(result.stdout)
    assert "weights trained on digits" in result.stderr and "warning" not in result.stderr
    assert record["accuracy"] > 0.8  # a random init scores ~0.1 here
    weights = record["provenance"]["weights"]
    assert weights["origin"] == "trained" and weights["file"] == newest.name
    assert weights["sha256"] == _sha256(newest) and weights["trained"]["dataset"] == "digits"
    assert str(newest.parent) not in json.dumps(weights)  # no host path in the record
    assert f".w-{weights['sha256'][:8]}." in record["provenance"]["artifact"]["file"]
    shown = cli("results", "show", record["id"]).stdout
    assert "trained on digits" in shown and newest.name in shown


@pytest.mark.slow
@needs_sklearn
@pytest.mark.fault("accuracy measured untrained without a word")
def test_untrained_accuracy_is_warned_once_and_recorded(cli, fault):
    result = cli("sweep", "-m", "tiny_cnn", "-f", "onnx", "--threads", "1,2", "--dataset", "digits",
                 "--json", *FAST)
    records = json.loads(result.stdout)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "untrained (random init)" in warnings[0], result.stderr
    assert "aiot train tiny_cnn --dataset digits" in warnings[0]
    assert len(records) == 2
    for record in records:
        weights = record["provenance"]["weights"]
        assert (weights["origin"], weights["label"]) == ("random", "untrained (random init)")
    assert "untrained (random init)" in cli("results", "show", records[0]["id"]).stdout


@pytest.mark.slow
@needs_sklearn
@pytest.mark.fault("robust ignores the weights aiot train cached")
def test_robust_scores_the_trained_model(cli, fault, tiny_digits_weights):
    cached = _cache_training(tiny_digits_weights)
    data = cli.json("robust", "corrupt", "--model", "tiny_cnn", "--dataset", "digits", "--limit", "50",
                    "--corruptions", "gaussian_noise", "--severities", "1", "--no-sequences")
    assert data["clean_accuracy"] > 0.8
    weights = cli.record(data["record"]).provenance["weights"]
    assert (weights["origin"], weights["file"], weights["sha256"]) == ("trained", cached.name,
                                                                        _sha256(cached))


@pytest.mark.slow
@pytest.mark.fault("int8 artifact overwritten by a float run")
def test_int8_artifact_survives_a_float_run_and_runs_with_opt(cli, fault):
    pytest.importorskip("litert_torch")
    int8 = cli.json("convert", "tiny_cnn", "-f", "tflite", "--opt", "quant=int8")
    artifact = Path(int8["artifact"])
    assert artifact.name == "tiny_cnn.quant-int8.tflite"
    (floating,) = cli.json("run", "-m", "tiny_cnn", "-f", "tflite", *FAST)
    assert artifact.is_file() and _sha256(artifact) == int8["sha256"]
    assert floating["provenance"]["artifact"]["file"] == "tiny_cnn.tflite"
    assert floating["artifact_sha256"] != int8["sha256"]
    (quantized,) = cli.json("run", "-m", "tiny_cnn", "-f", "tflite", "--opt", "quant=int8", *FAST)
    assert quantized["artifact_sha256"] == int8["sha256"]
    assert quantized["provenance"]["converter"]["options"]["quant"] == "int8"
    assert quantized["spec"]["options"] == {"quant": "int8"} and "options" not in floating["spec"]


@pytest.mark.fault("run --opt the format does not have")
def test_run_refuses_an_option_of_another_format_up_front(cli, fault):
    result = cli("run", "-m", "tiny_cnn", "-f", "onnx", "--opt", "quant=int8", *FAST, code=2)
    one_line_error(result, "format 'onnx' has no option quant")
    assert count_records() == 0


@pytest.mark.slow
@needs_sklearn
@pytest.mark.fault("trained BNN refused by the LCE parity check")
def test_trained_binarized_network_converts_to_lce_under_the_binarized_rule(cli, fault, tmp_path):
    from aiot.host.training.trainer import TrainConfig, train
    from tests.converters.conftest import need_toolchain

    need_toolchain("lce")
    config = TrainConfig(model="tiny_vgg", dataset="digits", epochs=1, batch_size=32, lr=3e-3,
                         limit=300, seed=0, threads=1, binarize="bnn")
    trained = train(config, weights_dir=tmp_path / "weights")
    assert trained.test_accuracy > 0.3  # trained (chance is 0.1): BatchNorm far from identity
    result = cli.json("convert", "tiny_vgg", "--binarize", "bnn", "--weights",
                      str(trained.weights_path), "--format", "lce")
    parity = result["parity"]
    # README: a binarized artifact is judged by its binary layers' signs, not its logits.
    assert parity["ok"] and parity["rule"] == "sign-agreement" and parity["logits_judged"] is False
    layers = parity["signs"]["binary_layers"]
    assert len(layers) == 3 and layers[0]["sign_agreement"] >= 0.99
    assert re.search(r"tiny_vgg\.bnn\.w-[0-9a-f]{8}\.lce\.tflite$", result["artifact"])
