"""Input shapes of third-party files, end to end: a free batch dim runs at 1 without flags,
free spatial dims get a hint that runs, shapes scoped per model in one sweep are stored and
shown. The files are real: Keras' MobileNetV2 through TFLiteConverter, and detector- and
OCR-like ONNX exports on EfficientNet-Lite0 (``efficientnet-lite-pytorch``, real weights)."""

from __future__ import annotations

import re

from tests.helpers import fast, single_error

FAST = fast(warmup_runs=1)


def _hinted_shape(result, name: str) -> str:
    found = re.search(rf"--input-shape {name}=([0-9x]+)", result.stderr)
    assert found, result.stderr
    return found.group(1)


def test_a_detector_with_only_a_free_batch_runs_without_flags(cli, detector_onnx):
    info = " ".join(cli("models", "info", str(detector_onnx)).stdout.split())
    assert "free batch dim of images: a run sets it to 1" in info
    result = cli("run", "-m", str(detector_onnx), *FAST)
    assert ("detector.onnx: free batch dim set to 1 (images=1x3x320x320), as benchmark_model "
            "and onnxruntime_perf_test do") in result.stderr
    assert "1x3x320x320" in result.stdout  # the run table's input column
    (record,) = cli.json("results", "list")
    assert record["status"] == "ok", record["reason"]
    assert record["spec"]["input_shapes"] == {"images": [1, 3, 320, 320]}
    assert record["provenance"]["input_shapes_defaulted"] == ["images"]
    assert record["result"]["inputs"][0]["shape"] == [1, 3, 320, 320]
    assert "1x3x320x320" in cli("results", "list").stdout
    shown = cli("results", "show", record["id"][:8]).stdout
    assert re.search(r"input shape\s+│?\s*images 1x3x320x320 \(free batch dim set to 1: images\)",
                     shown), shown


def test_a_keras_tflite_with_a_free_batch_runs_without_flags(cli, keras_tflite):
    result = cli("run", "-m", str(keras_tflite), *FAST)
    assert "keras_mobilenetv2.tflite: free batch dim set to 1" in result.stderr
    (record,) = cli.json("results", "list")
    assert record["status"] == "ok", record["reason"]
    (shape,) = record["spec"]["input_shapes"].values()
    assert shape == [1, 96, 96, 3] and record["result"]["input_shape"] == [1, 96, 96, 3]
    assert "1x96x96x3" in result.stdout


def test_free_spatial_dims_get_a_hint_that_runs(cli, anysize_detector_onnx):
    info = " ".join(cli("models", "info", str(anysize_detector_onnx)).stdout.split())
    assert ("images has other free dims: run with --input-shape images=1x3x320x320 (imgsz in "
            "the model's metadata)") in info
    refused = cli("run", "-m", str(anysize_detector_onnx), *FAST, code=2)
    single_error(refused, "input 'images' of detector_anysize.onnx has dynamic dims [0, 2, 3]",
                    "imgsz in the model's metadata")
    hinted = _hinted_shape(refused, "images")
    assert hinted == "1x3x320x320"  # the file's own imgsz, not 1x3x1x1 (which does not run)
    # the hint as given, and a bare shape for the single input, both run
    cli("run", "-m", str(anysize_detector_onnx), "--input-shape", f"images={hinted}", *FAST)
    cli("run", "-m", str(anysize_detector_onnx), "--input-shape", "1x3x256x256", *FAST)
    shapes = [r["spec"]["input_shapes"]["images"] for r in cli.json("results", "list")]
    assert shapes == [[1, 3, 320, 320], [1, 3, 256, 256]]
    wrong_rank = cli("run", "-m", str(anysize_detector_onnx), "--input-shape", "images=1x3x320",
                     code=2)
    single_error(wrong_rank, "has 3 dims, but detector_anysize.onnx's input 'images' has "
                                "rank 4", "the rank is wrong", "give 4 dims, e.g. images=1x3x320x320")


def test_two_models_sharing_an_input_name_get_their_own_shapes(cli, text_onnx_pair):
    rec, cls = text_onnx_pair
    models = f"{rec},{cls}"
    refused = cli("run", "-m", str(rec), *FAST, code=2)
    hinted = _hinted_shape(refused, "x")
    assert hinted == "1x3x48x192" and "a guess" in refused.stderr
    cli("run", "-m", str(rec), "--input-shape", f"x={hinted}", *FAST)  # the guess runs
    single_error(cli("sweep", "-m", models, "--input-shape", "x=1x3x48x320",
                        "--input-shape", "x=1x3x48x192", *FAST, code=2),
                    "--input-shape x=1x3x48x320 and x=1x3x48x192 give one input two shapes",
                    "MODEL:NAME=DxD")
    single_error(cli("sweep", "-m", models, "--input-shape", "other.onnx:x=1x3x48x320",
                        *FAST, code=2), "'other.onnx' is no model of this run")
    result = cli("sweep", "-m", models, "--threads", "1",
                 "--input-shape", f"{rec.name}:x=1x3x48x320",
                 "--input-shape", f"{cls.stem}:1x3x48x192", *FAST)
    assert "1x3x48x320" in result.stdout and "1x3x48x192" in result.stdout
    sweep = [r for r in cli.json("results", "list") if r["sweep_id"]][-2:]
    by_model = {r["model"]: r for r in sweep}
    assert by_model["text_rec.onnx"]["spec"]["input_shapes"] == {"x": [1, 3, 48, 320]}
    assert by_model["text_cls.onnx"]["spec"]["input_shapes"] == {"x": [1, 3, 48, 192]}
    assert by_model["text_rec.onnx"]["result"]["outputs"][0]["shape"] == [1, 37, 40]
    assert all(r["status"] == "ok" for r in sweep)
    listed = cli("results", "list", "--sweep", sweep[0]["sweep_id"]).stdout
    assert "1x3x48x320" in listed and "1x3x48x192" in listed
