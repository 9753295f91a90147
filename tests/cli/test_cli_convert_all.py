"""``aiot convert MODEL --format all``: one row per format, failures as rows."""


import pytest

from aiot.converters import CONVERTERS

pytest.importorskip("onnxruntime")
pytest.importorskip("litert_torch")


@pytest.mark.slow
def test_every_format_gets_a_row_and_float_models_are_unsupported_by_binary_runtimes(cli, tmp_path, monkeypatch):
    # Toolchains absent here: their formats must be "unavailable" rows that say how to fix it.
    monkeypatch.setenv("AIOT_TOOLCHAINS_DIR", str(tmp_path / "no-toolchains"))
    rows = {r["format"]: r for r in cli.json("convert", "tiny_cnn", "--format", "all")}
    assert set(rows) == {conv.name for conv in CONVERTERS} - {"null"}  # null: aiot's test format
    for fmt in ("onnx", "ort", "ptl", "tflite", "caffe2"):
        assert rows[fmt]["status"] == "ok", rows[fmt]
        assert rows[fmt]["max_abs"] < 1e-4 and rows[fmt]["dataset_top1_agreement"] == 1.0
        assert 0 <= rows[fmt]["max_rel"] < 1e-3
        assert rows[fmt]["size_bytes"] > 100_000 and rows[fmt]["ops"] > 0
    assert rows["dabnn"]["status"] == "unsupported" and "binary" in rows["dabnn"]["reason"]
    for fmt in ("lce", "executorch"):
        assert rows[fmt]["status"] == "unavailable"
        assert rows[fmt]["reason"].endswith(f"run: aiot toolchains install {fmt}")


def test_bare_options_are_refused_with_format_all(cli):
    res = cli("convert", "tiny_cnn", "--format", "all", "--opt", "quant=int8", code=2)
    assert "prefix options: --opt tflite.quant=int8" in res.stderr


def test_unknown_model_fails_before_any_row(cli):
    res = cli("convert", "tiny_cnnn", "--format", "all", code=2)
    assert "unknown model" in res.stderr and "tiny_cnn" in res.stderr
