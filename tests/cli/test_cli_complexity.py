"""``aiot complexity``: BiBench's r_c, r_s and OM_comp from the command line."""

import math


def test_resnet18_bnn_table_and_om_comp(cli):
    result = cli("complexity", "resnet18", "--binarize", "bnn")
    out = result.stdout
    assert "r_c" in out and "r_s" in out and "storage (MiB)" in out
    assert "fp32" in out and "44.59" in out  # 11.69 M floats: 46.76 MB, in MiB as everywhere
    assert "13.27" in out and "12.51" in out  # BiBench Table 3: 13.27, 12.60
    assert "OM_comp bnn: 12.90" in out and "over resnet18" in out
    assert "xnor" not in out and "Traceback" not in result.output


def test_json_rows_for_a_comma_list(cli):
    data = cli.json("complexity", "tiny_vgg", "--binarize", "bnn, xnor++,bnn")
    assert [r["algorithm"] for r in data["rows"]] == ["bnn", "xnorpp"]  # canonical, deduplicated
    model = data["models"][0]
    assert model["name"] == "tiny_vgg" and model["params"] == data["rows"][0]["fp_params"]
    bnn = data["rows"][0]
    assert bnn["r_c"] == bnn["fp_params"] / (bnn["binary_params"] / 32 + bnn["binarized_fp_params"])
    assert set(data["om_comp"]) == {"bnn", "xnorpp"}
    assert data["om_comp"]["bnn"] > data["om_comp"]["xnorpp"]


def test_default_is_all_eight_algorithms(cli):
    data = cli.json("complexity", "tiny_cnn")
    assert [r["algorithm"] for r in data["rows"]] == [
        "bnn", "xnor", "dorefa", "bireal", "xnorpp", "reactnet", "recu", "fda"]
    assert cli.json("complexity", "tiny_cnn", "-b", "all")["rows"] == data["rows"]


def test_om_comp_averages_over_models(cli):
    data = cli.json("complexity", "tiny_vgg", "tiny-cnn", "tiny_vgg", "--binarize", "bnn")
    rows = data["rows"]
    assert [r["model"] for r in rows] == ["tiny_vgg", "tiny_cnn"]  # aliases and repeats merged
    mean_c = sum(r["r_c"] for r in rows) / 2
    mean_s = sum(r["r_s"] for r in rows) / 2
    assert math.isclose(data["om_comp"]["bnn"], math.sqrt((mean_c**2 + mean_s**2) / 2))
    out = cli("complexity", "tiny_vgg", "tiny_cnn", "-b", "bnn").stdout
    assert f"OM_comp bnn: {data['om_comp']['bnn']:.2f}" in out and "over tiny_vgg, tiny_cnn" in out


def test_unknown_algorithm_is_one_line_error(cli):
    result = cli("complexity", "tiny_cnn", "--binarize", "bnn,xnorr", code=2)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: unknown binarization algorithm 'xnorr'"]
    assert "xnor" in result.stderr and "Traceback" not in result.output and result.stdout == ""


def test_unknown_model_and_empty_list_are_errors(cli):
    err = cli("complexity", "resnet19", code=2).stderr
    assert "unknown model 'resnet19'" in err and "resnet18" in err and "Traceback" not in err
    err = cli("complexity", "tiny_cnn", "-b", ",", code=2).stderr
    assert "--binarize got no algorithm" in err
