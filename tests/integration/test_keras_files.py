"""Keras model files (issue 39, item 8): a ``.keras`` or ``.h5`` saved by Keras 3 in
TensorFlow is recognised from its bytes, not met with "cannot tell what kind of model"."""

from __future__ import annotations

import pytest

from aiot.models.model_ref import detect_format
from tests.helpers import fast, single_error


def test_keras_files_are_recognised_from_their_bytes(keras_files, tmp_path):
    keras_zip, h5, *_others = keras_files
    assert detect_format(keras_zip) == detect_format(h5) == "keras"
    renamed = tmp_path / "model.bin"  # the bytes decide, not the name
    renamed.write_bytes(h5.read_bytes())
    assert detect_format(renamed) == "keras"


@pytest.mark.slow
def test_a_keras_file_runs_and_converts_with_parity_vs_keras(cli, keras_files, tmp_path):
    keras_zip, h5, weights, with_lambda = keras_files
    # run: converted by TensorFlow in the lce toolchain, measured as its .tflite
    (record,) = cli.json("run", "-m", str(keras_zip), *fast(warmup_runs=1))
    assert record["status"] == "ok" and record["format"] == "tflite"
    assert record["model"] == "small.keras.tflite"
    assert [i["shape"] for i in record["result"]["inputs"]] == [[1, 8, 8, 3]]
    # convert: the same file's .tflite in --out, parity checked against Keras on the same inputs
    done = cli.json("convert", str(h5), "-f", "tflite", "--out", str(tmp_path))
    assert done["artifact"] == str(tmp_path / "small.h5.tflite") and done["size_bytes"] > 0
    parity = done["parity"]
    assert parity["checked"] and parity["passed"] and parity["reference"] == "keras"
    assert parity["max_abs_diff"] < 1e-4 and parity["inputs"][0]["shape"] == [1, 8, 8, 3]
    again = cli.json("convert", str(h5), "-f", "tflite", "--out", str(tmp_path))
    assert again["cached"] is True  # per file content: TensorFlow is not started again
    single_error(cli("convert", str(keras_zip), "-f", "onnx", code=2),
                 "small.keras is a Keras model: aiot converts it to tflite only")
    # weights alone (save_weights): one line naming what Keras found, and what file converts
    single_error(cli("run", "-m", str(weights), code=1),
                 "small.weights.h5: TensorFlow could not convert it", "No model config",
                 "model.save, not save_weights")
    # a Lambda layer's code is not run (Keras' safe mode): refused, saying why and what to do
    single_error(cli("convert", str(with_lambda), "-f", "tflite", code=1),
                 "lambda.keras: TensorFlow could not convert it", "Lambda",
                 "does not run code stored in a model file")
