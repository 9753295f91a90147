"""CLI behaviour that needs no model conversion: help, devices, errors, empty results."""

import pytest

COMMANDS = ["convert", "push", "run", "sweep", "train", "demo", "devices", "models", "results", "paper",
            "complexity", "score"]


def test_help_lists_every_command(cli):
    out = cli("--help").stdout
    for command in COMMANDS:
        assert command in out


@pytest.mark.parametrize("group", ["devices", "models", "results", "score"])
def test_groups_without_arguments_show_help(cli, group):
    result = cli(group, code=2)
    assert "Usage" in result.output


def test_devices_list_json_has_local(cli):
    rows = cli.json("devices", "list")
    assert rows[0]["name"] == "local" and rows[0]["state"] == "online"


def test_devices_info_local_probes_and_says_hello(cli):
    info = cli.json("devices", "info", "local")
    assert info["name"] == "local" and info["cores"] >= 1 and info["abi"]
    assert set(info["agent"]["runtimes"]) >= {"onnxruntime", "litert"}


def test_devices_info_table_for_people(cli):
    out = cli("devices", "info").stdout
    assert "clusters" in out and "runtimes" in out


def test_unknown_device_is_one_line_error(cli):
    result = cli("devices", "info", "pixle", code=2)
    assert "error: unknown device 'pixle'" in result.stderr
    assert "Traceback" not in result.output and result.stdout == ""


def test_aiot_device_env_is_used(cli, monkeypatch):
    monkeypatch.setenv("AIOT_DEVICE", "nosuch")
    result = cli("devices", "info", code=2)
    assert "unknown device 'nosuch'" in result.stderr


def test_results_on_an_empty_store(cli):
    assert cli.json("results", "list") == []
    assert cli("results", "export", "--format", "csv").stdout.startswith("id,sweep_id,kind,status")


def test_results_export_rejects_unknown_format(cli):
    result = cli("results", "export", "--format", "xml", code=2)
    assert "unknown export format 'xml'" in result.stderr


def test_results_show_unknown_id(cli):
    assert "no record 'deadbeef'" in cli("results", "show", "deadbeef", code=1).stderr


def test_results_dir_option_wins_over_env(cli, tmp_path):
    target = tmp_path / "elsewhere"
    cli("--results-dir", str(target), "results", "list")
    assert (target / "aiot.sqlite").exists()


@pytest.mark.parametrize("threads", ["1,x", "0", ","])
def test_bad_thread_lists(cli, threads):
    result = cli("sweep", "--model", "tiny_cnn", "--format", "onnx", "--threads", threads, code=2)
    assert "error:" in result.stderr and "Traceback" not in result.output


def test_convert_needs_a_model_and_defaults_the_format(cli):
    assert "convert needs a MODEL" in cli("convert", code=2).stderr
    result = cli("convert", "tiny_cnn")
    assert "format: tflite (the default for tiny_cnn" in result.stderr
    assert "tiny_cnn.tflite" in result.stdout
