"""The SysNoise suite on the host: pipeline identity, result shape, unlabelled photos, reasons."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from aiot.host.robust.data import EvalSet
from aiot.host.robust.predictor import TorchPredictor
from aiot.host.robust.sysnoise import camera, decoders, evaluate, model_side
from aiot.host.robust.sysnoise.context import SuiteContext
from aiot.host.robust.sysnoise.pipeline import Pipeline, Stages, model_batch
from aiot.host.robust.sysnoise.scoring import pixel_diff, score
from aiot.host.robust.target import Target, reference_model


def _labelled(n: int = 12) -> EvalSet:
    rng = np.random.default_rng(0)
    blocks = rng.integers(0, 256, (n, 7, 7), dtype=np.uint8).repeat(4, 1).repeat(4, 2)  # 28 px
    return EvalSet("synthetic", blocks, np.arange(n) % 10, np.arange(n))


def _photos() -> EvalSet:
    rng = np.random.default_rng(1)
    images = [rng.integers(0, 256, (h // 4, w // 4, 3), dtype=np.uint8).repeat(4, 0).repeat(4, 1)
              for h, w in ((48, 64), (64, 40), (36, 36))]
    return EvalSet("photos", images, None, np.arange(3))


def _rows(result: dict, table: str) -> dict:
    found = next(t for t in result["tables"] if t["name"] == table)
    return {row[0]: dict(zip(found["columns"], row, strict=True)) for row in found["rows"]}


def test_the_reference_pipeline_against_itself_is_zero_everywhere():
    spec, model = reference_model(Target("tiny_cnn"))
    images = _labelled(8)
    stages = Stages(camera.capture_jpegs(images.images, camera.Camera("down", 64)), True, (28, 28))
    reference = stages.images(Pipeline())
    same = stages.images(Pipeline().but(decoder="pillow", resizer="pil-bilinear", colour="rgb"))
    assert pixel_diff(reference, same).max_abs == 0
    predictor = TorchPredictor(model)
    ref_pred = predictor.predict(model_batch(reference, spec)).argmax(1)
    row = score("identity", ref_pred, predictor.predict(model_batch(same, spec)).argmax(1), images.labels)
    assert (row.flip, row.dacc) == (0.0, 0.0)


def test_labelled_result_has_the_stored_shape():
    result, provenance = evaluate(Target("tiny_cnn"), _labelled(), types=["decoder", "colour", "precision"])
    json.dumps(result, allow_nan=False)  # JSON-safe
    assert result["suite"] == "sysnoise" and result["curves"] == [] and provenance == {}
    assert [t["name"] for t in result["tables"]] == ["decoder", "decoder-selftest", "colour", "precision"]
    decoder = _rows(result, "decoder")
    assert decoder["pillow"]["status"] == "reference" and decoder["pillow"]["flip rate"] == 0.0
    assert decoder["opencv"]["status"] == "bit-identical to Pillow (not a finding)"
    assert decoder["opencv"]["dACC"] is None  # never a zero finding
    assert any(n.startswith("OpenCV imdecode") and "bit-identically" in n for n in result["notes"])
    clean = result["clean_accuracy"]
    for row in decoder.values():
        if row["status"] == "ok":
            assert row["dACC"] == pytest.approx(clean - row["accuracy"])
            assert row["max |Δ| px"] > 0
    precision = _rows(result, "precision")
    assert all(r["status"] == model_side.NEEDS_FORMAT for r in precision.values())
    assert "precision.dacc_mean" not in result["summary"]
    assert result["data"]["jpeg"]["cameras"] == {"down": 64, "up": 21}
    assert result["libraries"]["Pillow"] and "fashion" not in result["notes"][0]


def test_unlabelled_photos_of_different_sizes_give_agreement_only():
    result, _ = evaluate(Target("tiny_cnn"), _photos(), types=["decoder", "resize"])
    assert result["clean_accuracy"] is None
    assert result["data"]["jpeg"]["crop"] == 0.875 and result["data"]["image_shape"] is None
    resize_rows = next(t for t in result["tables"] if t["name"] == "resize")["rows"]
    # 28 / 0.875 = 32 px needed: every photo is larger (kept as is); the up camera is 3/4 of 32.
    assert {row[1] for row in resize_rows} == {"down source->28x28", "up 24 px->28x28"}
    assert all(row[3] is None and row[4] is None for row in resize_rows)  # accuracy, dACC
    summary = result["summary"]
    assert not any("dacc" in key or "robustness" in key for key in summary)
    assert 0.0 <= summary["resize.flip_max"] <= 1.0
    assert summary["resize.agreement_min"] == pytest.approx(1 - summary["resize.flip_max"])
    assert any("Unlabelled" in note for note in result["notes"])
    assert any(note.startswith("Reference top-1 probability") for note in result["notes"])


def test_a_decoder_that_fails_is_a_row_with_the_reason(monkeypatch):
    def broken(data, gray):
        raise ValueError("corrupt Huffman table")

    monkeypatch.setitem(decoders.DECODERS, "broken",
                        decoders.Decoder("broken", "Pillow", "a broken decoder", broken))
    result, _ = evaluate(Target("tiny_cnn"), _labelled(4), types=["decoder"])
    row = _rows(result, "decoder")["broken"]
    assert row["status"] == "failed: ValueError: corrupt Huffman table" and row["accuracy"] is None
    assert _rows(result, "decoder-selftest")["broken"]["status"].startswith("failed: ValueError")


def test_a_ceil_mode_variant_that_breaks_the_classifier_is_reported():
    from aiot.models import get_model_spec

    spec = get_model_spec("tiny_cnn")
    # 28 -> conv 28 -> pool(3, 2): 13 floor, 14 ceil; the linear layer expects 13 x 13.
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.MaxPool2d(3, 2),
                                torch.nn.Flatten(), torch.nn.Linear(2 * 13 * 13, 10)).eval()
    ctx = SuiteContext(Target("tiny_cnn"), spec, model, _labelled(4), TorchPredictor(model))
    report = model_side.variants_type(ctx)
    rows = {r.name: r for r in report.rows}
    assert rows["maxpool-ceil"].status.startswith("does not run:")
    assert rows["maxpool-ceil"].setting == "1: [13, 13] -> [14, 14]"
    assert rows["upsample-mode"].status.startswith("not applicable")
    assert report.summary == {"options": 0.0}


def test_platform_compares_each_device_with_pytorch(monkeypatch):
    from aiot.models import get_model_spec

    spec = get_model_spec("tiny_cnn")
    model = spec.build()
    images = _labelled(4)
    ctx = SuiteContext(Target("tiny_cnn", fmt="ort"), spec, model, images, TorchPredictor(model),
                       devices=["phone", "board"])
    reference = ctx.reference_scores

    def fake_deployed(ctx, target):
        scores = reference.copy()
        if target.device == "board":  # one image's top-1 moves to another class
            scores[0, (scores[0].argmax() + 1) % 10] = scores[0].max() + 1.0
        sha = "a" * 64 if target.device == "phone" else "b" * 64
        return scores, {"device": {"abi": "arm64-v8a"}, "artifact": {"sha256": sha}}

    monkeypatch.setattr(model_side, "_deployed_scores", fake_deployed)
    report = model_side.platform_type(ctx)
    rows = {r.name: r for r in report.rows}
    assert (rows["phone"].flip, rows["phone"].max_logit, rows["phone"].dacc) == (0.0, 0.0, 0.0)
    assert rows["board"].flip == 0.25 and rows["board"].max_logit > 1.0
    assert rows["board"].setting == "ort on arm64-v8a"
    assert report.notes == ["platform: the devices ran different artifacts: phone aaaaaaaaaaaa, board bbbbbbbbbbbb"]
    assert report.summary["flip_max"] == 0.25 and ctx.provenance["artifact"]["sha256"] == "a" * 64
