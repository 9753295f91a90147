"""One real phone or board end to end: probe, doctor, push, (Python devices) a small sweep, pull."""

import pytest

pytestmark = pytest.mark.device

FAST = ["--warmup-runs", "2", "--warmup-min-s", "0", "--min-runs", "10", "--min-s", "0"]


def test_probe_names_the_hardware(cli, real_device):
    info = cli.json("devices", "info", real_device.name)
    assert info["abi"] and info["cores"] >= 1 and info["os"]


def test_doctor_passes(cli, real_device):
    report = cli.json("devices", "doctor", real_device.name)
    assert report["ok"], [c for c in report["checks"] if c["status"] == "fail"]


def test_second_push_sends_nothing(cli, real_device):
    args = ["push", "--device", real_device.name, "--model", "tiny_cnn", "--format", "tflite"]
    cli.json(*args)
    assert cli.json(*args)["sent"] is False


def test_sweep_on_a_python_device(cli, real_device):
    if real_device.transport == "adb":
        pytest.skip("phones run native benchmark binaries (issue 4), not the Python agent")
    records = cli.json("sweep", "--device", real_device.name, "--model", "tiny_cnn", "--format", "tflite,onnx",
                       "--threads", "1,2", *FAST)
    assert [r["status"] for r in records] == ["ok"] * 4
    assert all(r["provenance"]["device"]["name"] == real_device.name for r in records)


def test_pull_brings_back_outputs_inside_the_folder(cli, real_device, tmp_path):
    pulled = cli.json("pull", "--device", real_device.name, "--out", str(tmp_path))
    assert all(p["refused"] is None and p["local"].startswith(str(tmp_path.resolve())) for p in pulled)
