"""The aiot app on the emulated Android phone: ``pm install`` checks the APK, ``am instrument``
starts the same runtime and agent the app would, and a sweep ``--via app,shell`` stores both
kinds of run, which ``results compare --by via`` pairs. Everything the app path adds is
labelled as emulation (qemu timings mean nothing for a phone)."""

from __future__ import annotations

import threading
import time
import zipfile
from pathlib import Path

import pytest

from aiot.host.emulator import arm64
from tests.app.conftest import need_tools
from tests.helpers import fast, stop_emulators

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(arm64.missing_tools()),
                       reason=f"needs Debian packages {arm64.missing_tools()} (scripts/bootstrap.sh installs them)"),
]

FAST = fast(warmup_runs=1)
TOOLS = ("javac", "java", "keytool", "aapt2", "zipalign", "apksigner", "dpkg-deb")


def _transport(name: str):
    from aiot.host.devices.resolve import open_transport

    return open_transport(name)


def _unsigned_copy(apk: Path, out: Path) -> Path:
    """The APK without its signatures (v1 files dropped; rewriting drops the v2/v3 block)."""
    with zipfile.ZipFile(apk) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            if not item.filename.startswith("META-INF/"):
                dst.writestr(item, src.read(item))
    return out


def test_sweep_via_app_and_shell_on_the_emulated_phone(cli, app_env, tmp_path):
    need_tools(*TOOLS)
    cli.json("emulator", "start", "adb", "--profile", "android", "--name", "app-phone")
    try:
        cli.json("devices", "setup", "app-phone")
        # Before the app is installed, --via app fails with the command that fixes it.
        cli("run", "-m", "tiny_cnn", "-f", "tflite", "-d", "app-phone", "--via", "app", *FAST, code=1)
        [refused] = cli.json("results", "list")
        assert refused["status"] == "failed" and "aiot app install app-phone" in refused["reason"]

        installed = cli.json("app", "install", "app-phone")
        assert installed["pm"] == "Success" and installed["version"] == "0.1.0"
        # The APK carries the phone runtime's loader; the tree went into the app's own files.
        tree = installed["runtime_tree"]
        assert installed["native_library"] == f"lib/arm64-v8a/libaiot_ld_{tree}.so"
        assert installed["runtime_copied"] is True
        assert cli.json("app", "install", "app-phone")["runtime_copied"] is False  # once per tree
        # (other tests may have built APKs for other trees in this session's cache)
        [build] = [b for b in cli.json("app", "info")["runtime_builds"] if b["runtime_tree"] == tree]
        assert build["sha256"] == installed["sha256"]
        [app_check] = [c for c in cli.json("devices", "doctor", "app-phone")["checks"] if c["name"] == "app"]
        assert app_check["detail"] == f"installed; runtime {tree} is in its files", app_check
        transport = _transport("app-phone")
        try:
            assert transport.exists(f"/data/app/org.aiot.agent/lib/arm64/libaiot_ld_{tree}.so")
            assert transport.exists(f"/data/user/0/org.aiot.agent/files/aiot-runtime/{tree}/.complete")
            _check_policy(transport, tree)
            listed = transport.shell(["pm", "list", "instrumentation"], timeout=60).stdout
            assert "instrumentation:org.aiot.agent/.AgentInstrumentation (target=org.aiot.agent)" in listed
            # An APK without a signature is refused, as a phone refuses it.
            unsigned = _unsigned_copy(Path(cli.json("app", "info")["path"]), tmp_path / "unsigned.apk")
            transport.push(unsigned, "/data/local/tmp/aiot/unsigned.apk")
            done = transport.shell(["pm", "install", "-r", "/data/local/tmp/aiot/unsigned.apk"], timeout=120)
            assert done.exit_code != 0 and "INSTALL_PARSE_FAILED_NO_CERTIFICATES" in done.stdout
        finally:
            transport.close()

        cli("sweep", "-m", "tiny_cnn", "-f", "tflite", "-d", "app-phone", "--threads", "1,2",
            "--via", "app,shell", *FAST)
        records = [r for r in cli.json("results", "list") if r["id"] != refused["id"]]
        assert sorted((r["spec"].get("via", "shell"), r["threads"], r["status"]) for r in records) == [
            ("app", 1, "ok"), ("app", 2, "ok"), ("shell", 1, "ok"), ("shell", 2, "ok")]
        for r in records:
            prov = r["provenance"]
            assert prov["via"] == r["spec"].get("via", "shell")
            assert prov["agent_process"] == "one-shot"  # both ways: the pair differs in context only
            if prov["via"] == "app":
                app = prov["app"]
                assert app["emulated"] is True and app["app_version"] == "0.1.0"
                assert app["apk_sha256"] == installed["sha256"] and "emulated" in app["cpuset"]
                assert app["runtime_start"] == {"loader": f"native_lib_dir/libaiot_ld_{tree}.so",
                                                "tree": f"app files/{tree}"}
                assert app["sigsys_skipped"] == 0  # the agent's handler is in; qemu traps nothing
            assert r["validity"] == "INVALID"  # qemu's timings either way

        sweep = records[0]["sweep_id"]
        delta = cli.json("results", "compare", sweep, "--by", "via")
        assert delta["by"] == "via" and delta["passed"] is True
        assert (delta["a"]["records"], delta["b"]["records"]) == (2, 2)
        pairs = {row["key"]["threads"]: row for row in delta["rows"]}
        assert set(pairs) == {1, 2} and all(row["a_id"] and row["b_id"] for row in pairs.values())
        assert all(row["metrics"]["median"]["change"] is not None for row in pairs.values())
        table = cli("results", "compare", sweep, "--by", "via").stdout
        assert "via=app" in table and "via=shell" in table and "tiny_cnn · tflite · 2t @ app-phone" in table
        transport = _transport("app-phone")
        try:
            _check_seccomp_fit(transport, tree, tmp_path)
        finally:
            transport.close()
    finally:
        stop_emulators("app-phone")


def _instrument(transport, argv: list[str], env: dict | None = None, cwd: str = "/",
                lines: list | None = None) -> dict:
    from aiot.host.app.instrument import StatusParser, encode_spec, instrument_argv

    parser = StatusParser((lines if lines is not None else []).append)
    transport.shell(instrument_argv(encode_spec(argv, env, cwd, 300)), timeout=400, on_line=parser.feed)
    return parser.outcome()


def _check_seccomp_fit(transport, tree: str, tmp_path: Path) -> None:
    """The agent the app starts makes none of the calls the app's seccomp filter traps before
    it can survive them: qemu's strace of a two-thread LiteRT run through the app shows no
    set_robust_list or rseq (patched out of the loader and libc), and OpenBLAS's mbind (NumPy)
    only after the agent's SIGSYS handler is in place."""
    from aiot.host.app.session import AppAgentSession

    # One log per process (%d: its pid): the agent's, and those of programs it starts, such
    # as platform's `uname` through /system/bin/sh (the emulated phone's is a glibc busybox,
    # a phone's is bionic: those do not count).
    folder = "/data/user/0/org.aiot.agent/files/strace"
    transport.shell(["mkdir", "-p", folder], timeout=60)
    model = transport.shell(["sh", "-c", "find /data/local/tmp/aiot/blobs -name '*.tflite' | head -1"],
                            timeout=60).stdout.strip()
    with AppAgentSession(_transport("app-phone")) as session:
        session.env = {**session.env, "QEMU_STRACE": "1", "QEMU_LOG_FILENAME": f"{folder}/%d.txt"}
        result = session.run({"v": 1, "backend": "litert", "artifact": model, "threads": 2,
                              "warmup_runs": 1, "warmup_min_s": 0, "min_runs": 3, "min_s": 0}, timeout=600)
    assert result["sigsys_skipped"] == 0  # the handler is in place; qemu traps nothing
    agent = []
    for name in transport.shell(["ls", folder], timeout=60).stdout.split():
        transport.pull(f"{folder}/{name}", tmp_path / name)
        calls = [line.split(" ", 1)[1] for line in (tmp_path / name).read_text().splitlines() if " " in line]
        if any(c.startswith("rt_sigaction(SIGSYS,") for c in calls):
            agent.append(calls)
    [calls] = agent
    assert sum(c.startswith("clone(") for c in calls) >= 1  # threads were started
    assert not [c for c in calls if c.startswith(("set_robust_list(", "Unknown syscall 293"))]
    handler = next(i for i, c in enumerate(calls) if c.startswith("rt_sigaction(SIGSYS,"))
    mbinds = [i for i, c in enumerate(calls) if c.startswith("mbind(")]
    assert mbinds and min(mbinds) > handler, (handler, mbinds[:3])


def _check_policy(transport, tree: str) -> None:
    """What an Android 10+ app may not do, the emulated phone refuses too: exec the shell's
    runtime from /data/local/tmp, or have its loader map CPython from there; the loader from
    the native-library dir with the app's copy of the tree starts."""
    shell_tree = f"/data/local/tmp/aiot/runtime/aiot-aarch64-glibc/{tree}"
    refused = _instrument(transport, [f"{shell_tree}/bin/python3", "-c", "print(1)"])
    assert refused["reason"] == "start failed" and "error=13" in refused["detail"]
    loader = f"{{native_lib_dir}}/libaiot_ld_{tree}.so"
    mapped = _instrument(transport, [loader, "--library-path", f"{shell_tree}/lib/aarch64-linux-gnu",
                                     f"{shell_tree}/usr/bin/python3.11", "-c", "print(1)"])
    assert (mapped["reason"], mapped["exit"]) == ("exited", 127) and "failed to map" in mapped["stderr"]
    app_tree = f"{{files_dir}}/aiot-runtime/{tree}"
    started = _instrument(transport, [loader, "--library-path",
                                      f"{app_tree}/lib/aarch64-linux-gnu:{app_tree}/usr/lib/aarch64-linux-gnu",
                                      f"{app_tree}/usr/bin/python3.11", "-c",
                                      "import os; print(os.environ['HOME'])"],
                          {"LD_PRELOAD": None})
    assert (started["reason"], started["exit"]) == ("exited", 0), started


def _pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_am_instrument_child_ends_with_the_host_or_force_stop(cli, app_env):
    """The agent an instrumentation started dies when the host stops waiting (its adb stream
    closes) and on ``am force-stop``: no orphan keeps measuring."""
    from aiot.core.errors import CommandTimeout
    from aiot.host.app.instrument import StatusParser, encode_spec, force_stop, instrument_argv

    need_tools(*TOOLS)
    cli.json("emulator", "start", "adb", "--profile", "android", "--name", "stop-phone")
    try:
        cli.json("app", "install", "stop-phone")
        transport = _transport("stop-phone")
        try:
            spec = encode_spec(["/system/bin/sh", "-c", "echo $$; exec sleep 60"], {}, "/", 120)
            pids: list[int] = []
            parser = StatusParser(lambda line: pids.append(int(line)))
            with pytest.raises(CommandTimeout):
                transport.shell(instrument_argv(spec), timeout=8, on_line=parser.feed)
            assert pids, "the child never started"
            deadline = time.monotonic() + 10
            while _pid_alive(pids[0]) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not _pid_alive(pids[0]), "the child outlived the host's disconnect"

            pids.clear()
            ended = threading.Event()

            def instrument() -> None:
                transport.shell(instrument_argv(spec), timeout=90, on_line=parser.feed)
                ended.set()

            thread = threading.Thread(target=instrument, daemon=True)
            thread.start()
            deadline = time.monotonic() + 30
            while not pids and time.monotonic() < deadline:
                time.sleep(0.2)
            assert pids, "the child never started"
            stopper = _transport("stop-phone")
            try:
                force_stop(stopper)
            finally:
                stopper.close()
            assert ended.wait(15), "am instrument did not end after force-stop"
            deadline = time.monotonic() + 10
            while _pid_alive(pids[0]) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not _pid_alive(pids[0])
        finally:
            transport.close()
    finally:
        stop_emulators("stop-phone")
