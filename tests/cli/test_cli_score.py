"""``aiot score om-infer`` over a result store filled with hand-picked runs."""

import math
import os
from pathlib import Path

import pytest

from aiot.host.store import open_store


def _store_run(store, model, fmt, binarize, median, size, device="pi4", threads=1, mean=None):
    spec = {"device": device, "model": model, "format": fmt, "threads": threads, "binarize": binarize}
    r = store.begin("latency", spec, {}, device=device, model=model, format=fmt, threads=threads)
    stats = {"median": median, "mean": mean if mean is not None else median}
    if median is None:
        stats.pop("median")
    store.finish(r.id, "ok", result={"stats_ms": stats}, median_ms=median, size_bytes=size)
    return r.id


@pytest.fixture
def results():
    """The store the CLI reads (the conftest points AIOT_RESULTS_DIR at a tmp folder)."""
    with open_store(Path(os.environ["AIOT_RESULTS_DIR"])) as store:
        yield store


@pytest.fixture
def filled(results):
    _store_run(results, "resnet18", "tflite", None, 10.0, 3200)
    _store_run(results, "resnet18", "lce", "bnn", 2.0, 200)
    _store_run(results, "resnet18", "tflite", None, 6.0, 3200, device="pixel")
    _store_run(results, "resnet18", "lce", "bnn", 2.0, 400, device="pixel")
    _store_run(results, "resnet18", "dabnn", "reactnet", None, 100, device="pixel", mean=1.5)
    _store_run(results, "resnet18", "lce", "bnn", 1.0, 200, threads=4)  # no 4-thread baseline
    return results


def test_json_has_pairs_scores_and_unpaired(cli, filled):
    data = cli.json("score", "om-infer")
    assert data["baseline"] == "tflite"
    scores = {(s["algorithm"], s["format"]): s for s in data["scores"]}
    lce = scores[("bnn", "lce")]
    assert (lce["pairs"], lce["speedup"], lce["compression"]) == (2, 4.0, 12.0)
    assert lce["om_infer"] == pytest.approx(math.sqrt((16 + 144) / 2))
    assert lce["devices"] == ["pi4", "pixel"]
    reactnet = scores[("reactnet", "dabnn")]
    assert (reactnet["speedup"], reactnet["compression"], reactnet["stats"]) == (4.0, 32.0, ["mean"])
    assert len(data["pairs"]) == 3
    [unpaired] = data["unpaired"]
    assert (unpaired["threads"], unpaired["algorithm"]) == (4, "bnn")


def test_table_output(cli, filled):
    result = cli("score", "om-infer")
    out = result.stdout
    assert "OM_infer" in out and "speedup" in out and "compression" in out
    assert "8.94" in out  # sqrt((4² + 12²) / 2)
    assert "5.00x" in out and "16.00x" in out and "mean" in out
    # The run without a baseline is listed on stderr with the command that measures it.
    assert "unpaired: 1 binarized run" in result.stderr
    assert "aiot run --model resnet18 --format tflite --device pi4 --threads 4" in result.stderr


def test_device_and_model_filters(cli, filled):
    data = cli.json("score", "om-infer", "--device", "pi4")
    assert [s["devices"] for s in data["scores"]] == [["pi4"]]
    assert data["scores"][0]["speedup"] == 5.0
    result = cli("score", "om-infer", "--model", "vgg_small", code=2)
    assert "no binarized run for model 'vgg_small'" in result.stderr


def test_empty_store_is_one_line_error(cli):
    result = cli("score", "om-infer", code=2)
    assert result.stdout == "" and "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("error: no binarized run with an FP32 tflite baseline")
    assert lines[1].startswith("hint: measure a binarized model and its FP32 baseline")
    assert "--binarize bnn" in result.stderr


def test_only_unpaired_runs_name_the_missing_baseline(cli, results):
    _store_run(results, "resnet18", "lce", "bnn", 1.0, 200, threads=2)
    result = cli("score", "om-infer", "--json", code=2)
    assert result.stdout == ""
    assert "error: no binarized run has an FP32 tflite baseline (1 unpaired)" in result.stderr
    assert "aiot run --model resnet18 --format tflite --device pi4 --threads 2" in result.stderr


def test_unknown_baseline_format(cli, filled):
    result = cli("score", "om-infer", "--baseline", "tflit", code=2)
    assert "unknown format 'tflit'" in result.stderr and "tflite" in result.stderr


def test_other_baseline_format(cli, filled):
    result = cli("score", "om-infer", "--baseline", "onnx", code=2)
    assert "no binarized run has an FP32 onnx baseline (4 unpaired)" in result.stderr
    assert "--format onnx" in result.stderr
