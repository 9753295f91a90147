"""``aiot robust sysnoise`` end to end on ``local``: tiny_cnn (seeded random init), a few images."""


import pytest

from aiot.models.datasets.fashion_mnist import DEFAULT_DIR

needs_fmnist = pytest.mark.skipif(not (DEFAULT_DIR / "t10k-images-idx3-ubyte.gz").is_file(),
                                  reason="dataset-fashion-mnist is not installed")
SMALL = ("robust", "sysnoise", "--model", "tiny_cnn", "--limit", "10")



def _rows(data: dict, table: str) -> dict:
    found = next(t for t in data["tables"] if t["name"] == table)
    return {row[0]: dict(zip(found["columns"], row, strict=True)) for row in found["rows"]}


@needs_fmnist
def test_colour_and_variants_store_a_record(cli):
    data = cli.json(*SMALL, "--types", "variants,colour")
    record = cli.record(data["record"])
    assert (record.kind, record.status, record.device, record.format) == (
        "robust-sysnoise", "ok", "local", "pytorch")
    assert record.result["summary"] == data["summary"] and record.accuracy == data["clean_accuracy"]
    assert record.spec["types"] == ["colour", "variants"] and record.spec["limit"] == 10
    colour = _rows(data, "colour")
    assert colour["rgb"]["status"] == "reference" and colour["rgb"]["accuracy"] == data["clean_accuracy"]
    assert colour["nv12-opencv"]["max |Δ| px"] <= 2  # gray pixels survive NV12 within a level or two
    variants = _rows(data, "variants")
    assert variants["maxpool-ceil"]["status"].startswith("not applicable")
    assert "divides evenly" in variants["maxpool-ceil"]["status"]
    assert data["data"]["n"] == 10 and data["data"]["jpeg"]["quality"] == 90
    assert any("re-encoded as grayscale JPEG" in note for note in data["notes"])


@needs_fmnist
def test_human_output_has_tables_summary_and_notes(cli):
    out = cli(*SMALL, "--types", "colour").stdout
    assert "Colour space round trip" in out and "nv12-swscale" in out and "flip rate" in out
    assert "Summary" in out and "colour.flip_max" in out and "record:" in out
    assert "Traceback" not in out


def test_unlabelled_photos_give_agreement_only(cli):
    pytest.importorskip("skimage")
    data = cli.json("robust", "sysnoise", "--model", "tiny_cnn", "--dataset", "photos", "--limit", "2",
                    "--types", "colour")
    assert data["clean_accuracy"] is None and data["data"]["labelled"] is False
    assert _rows(data, "colour")["nv12-opencv"]["accuracy"] is None
    assert 0.0 <= data["summary"]["colour.flip_max"] <= 1.0 and "colour.dacc_max" not in data["summary"]


def test_deployed_types_without_a_format_are_a_one_line_error(cli):
    result = cli(*SMALL, "--types", "decoder,platform", code=2)
    assert result.stderr.splitlines()[0] == "error: --types platform needs a deployed artifact"
    assert "--format" in result.stderr and result.stdout == "" and "Traceback" not in result.output


def test_bad_type_and_device_are_one_line_errors(cli):
    err = cli(*SMALL, "--types", "decodr", code=2).stderr
    assert "unknown sysnoise type 'decodr'" in err and "decoder" in err
    assert "--device got an empty name" in cli(*SMALL, "--device", "local,", code=2).stderr


@pytest.mark.slow
@needs_fmnist
def test_platform_runs_the_ort_artifact_on_local(cli):
    pytest.importorskip("onnxruntime")
    data = cli.json(*SMALL, "--types", "decoder,platform", "--format", "ort")
    record = cli.record(data["record"])
    assert record.format == "ort" and len(record.artifact_sha256) == 64
    local = _rows(data, "platform")["local"]
    assert local["status"] == "ok" and local["flip rate"] == 0.0 and local["max |Δ logit|"] < 1e-4
    assert local["accuracy"] == data["clean_accuracy"]
    assert any(f"sha256 {record.artifact_sha256[:12]}" in note for note in data["notes"])
    assert record.provenance["devices"]["local"]["name"] == "local"
    # with --format the deployed artifact scored the decoder type through its agent session
    assert any(note.startswith("pre-processing types scored by the deployed artifact (ort@local")
               for note in data["notes"])
    assert record.provenance["serving"]


@pytest.mark.slow
@needs_fmnist
def test_precision_fp16_and_int8_against_fp32_tflite(cli):
    pytest.importorskip("ai_edge_litert")
    data = cli.json(*SMALL, "--types", "precision", "--format", "tflite")
    rows = _rows(data, "precision")
    assert rows["fp32"]["status"] == "reference"
    assert rows["fp16"]["status"] == "ok" and rows["fp16"]["max |Δ logit|"] < 1e-2
    assert rows["int8"]["status"] == "ok" and rows["int8"]["max |Δ logit|"] > rows["fp16"]["max |Δ logit|"]
    assert data["summary"]["precision.options"] == 2
