"""What a user meets in the first minutes: the version, shell completion, one name per model,
formats they may pick (never aiot's own test format), one size unit, help texts that say
what a command takes, where a default device came from, a heartbeat in piped logs, and a
warning before timing on an emulated device."""

from __future__ import annotations

import re

from aiot import __version__
from aiot.host.devices import inventory
from aiot.host.devices.inventory import DeviceEntry
from tests.helpers import fast

FAST = fast(warmup_runs=1)


def test_version_and_the_help_header(cli):
    assert cli("--version").stdout == f"aiot {__version__}\n"
    assert f"aiot {__version__}: measure how neural networks" in cli("--help").stdout


def test_shell_completion_is_offered_and_completes(cli, monkeypatch):
    # Typer guesses the shell from the parent processes; under make (or CI) that is sh, which it
    # cannot complete for. With detection off, --show-completion takes the shell by name.
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    help_text = cli("--help").stdout
    assert "--install-completion" in help_text and "--show-completion" in help_text
    script = cli("--show-completion", "bash").stdout
    assert "_aiot_completion" in script and "_AIOT_COMPLETE=complete_bash" in script
    # what the script asks for when the user presses tab after "aiot swe"
    done = cli.runner.invoke(cli_app(), [], prog_name="aiot",
                             env={"_AIOT_COMPLETE": "complete_bash", "COMP_WORDS": "aiot swe",
                                  "COMP_CWORD": "1"})
    assert done.stdout.split() == ["sweep"], done.output
    done = cli.runner.invoke(cli_app(), [], prog_name="aiot",
                             env={"_AIOT_COMPLETE": "complete_bash",
                                  "COMP_WORDS": "aiot run --input-sh", "COMP_CWORD": "2"})
    assert done.stdout.split() == ["--input-shape"], done.output


def cli_app():
    from aiot.host.cli.app import app

    return app


def test_a_binarized_model_has_one_name_everywhere():
    from aiot.host.engine.runs import RunRequest
    from aiot.host.store.compare import Row

    request = RunRequest("local", "resnet18", "lce", 2, binarize="bnn")
    assert request.label() == "resnet18_bnn · lce · 2t @ local"
    row = Row(key={"model": "resnet18", "binarize": "bnn", "format": "lce", "threads": 2,
                   "device": "local"}, status="ok")
    assert row.label().startswith("resnet18_bnn · lce")


def test_the_null_test_format_is_hidden_but_usable_by_name(cli):
    listed = {row["name"] for row in cli.json("convert", "--list")}
    assert "null" not in listed and {"tflite", "onnx"} <= listed
    from aiot.converters.base import all_formats

    formats, left_out = all_formats()
    assert "null" not in formats and not any(x.startswith("null") for x in left_out)
    refused = cli("convert", "tiny_cnn", "--format", "nul", code=2)
    assert "null" not in refused.stderr  # no hint names it
    (record,) = cli.json("run", "-m", "tiny_cnn", "-f", "null", *FAST)
    assert record["status"] == "ok" and record["format"] == "null"


def test_format_all_in_a_sweep_is_every_format_it_can_be_timed_in(cli, two_input_onnx):
    from aiot.converters import get_converter
    from aiot.converters.base import all_formats
    from aiot.host.engine.preflight import resolve_targets

    formats, left_out = all_formats()
    assert formats and all(get_converter(f).backend for f in formats)
    assert any("emit-only" in x for x in left_out) or all(
        get_converter(f).backend for f in ("dabnn", "caffe2"))
    ((ref, chosen),) = resolve_targets(["tiny_cnn"], ["all"], None)
    assert chosen == [f for f in formats if f != "lce"]  # LCE runs binarized models only
    ((ref, chosen),) = resolve_targets(["tiny_bnn"], ["all"], None)
    assert "lce" in chosen or "lce" not in formats
    ((ref, chosen),) = resolve_targets(["resnet18_xnor"], ["all"], None)
    assert "lce" not in chosen  # BiBench Table 4: XNOR's scaling factors do not deploy on LCE
    ((ref, chosen),) = resolve_targets(["tiny_cnn"], ["ALL"], None, native="benchmark_model")
    assert set(chosen) <= {"tflite", "lce"}
    # an artifact runs in its own format, whatever "all" holds
    result = cli("sweep", "-m", str(two_input_onnx), "-f", "all", "--threads", "1", *FAST)
    assert "--format all: " in result.stderr and "two_inputs.onnx" in result.stdout


def test_one_size_unit_and_an_article_that_fits(cli, two_input_onnx):
    converted = cli("convert", "tiny_cnn", "--format", "onnx").stdout
    assert re.search(r"\(\d+\.\d KiB", converted), converted
    assert " MB" not in converted
    refused = cli("run", "-m", str(two_input_onnx), "-f", "tflite", code=2)
    assert "two_inputs.onnx is an onnx artifact, not tflite" in refused.stderr
    (record,) = cli.json("run", "-m", str(two_input_onnx), *FAST)
    shown = " ".join(cli("results", "show", record["id"][:8]).stdout.split())
    assert re.search(r"size │ \d+ B", shown) or re.search(r"size │ [\d.]+ KiB", shown), shown
    # a user's file has no PyTorch original: its parity is not checked, not failed
    assert "parity vs PyTorch │ not checked: a user's artifact" in shown, shown


def test_help_says_what_commands_take(cli):
    text = cli("convert", "--help").stdout
    assert "file.py:factory" in text and ".pt2" in text and "aiot run --model FILE" in text
    run_help = " ".join(cli("run", "--help").stdout.split())
    assert "the device's [binaries] entry in the inventory" in run_help.replace("│ ", "")
    assert "$ANDROID_SERIAL" in run_help


def test_android_serial_is_named_when_it_picks_the_device(cli, monkeypatch):
    monkeypatch.setenv("ANDROID_SERIAL", "R58M12ABCDE")
    refused = cli("run", "-m", "tiny_cnn", code=2)
    assert "device R58M12ABCDE: from $ANDROID_SERIAL=R58M12ABCDE" in refused.stderr
    inventory.add(DeviceEntry(name="pixel", transport="adb", workdir="/data/local/tmp/aiot",
                              serial="R58M12ABCDE"))
    said = cli("run", "-m", "tiny_cnn", code=1)
    assert "device pixel: from $ANDROID_SERIAL=R58M12ABCDE" in said.stderr


def test_a_long_run_beats_in_a_piped_log(cli, monkeypatch):
    monkeypatch.setenv("AIOT_HEARTBEAT_S", "0.3")
    result = cli("run", "-m", "tiny_cnn", "-f", "null", "--opt", "sleep_ms=100", "--min-runs",
                 "12", "--min-s", "1.2", "--warmup-runs", "0", "--warmup-min-s", "0",
                 "--cooldown-max-s", "0")
    beats = [line for line in result.stderr.splitlines() if line.startswith("  … tiny_cnn")]
    assert beats, result.stderr
    assert re.search(r"… tiny_cnn · null\[sleep_ms=100\] · 1t @ local: \w.*, \d+s so far", beats[-1])


def test_an_emulated_device_is_named_before_anything_runs(cli):
    cli.json("emulator", "start", "ssh", "--name", "pi")
    try:
        result = cli("run", "-m", "tiny_cnn", "-d", "pi", *FAST)
    finally:
        cli("emulator", "stop", "pi")
    lines = result.stderr.splitlines()
    warning = next(i for i, line in enumerate(lines) if line.startswith("warning: pi:"))
    assert warning < next(i for i, line in enumerate(lines) if "tiny_cnn · tflite" in line)
    assert "emulated on this host; their timings test the pipeline" in lines[warning]
    assert "not a phone's or a board's" in lines[warning]
