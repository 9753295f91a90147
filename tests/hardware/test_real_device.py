"""One real phone or board end to end: probe, push, a small sweep (a phone after aiot devices setup),
doctor, pull."""

import pytest

pytestmark = pytest.mark.device

FAST = ["--warmup-runs", "2", "--warmup-min-s", "0", "--min-runs", "10", "--min-s", "0"]


def test_probe_names_the_hardware(cli, real_device):
    info = cli.json("devices", "info", real_device.name)
    assert info["abi"] and info["cores"] >= 1 and info["os"]


def test_second_push_sends_nothing(cli, real_device):
    args = ["push", "--device", real_device.name, "--model", "tiny_cnn", "--format", "tflite"]
    cli.json(*args)
    assert cli.json(*args)["sent"] is False


def test_phone_gets_aiots_runtime_and_is_measured(cli, real_device):
    if real_device.transport != "adb":
        pytest.skip("a board runs the agent on its own Python (see the next test)")
    info = cli.json("devices", "info", real_device.name)
    assert info["soc"] and info["android_version"], info  # soc_name where aiot's table knows it
    first = cli.json("devices", "setup", real_device.name)
    assert first["runtime"] == "aiot-aarch64-glibc" and first["platform"].startswith("aarch64")
    assert cli.json("devices", "setup", real_device.name)["pushed_bytes"] == 0
    records = cli.json("sweep", "--device", real_device.name, "--model", "tiny_cnn", "--format", "tflite,onnx",
                       "--threads", "1,2", *FAST)
    assert [r["status"] for r in records] == ["ok"] * 4, [r["reason"] for r in records]
    device = records[0]["provenance"]["device"]
    assert device["agent"]["runtime"].startswith("aiot-aarch64-glibc:") and device["agent"]["machine"] == "aarch64"


def test_sweep_on_a_python_device(cli, real_device):
    if real_device.transport == "adb":
        pytest.skip("a phone is measured through aiot's runtime (the test above)")
    records = cli.json("sweep", "--device", real_device.name, "--model", "tiny_cnn", "--format", "tflite,onnx",
                       "--threads", "1,2", *FAST)
    assert [r["status"] for r in records] == ["ok"] * 4
    assert all(r["provenance"]["device"]["name"] == real_device.name for r in records)


def test_doctor_passes(cli, real_device):
    if real_device.transport == "adb":  # each test has its own inventory: set up (pushes nothing) again
        cli.json("devices", "setup", real_device.name)
    report = cli.json("devices", "doctor", real_device.name)
    assert report["ok"], [c for c in report["checks"] if c["status"] == "fail"]


def test_pull_brings_back_outputs_inside_the_folder(cli, real_device, tmp_path):
    pulled = cli.json("pull", "--device", real_device.name, "--out", str(tmp_path))
    assert all(p["refused"] is None and p["local"].startswith(str(tmp_path.resolve())) for p in pulled)


def test_phone_via_app_and_shell(cli, real_device, app_env):
    """The aiot app on a real phone: install (the APK with the runtime's loader, the tree copied
    into the app's files), a sweep through the app and the shell, the delta.

    Not verified on hardware in this project (no phone in CI): where a phone still stops the
    app's runtime (the zygote's seccomp filter meeting a glibc system call, a vendor policy),
    the app runs fail with the reason in one line, and the test is an expected failure that
    quotes it."""
    if real_device.transport != "adb":
        pytest.skip("the app path is for Android phones")
    cli.json("devices", "setup", real_device.name)
    installed = cli.json("app", "install", real_device.name)
    assert installed["pm"].startswith("Success") and installed["runtime_tree"]
    from typer.testing import CliRunner

    from aiot.host.cli.app import app

    # Exit 1 when the app runs fail: the records say why, checked below.
    done = CliRunner().invoke(app, ["sweep", "--device", real_device.name, "--model", "tiny_cnn",
                                    "--format", "tflite", "--threads", "1,2", "--via", "app,shell",
                                    *FAST, "--json"])
    records = cli.json("results", "list")
    shell = [r for r in records if r["spec"].get("via", "shell") == "shell"]
    app_runs = [r for r in records if r["spec"].get("via") == "app"]
    assert [r["status"] for r in shell] == ["ok"] * 2, [r["reason"] for r in shell]
    assert len(app_runs) == 2
    failed = [r for r in app_runs if r["status"] != "ok"]
    if failed:
        assert all("\n" not in (r["reason"] or "") for r in failed), [r["reason"] for r in failed]
        pytest.xfail(f"this phone stops the app's runtime: {failed[0]['reason']}")
    assert done.exit_code == 0
    for r in app_runs:
        app_facts = r["provenance"]["app"]
        assert app_facts["emulated"] is False and app_facts["cpuset"], app_facts
        assert app_facts["runtime_start"]["loader"] == f"native_lib_dir/libaiot_ld_{installed['runtime_tree']}.so"
    delta = cli.json("results", "compare", records[0]["sweep_id"], "--by", "via")
    assert len([row for row in delta["rows"] if row["a_id"] and row["b_id"]]) == 2
