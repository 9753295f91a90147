"""Emulated arm64 devices: an aarch64 userland under qemu-user behind a real sshd and a real adb server.

The first test on a machine builds the cached userland (Debian arm64 python3.11 + aarch64
wheels, ~15 s and ~60 MB of downloads, kept in the suite's persistent cache); the others reuse it. Timings under emulation are meaningless, so these
tests check what emulation is for: the runtimes load and run there, and an artifact's outputs
on aarch64 match those on x86_64.
"""

import subprocess

import pytest

from aiot.host.devices import inventory
from aiot.host.emulator import arm64
from tests.helpers import fast

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(arm64.missing_tools()),
                       reason=f"needs Debian packages {arm64.missing_tools()} (scripts/bootstrap.sh installs them)"),
]

FAST = fast(warmup_runs=1, cooldown=False)


def _ok_records(cli, device):
    records = [r for r in cli.json("results", "list") if r["device"] == device]
    assert records and all(r["status"] == "ok" for r in records), [(r["status"], r["reason"]) for r in records]
    return records


def test_ssh_arm64_sweep_runs_on_aarch64_and_matches_x86(cli, session_cache):
    started = cli.json("emulator", "start", "ssh", "--arch", "arm64", "--name", "pi")
    assert started["arch"] == "arm64"
    try:
        # .ort is optimized on x86_64 at a portable level; it must load and agree on aarch64 too.
        cli("sweep", "-m", "tiny_cnn", "-f", "tflite,onnx,ort", "-d", "pi,local", "--threads", "1,2", *FAST)
        records = _ok_records(cli, "pi")
        assert {(r["format"], r["threads"]) for r in records} == {
            (fmt, threads) for fmt in ("tflite", "onnx", "ort") for threads in (1, 2)}
        device = records[0]["provenance"]["device"]
        # The runtimes ran as aarch64 code on this x86_64 kernel, and the record says so.
        assert device["agent"]["machine"] == "aarch64" and device["abi"] == "aarch64"
        assert device["kernel_abi"] == "x86_64"
        assert device["labels"]["emulated"] == "ssh" and device["labels"]["arch"] == "arm64"
        assert {r["provenance"]["runtime"]["backend"] for r in records} == {"litert", "onnxruntime"}
        drifts = cli.json("results", "outputs", "--reference", "local")
        on_pi = [d for d in drifts if d["device"] == "pi"]
        runs = [(r["device"], r["format"], r["threads"], r["status"], r["reason"])
                for r in cli.json("results", "list")]
        assert len(on_pi) == 6 and all(d["verdict"] == "match" for d in on_pi), (on_pi, runs)
        # The userland is cached whole: every entry a later start would trust is complete (the
        # cache outlives the session, so it may hold other keys' userlands, or one that another
        # xdist worker is building in a dot-folder under its lock).
        built = [p for p in (session_cache / "arm64-userland").iterdir() if not p.name.startswith(".")]
        key = arm64.userland_key(arm64.requirements())
        assert key in {p.name for p in built} and all((p / ".complete").exists() for p in built)
    finally:
        cli("emulator", "stop", "pi")


def test_adb_arm64_device_reports_arm64_abi_and_runs_both_runtimes(cli, tmp_path):
    cli.json("emulator", "start", "adb", "--arch", "arm64", "--name", "phone64")
    try:
        info = cli.json("devices", "info", "phone64")
        assert info["abi"] == "arm64-v8a"
        cli("sweep", "-m", "tiny_cnn", "-f", "tflite,onnx", "-d", "phone64", "--threads", "1", *FAST)
        records = _ok_records(cli, "phone64")
        assert {r["format"] for r in records} == {"tflite", "onnx"}
        assert all(r["provenance"]["device"]["agent"]["machine"] == "aarch64" for r in records)
    finally:
        cli("emulator", "stop", "phone64")


def test_device_python_is_aarch64_with_a_fake_aarch64_cpuinfo(cli, session_cache):
    cli.json("emulator", "start", "ssh", "--arch", "arm64", "--name", "board")
    try:
        python = inventory.load()["board"].python
        probe = ("import platform, onnxruntime; from ai_edge_litert.interpreter import Interpreter; "
                 "print(platform.machine(), 'CPU part' in open('/proc/cpuinfo').read())")
        done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["aarch64", "True"]
    finally:
        cli("emulator", "stop", "board")


def test_missing_qemu_is_one_clear_line(cli, monkeypatch):
    monkeypatch.setattr(arm64.shutil, "which", lambda tool: None if tool == "qemu-aarch64-static" else "/bin/true")
    result = cli("emulator", "start", "ssh", "--arch", "arm64", "--name", "nope", code=1)
    assert "qemu-user-static" in result.stderr and "Traceback" not in result.stderr
    assert "nope" not in inventory.load()


def test_ptl_and_executorch_run_on_arm64_with_the_optional_runtimes(cli, two_input_pte):
    """PyTorch Mobile and ExecuTorch on aarch64 Python: PyPI's aarch64 torch 2.11-2.13 are CUDA
    builds, so the userland takes CPU torch 2.10.0 and ExecuTorch 1.1.0 (the newest that
    accepts it). Their runtimes must run the .ptl and .pte that aiot's torch 2.13 and
    ExecuTorch 1.5.1 wrote, and a user's two-input .pte, and give the same outputs as x86_64."""
    cli.json("emulator", "start", "ssh", "--arch", "arm64", "--name", "pitorch",
             "--with", "torch,executorch")
    try:
        cli("sweep", "-m", f"tiny_cnn,{two_input_pte}", "-f", "ptl,executorch",
            "-d", "pitorch,local", "--threads", "1", *FAST)
        records = _ok_records(cli, "pitorch")
        runtimes = {(r["model"], r["format"]): r["provenance"]["runtime"] for r in records}
        # The board's session imported each runtime once for its runs (torch alone is ~20 s
        # of CPU under qemu), and the records say so.
        assert {r["provenance"]["agent_process"] for r in records} == {"session-fork-preloaded"}
        assert runtimes["tiny_cnn", "ptl"]["backend"] == "pytorch_mobile"
        assert runtimes["tiny_cnn", "ptl"]["version"].startswith("2.10.0")
        assert runtimes["tiny_cnn", "executorch"] == {"backend": "executorch", "version": "1.1.0"}
        assert runtimes["two_inputs.pte", "executorch"]["version"] == "1.1.0"
        on_pi = [d for d in cli.json("results", "outputs", "--reference", "local")
                 if d["device"] == "pitorch"]
        assert sorted((d["model"], d["format"]) for d in on_pi) == [
            ("tiny_cnn", "executorch"), ("tiny_cnn", "ptl"), ("two_inputs.pte", "executorch")]
        assert all(d["verdict"] == "match" for d in on_pi), on_pi
    finally:
        cli("emulator", "stop", "pitorch")


def test_unknown_optional_runtime_is_refused_before_building(cli):
    res = cli("emulator", "start", "ssh", "--arch", "arm64", "--with", "tensorflow", code=2)
    assert "unknown optional runtime 'tensorflow'" in res.stderr
    assert "known: torch, executorch" in res.stderr
