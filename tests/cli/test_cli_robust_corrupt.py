"""``aiot robust corrupt`` end to end on ``local``: tiny_cnn (seeded random init), a few images."""

import math

import pytest

pytest.importorskip("imagecorruptions")

SMALL = ("robust", "corrupt", "--model", "tiny_cnn", "--corruptions", "fog,gaussian_noise",
         "--severities", "3,1", "--limit", "10", "--frames", "3")



def test_two_corruptions_two_severities_store_a_record(cli):
    data = cli.json(*SMALL)
    record = cli.record(data["record"])
    assert (record.kind, record.status, record.device, record.format) == (
        "robust-corrupt", "ok", "local", "pytorch")
    assert record.result["summary"] == data["summary"] and record.accuracy == data["clean_accuracy"]
    assert record.spec["corruptions"] == ["gaussian_noise", "fog"]  # ImageNet-C order
    assert record.spec["severities"] == [1, 3]
    table = data["tables"][0]
    assert table["columns"] == ["corruption", "s1", "s3", "NR", "G", "NCI"]
    assert [row[0] for row in table["rows"]] == ["gaussian_noise", "fog", "mean"]
    clean = data["clean_accuracy"]
    for name, s1, s3, nr, gap, _ in table["rows"][:2]:
        assert nr == pytest.approx((s1 + s3) / 2) and gap == pytest.approx(clean - nr)
        assert data["curves"][0]["series"][name] == [[0, clean], [1, s1], [3, s3]]
    assert data["summary"]["mNR"] == pytest.approx(table["rows"][2][3])
    assert 0.0 <= data["summary"]["mFP"] <= 1.0 and data["data"]["n"] == 10
    assert data["libraries"]["imagecorruptions-imaug"]


def test_human_output_has_the_table_and_the_summary(cli):
    out = cli(*SMALL, "--no-sequences").stdout
    assert "gaussian_noise" in out and "s3" in out and "mNR" in out and "mean G" in out
    assert "mFP" not in out and "ImageNet-C params at 28 px" in out and "record:" in out


def test_same_seed_same_numbers(cli):
    first = cli.json(*SMALL, "--no-sequences")
    again = cli.json(*SMALL, "--no-sequences")
    assert first["tables"] == again["tables"]


def test_unknown_corruption_is_one_line_with_close_names(cli):
    result = cli("robust", "corrupt", "--model", "tiny_cnn", "--corruptions", "fogg", code=2)
    assert "unknown corruption 'fogg'" in result.stderr and "fog" in result.stderr
    assert "Traceback" not in result.output and result.stdout == ""


@pytest.mark.parametrize("severities", ["0,1", "6", "1,two"])
def test_severity_outside_one_to_five_is_a_usage_error(cli, severities):
    result = cli("robust", "corrupt", "--model", "tiny_cnn", "--severities", severities, code=2)
    assert "1..5" in result.stderr and "Traceback" not in result.output


def test_frames_below_two_and_stray_compare_weights_are_usage_errors(cli, tmp_path):
    base = ("robust", "corrupt", "--model", "tiny_cnn")
    assert "at least 2" in cli(*base, "--frames", "1", code=2).stderr
    err = cli(*base, "--compare-weights", str(tmp_path / "w.pt"), code=2).stderr
    assert "needs --compare-binarized" in err


def test_deployed_ort_on_local_agrees_with_pytorch(cli):
    data = cli.json(*SMALL, "--format", "ort", "--device", "local")
    record = cli.record(data["record"])
    assert record.format == "ort" and record.artifact_sha256
    summary = data["summary"]
    assert summary["agreement"] == 1.0
    assert summary["clean_accuracy"] == summary["reference_clean_accuracy"]
    assert summary["mNR"] == summary["reference_mNR"] and summary["mFP"] == summary["reference_mFP"]
    agreement = next(t for t in data["tables"] if t["name"] == "agreement")
    assert {v for row in agreement["rows"] for v in row[1:]} == {1.0}


def test_compare_binarized_gives_om_robust_from_the_gap_table(cli):
    data = cli.json(*SMALL, "--no-sequences", "--compare-binarized", "bnn")
    gaps = next(t for t in data["tables"] if t["name"] == "om_robust")["rows"]
    ratios = [row[3] for row in gaps if row[3] is not None]
    om = data["summary"]["om_robust"]
    if ratios:
        assert om == pytest.approx(math.sqrt(sum(r * r for r in ratios) / len(ratios)))
    else:
        assert om is None
    assert "compare_clean_accuracy" in data["summary"]


@pytest.mark.slow
def test_unlabelled_photos_score_agreement_with_the_clean_prediction(cli):
    pytest.importorskip("skimage")
    data = cli.json("robust", "corrupt", "--model", "efficientnet_lite0", "--dataset", "photos",
                    "--limit", "3", "--corruptions", "brightness,contrast", "--severities", "1,5",
                    "--no-sequences")
    record = cli.record(data["record"])
    assert record.kind == "robust-corrupt" and record.accuracy is None
    summary = record.result["summary"]
    assert data["clean_accuracy"] is None and summary["clean_agreement"] == 1.0  # by definition
    assert "mNR" not in summary and "mFP" not in summary
    table = data["tables"][0]
    assert [row[0] for row in table["rows"]] == ["brightness", "contrast", "mean"]
    assert summary["mNR_agreement"] == pytest.approx(table["rows"][2][3])
    assert summary["mean_G_agreement"] == pytest.approx(1.0 - summary["mNR_agreement"])
    assert data["data"]["n"] == 3 and data["data"]["corrupted_shape"] == [224, 224, 3]
    notes = " ".join(data["notes"])
    assert "ImageNet-C's own parameters at their native 224 px" in notes
    assert "brought to 224x224 uint8 RGB" in notes and "shorter side to 256 px" in notes
    assert "top-1 agreement with the clean prediction" in notes


def test_compare_binarized_on_photos_is_a_usage_error(cli):
    result = cli("robust", "corrupt", "--model", "tiny_cnn", "--dataset", "photos",
                 "--compare-binarized", "bnn", code=2)
    assert "needs labelled images" in result.stderr and "Traceback" not in result.output
