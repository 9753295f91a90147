"""CLI commands over the zoo, the converters and training."""

import sys

import pytest

#: The listings count every zoo model once per process (ModelSpec.complexity is cached): on one
#: xdist worker the second listing reuses the first one's counts instead of counting again.
ZOO_COUNTS = pytest.mark.xdist_group("zoo-counts")


@ZOO_COUNTS
def test_models_list_shows_counts_and_reference_flops(cli):
    rows = {r["name"]: r for r in cli.json("models", "list", "--paper", "aiot")}
    assert rows["tiny_cnn"]["params"] == 54_778 and rows["tiny_cnn"]["input"]["shape"] == [1, 28, 28]
    assert all(r["paper"] == "aiot" for r in rows.values())


@ZOO_COUNTS
def test_models_list_works_without_an_optional_model_package(cli, monkeypatch, tmp_path):
    from aiot.models import get_model_spec, model_facts

    monkeypatch.setitem(sys.modules, "efficientnet_lite_pytorch", None)  # import fails
    monkeypatch.setattr(model_facts, "_cache_file", lambda: tmp_path / "counts.json")  # none cached
    monkeypatch.delitem(get_model_spec("efficientnet_lite0")._cache, "complexity", raising=False)
    rows = {r["name"]: r for r in cli.json("models", "list", "--paper", "aiot")}
    assert rows["efficientnet_lite0"]["params"] is None and rows["tiny_cnn"]["params"] == 54_778
    assert "efficientnet_lite0" in cli("models", "list", "--paper", "aiot").stdout


@pytest.mark.slow
@ZOO_COUNTS
def test_models_list_table_has_every_model(cli):
    out = cli("models", "list").stdout
    for name in ("resnet50", "inception_v3", "densenet121", "squeezenet", "mobilenet_v2", "mnasnet",
                 "resnet18", "resnet34", "vgg_small", "tiny_cnn", "resnet18_mnist", "mobilenet_v2_cifar"):
        assert name in out
    assert "3800" in out and "paper MACs" in out


def test_models_info_and_suggestion(cli):
    info = cli.json("models", "info", "mobilenetv2")
    assert info["name"] == "mobilenet_v2" and info["reference_flops_m"] == 300
    assert info["input"]["mean"] and info["input"]["channel_order"] == "RGB"
    err = cli("models", "info", "resnet19", code=2).stderr
    assert "unknown model 'resnet19'" in err and "resnet18" in err


def test_convert_list_json(cli):
    rows = {r["name"]: r for r in cli.json("convert", "--list")}
    assert rows["onnx"]["available"] and rows["tflite"]["available"]


def test_convert_unknown_format_suggests(cli):
    err = cli("convert", "tiny_cnn", "--format", "tflit", code=2).stderr
    assert "unknown format 'tflit'" in err and "tflite" in err and "Traceback" not in err


def test_convert_bad_option(cli):
    err = cli("convert", "tiny_cnn", "--format", "onnx", "--opt", "nokey", code=2).stderr
    assert "is not KEY=VALUE" in err


def test_convert_json_reports_parity(cli, tmp_path):
    report = cli.json("convert", "tiny_cnn", "--format", "onnx", "--out", str(tmp_path))
    assert report["parity"]["ok"] and report["artifact"].startswith(str(tmp_path))


def test_missing_weights_file_is_a_clear_error(cli, tmp_path):
    err = cli("convert", "tiny_cnn", "--format", "onnx", "--weights", str(tmp_path / "nope.pt"), code=1).stderr
    assert "nope.pt" in err and "Traceback" not in err


def test_missing_extra_names_the_pip_command(cli, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "litert_torch" else real(name, *a))
    err = cli("convert", "tiny_cnn", "--format", "tflite", code=1).stderr
    assert "pip install 'aiot[tflite]'" in err


def test_train_on_digits_stores_a_record(cli):
    pytest.importorskip("sklearn")
    record = cli.json("train", "tiny_cnn", "--dataset", "digits", "--epochs", "1")
    assert record["kind"] == "train" and record["status"] == "ok" and record["accuracy"] > 0.5
    again = cli.json("train", "tiny_cnn", "--dataset", "digits", "--epochs", "1")
    assert again["result"]["cached"] and again["accuracy"] == record["accuracy"]
    assert len(cli.json("results", "list", "--kind", "train")) == 2


def test_train_unknown_dataset(cli):
    assert "unknown dataset 'mnistt'" in cli("train", "tiny_cnn", "--dataset", "mnistt", code=2).stderr


def test_paths_with_brackets_are_printed_verbatim(cli, tmp_path):
    out_dir = tmp_path / "run [red]x[/]"
    out = cli("convert", "tiny_cnn", "--format", "onnx", "--out", str(out_dir)).stdout
    assert "run [red]x[/]" in out
