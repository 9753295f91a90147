"""The emulated Android phone: a plain phone without Python, behind the real adb server.

Everything the agent needs there comes from ``aiot devices setup`` (aiot's aarch64 runtime):
the phone's shell is a static aarch64 busybox in a chroot, so the host's Python, libraries and
``/usr`` are out of reach, as on a phone. The first test builds the arm64 userland and the
runtime archive (cached for the session); timings under qemu are meaningless and not checked.
"""

from __future__ import annotations

import pytest

from aiot.host.emulator import arm64
from tests.helpers import fast, KillAfterFirstRun, stop_emulators, stored_run_key

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(arm64.missing_tools()),
                       reason=f"needs Debian packages {arm64.missing_tools()} (scripts/bootstrap.sh installs them)"),
]


#: Part of a MediaTek phone's ``adb shell getprop`` (a Dimensity 9000 handset).
FAST = fast(warmup_runs=1, cooldown=False)
DIMENSITY_GETPROP = """\
[ro.board.platform]: [mt6983]
[ro.hardware]: [mt6983]
[ro.product.cpu.abi]: [arm64-v8a]
[ro.product.manufacturer]: [Xiaomi]
[ro.product.model]: [22081212UG]
[ro.build.version.release]: [13]
[ro.build.version.sdk]: [33]
[ro.soc.manufacturer]: [Mediatek]
[ro.soc.model]: [MT6983]
"""


def _shell(device: str, script: str):
    from aiot.host.devices.resolve import open_transport

    transport = open_transport(device)
    try:
        return transport.shell(["sh", "-c", script], timeout=60)
    finally:
        transport.close()


def test_phone_is_refused_before_setup_and_measured_after_it(cli):
    started = cli.json("emulator", "start", "adb", "--arch", "arm64", "--profile", "android", "--name", "phone")
    assert (started["arch"], started["profile"]) == ("arm64", "android")
    try:
        info = cli.json("devices", "info", "phone")
        assert (info["soc_name"], info["soc"], info["soc_manufacturer"]) == ("Snapdragon 8 Gen 2", "SM8550", "QTI")
        assert (info["abi"], info["android_version"], info["android_sdk"]) == ("arm64-v8a", "14", 34)
        assert sorted((c["max_khz"], len(c["cores"])) for c in info["clusters"]) == [
            (2016000, 3), (2803000, 4), (3187000, 1)]  # A715 and A710 share a clock
        assert info["cores"] == 8 and info["agent"] is None and "devices setup phone" in info["agent_missing"]
        # A phone's shell: aarch64 programs, no Python anywhere, Android's work dir.
        seen = _shell("phone", "uname -m; command -v python3 python || echo none; ls /; echo $TMPDIR")
        assert seen.stdout.split()[:2] == ["aarch64", "none"], seen.stdout
        assert "usr" not in seen.stdout.split() and seen.stdout.split()[-1] == "/data/local/tmp"

        refused = cli("run", "-m", "tiny_cnn", "-f", "tflite", "-d", "phone", *FAST, code=2)
        assert "has no Python" in refused.stderr and "aiot devices setup phone" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 2  # the error and its hint
        assert cli.json("results", "list") == []  # refused before anything was recorded

        first = cli.json("devices", "setup", "phone")
        assert first["pushed_bytes"] > 10_000_000 and first["runtime"] == "aiot-aarch64-glibc"
        assert first["python"].startswith("/data/local/tmp/aiot/runtime/aiot-aarch64-glibc/")
        assert cli.json("devices", "setup", "phone")["pushed_bytes"] == 0

        cli("sweep", "-m", "tiny_cnn", "-f", "tflite,onnx", "-d", "phone", "--threads", "1,2", *FAST)
        records = cli.json("results", "list")
        assert {(r["format"], r["threads"], r["status"]) for r in records} == {
            (f, t, "ok") for f in ("tflite", "onnx") for t in (1, 2)}
        device = records[0]["provenance"]["device"]
        assert device["agent"]["machine"] == "aarch64" and device["abi"] == "arm64-v8a"
        assert device["agent"]["runtime"] == f"aiot-aarch64-glibc:{first['runtime_sha256'][:16]}"
        assert device["soc_name"] == "Snapdragon 8 Gen 2" and device["labels"]["profile"] == "android"
        assert {r["validity"] for r in records} == {"INVALID"}  # qemu's timings, not a phone's
    finally:
        cli("emulator", "stop", "phone")


def test_props_file_makes_another_phone(cli, tmp_path):
    props = tmp_path / "props.txt"
    props.write_text(DIMENSITY_GETPROP)
    cli.json("emulator", "start", "adb", "--profile", "android", "--props", str(props), "--name", "mtk")
    try:
        info = cli.json("devices", "info", "mtk")
        assert (info["soc_name"], info["model"], info["android_sdk"]) == ("Dimensity 9000", "22081212UG", 33)
        assert sorted(len(c["cores"]) for c in info["clusters"]) == [1, 3, 4]
        assert _shell("mtk", "getprop ro.soc.model").stdout.strip() == "MT6983"
    finally:
        cli("emulator", "stop", "mtk")


def test_phone_and_board_in_one_sweep_with_the_phone_killed_mid_sweep(cli, tmp_path):
    from aiot.host.engine.campaign import CampaignPolicy, plan_sweep, run_campaign, run_key
    from aiot.host.engine.runs import MeasureParams, NullListener, expand_sweep
    from aiot.host.store import open_store

    cli.json("emulator", "start", "adb", "--profile", "android", "--name", "rack-phone")
    cli.json("emulator", "start", "ssh", "--arch", "arm64", "--name", "rack-pi")
    try:
        cli.json("devices", "setup", "rack-phone")
        fast = MeasureParams(warmup_runs=1, warmup_min_s=0.0, min_runs=3, min_s=0.0, max_s=5.0)
        requests = expand_sweep(["rack-phone", "rack-pi"], ["tiny_cnn"], ["tflite", "onnx"], [1, 2],
                                params=fast)
        results = tmp_path / "results"
        with open_store(results) as store:
            plan = plan_sweep(requests, store, seed=3)
        listener = KillAfterFirstRun("rack-phone")
        records = run_campaign(plan, results, listener, CampaignPolicy(retries=2, backoff_s=0.2))
        assert listener.killed.is_set() and len(records) == 8
        phone = [r for r in records if r.device == "rack-phone"]
        board = [r for r in records if r.device == "rack-pi"]
        assert all(r.status == "ok" for r in board), [(r.status, r.reason) for r in board]
        assert [r.status for r in phone].count("ok") == 1
        assert any("device lost" in (r.reason or "") for r in phone), [(r.status, r.reason) for r in phone]

        # The phone is back (a new one under the same name, set up again): the same sweep
        # redoes exactly its missing runs, and no record is lost or duplicated.
        cli("emulator", "stop", "rack-phone")
        cli.json("emulator", "start", "adb", "--profile", "android", "--name", "rack-phone")
        cli.json("devices", "setup", "rack-phone")
        with open_store(results) as store:
            again = plan_sweep(requests, store, seed=3)
        assert again.sweep_id == plan.sweep_id and len(again.todo) == 3
        resumed = run_campaign(again, results, NullListener(), CampaignPolicy(retries=2, backoff_s=0.2))
        assert {r.device for r in resumed} == {"rack-phone"} and all(r.status == "ok" for r in resumed)
        with open_store(results) as store:
            everything = store.query(sweep_id=plan.sweep_id)
        assert not [r for r in everything if r.status == "pending"]
        ok_specs = sorted(stored_run_key(r) for r in everything if r.status == "ok")
        assert ok_specs == sorted(run_key(r) for r in requests)
    finally:
        stop_emulators("rack-phone", "rack-pi")

