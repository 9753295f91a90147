"""The runtime as the Android app starts it (host/app/runtime.py) and the emulated phone's model
of the SELinux rules that make it necessary (android_apps.expand / policy_denial)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from aiot.host.app import runtime as app_runtime
from aiot.host.app.instrument import AppError
from aiot.host.devices import android_runtime as rt
from aiot.host.emulator import android_apps

TREE = "0123456789abcdef"
PYTHON = f"/data/local/tmp/aiot/runtime/aiot-aarch64-glibc/{TREE}/bin/python3"


@pytest.mark.parametrize(("python", "tree"), [
    (PYTHON, TREE),
    ("/data/local/tmp/aiot/runtime/other-runtime/abc/bin/python3", None),
    ("/usr/bin/python3", None),
    ("python3", None),
])
def test_tree_id_only_for_aiots_runtime(python, tree):
    assert rt.tree_id(python) == tree


def test_app_command_is_what_the_wrapper_runs_with_the_loader_from_the_apk():
    runtime = app_runtime.AppRuntime(TREE, PYTHON)
    assert runtime.device_root == f"/data/local/tmp/aiot/runtime/aiot-aarch64-glibc/{TREE}"
    argv, env = runtime.command([PYTHON, "-m", "device_agent", "run", "spec.json"],
                                {"PYTHONPATH": "/x", "HOME": "/data/local/tmp/aiot/home", "AIOT_Y": "1"})
    root = f"{{files_dir}}/aiot-runtime/{TREE}"
    assert argv == [f"{{native_lib_dir}}/libaiot_ld_{TREE}.so", "--library-path",
                    f"{root}/lib/aarch64-linux-gnu:{root}/usr/lib/aarch64-linux-gnu",
                    f"{root}/usr/bin/python3.11", "-m", "device_agent", "run", "spec.json"]
    assert env["AIOT_Y"] == "1" and "HOME" not in env and "TMPDIR" not in env  # the app's own
    assert all(env[name] is None for name in rt.CLEARED_ENV)  # PYTHONPATH cleared, as the wrapper does
    assert env["GLIBC_TUNABLES"] == "glibc.pthread.rseq=0" and env["AIOT_SIGSYS"] == "skip"  # the app's filter
    assert env["AIOT_RUNTIME"] == f"aiot-aarch64-glibc:{TREE}" and env["PYTHONNOUSERSITE"] == "1"


def test_the_shell_wrapper_and_the_app_command_agree():
    """One layout for both starts: what the app's command names, bin/python3 names too."""
    wrapper = rt.WRAPPER
    assert f"$R/{rt.LOADER}" in wrapper and f"$R/{rt.INTERPRETER}" in wrapper
    assert ":".join(f"$R/{d}" for d in rt.LIBRARY_DIRS) in wrapper
    assert f"unset {' '.join(rt.CLEARED_ENV)}" in wrapper
    assert all(f"{k}={v}" in wrapper for k, v in rt.FIXED_ENV.items())


def _fake_tree(tmp_path: Path) -> app_runtime.AppRuntime:
    tree = tmp_path / "phone" / "runtime" / "aiot-aarch64-glibc" / TREE
    (tree / "usr" / "bin").mkdir(parents=True)
    (tree / "bin").mkdir()
    (tree / "lib" / "aarch64-linux-gnu").mkdir(parents=True)
    (tree / "lib" / "aarch64-linux-gnu" / "libc.so.6").write_bytes(b"\x7fELF original libc")
    (tree / "usr" / "bin" / "python3.11").write_bytes(b"\x7fELF fake")
    (tree / "bin" / "python3").write_text("#!/system/bin/sh\n")
    (tree / "usr" / "bin" / "python3").symlink_to("python3.11")
    (tree / rt.COMPLETE).touch()
    return app_runtime.AppRuntime(TREE, str(tree / "bin" / "python3"))


def _sh(script: str, data: Path) -> str:
    data.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["sh", "-c", script], cwd=data, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


def _stage_here(runtime, data: Path, tmp_path: Path) -> str:
    """What stage() does after its check, with this host's sh in ``data`` as the app's dir."""
    if _sh(app_runtime.check_script(runtime), data) == app_runtime.PRESENT:
        return app_runtime.PRESENT
    libc = tmp_path / "pushed-libc.so.6"
    libc.write_bytes(b"\x7fELF patched libc")
    return _sh(app_runtime.stage_script(runtime, str(libc), "lib/aarch64-linux-gnu/libc.so.6"), data)


def test_stage_copies_once_with_the_patched_libc_and_drops_older_trees(tmp_path):
    runtime = _fake_tree(tmp_path)
    data = tmp_path / "data"
    old = data / "files" / "aiot-runtime" / "fedcba9876543210"
    old.mkdir(parents=True)
    assert _stage_here(runtime, data, tmp_path) == app_runtime.COPIED
    copy = data / "files" / "aiot-runtime" / TREE
    assert (copy / "usr" / "bin" / "python3.11").read_bytes() == b"\x7fELF fake"
    assert (copy / "lib" / "aarch64-linux-gnu" / "libc.so.6").read_bytes() == b"\x7fELF patched libc"
    assert (copy / "usr" / "bin" / "python3").is_symlink()  # links stay links (cp -P)
    assert not (copy / "bin" / "python3").exists()  # the shell's wrapper: no use to the app
    assert (copy / rt.COMPLETE).read_text().strip() == app_runtime.stage_mark() and not old.exists()
    assert not (copy.parent / f"{TREE}.part").exists()
    assert _stage_here(runtime, data, tmp_path) == app_runtime.PRESENT
    # The shell's tree is untouched: its libc is still glibc's own.
    assert (Path(runtime.device_root) / "lib" / "aarch64-linux-gnu" / "libc.so.6").read_bytes() == b"\x7fELF original libc"


def test_stage_redoes_an_interrupted_copy_or_one_made_under_other_patches(tmp_path):
    runtime = _fake_tree(tmp_path)
    data = tmp_path / "data"
    half = data / "files" / "aiot-runtime" / TREE
    (half / "usr").mkdir(parents=True)  # a copy cut off before its marker
    assert _stage_here(runtime, data, tmp_path) == app_runtime.COPIED
    assert (half / "usr" / "bin" / "python3.11").is_file()
    (half / rt.COMPLETE).write_text("aiot-app-runtime patch 0\n")  # an older aiot's copy
    assert _stage_here(runtime, data, tmp_path) == app_runtime.COPIED


class _Phone:
    """A transport whose shell answers run-as as a phone does."""

    name = "pixel"

    def __init__(self, answer) -> None:
        self.answer = answer

    def shell(self, argv, timeout=None):
        from aiot.host.transports.base import ShellResult

        code, out, err = self.answer
        return ShellResult(" ".join(argv), code, out, err, 0.01)


@pytest.mark.parametrize("refusal", ["run-as: unknown package: org.aiot.agent",
                                     "run-as: package not debuggable: org.aiot.agent"])
def test_stage_refusals_are_one_line_with_the_fix(refusal):
    with pytest.raises(AppError) as caught:
        app_runtime.stage(_Phone((1, "", refusal)), app_runtime.AppRuntime(TREE, PYTHON))
    assert refusal in caught.value.message and "aiot app install pixel" in caught.value.hint


@pytest.mark.parametrize(("head", "ok"), [
    (b"\x7fELF\x02\x01\x01" + bytes(11) + (183).to_bytes(2, "little"), True),   # aarch64
    (b"\x7fELF\x02\x01\x01" + bytes(11) + (62).to_bytes(2, "little"), False),   # x86-64
    (b"\x7fELF\x01\x01\x01" + bytes(11) + (40).to_bytes(2, "little"), False),   # 32-bit ARM
    (b"#!/system/bin/sh\n", False),
])
def test_only_an_aarch64_elf_is_taken_for_the_loader(tmp_path, head, ok):
    path = tmp_path / "ld.so"
    path.write_bytes(head + bytes(64))
    if ok:
        app_runtime._check_loader(path, "/x/ld", "pixel")
        assert path.is_file()
    else:
        with pytest.raises(AppError, match="not an aarch64 ELF file"):
            app_runtime._check_loader(path, "/x/ld", "pixel")
        assert not path.exists()


# -- the emulated phone's side ----------------------------------------------------------------

FACTS = {"package": "org.aiot.agent", "native_library_dir": "/data/app/org.aiot.agent/lib/arm64",
         "data_dir": "/data/user/0/org.aiot.agent", "target_sdk": 29}


def test_expand_fills_the_apps_folders_like_runspec():
    dirs = android_apps._app_dirs(FACTS)
    spec = android_apps.expand({"argv": ["{native_lib_dir}/libx.so", "{other}"],
                                "env": {"A": "{files_dir}/a", "LD_PRELOAD": None}, "cwd": "{files_dir}"}, dirs)
    assert spec["argv"] == ["/data/app/org.aiot.agent/lib/arm64/libx.so", "{other}"]
    assert spec["env"] == {"A": "/data/user/0/org.aiot.agent/files/a",
                           "TMPDIR": "/data/user/0/org.aiot.agent/cache",
                           "HOME": "/data/user/0/org.aiot.agent/files"}
    assert spec["cwd"] == "/data/user/0/org.aiot.agent/files"


@pytest.mark.parametrize(("argv", "reason"), [
    ([PYTHON, "-m", "device_agent"], "start failed"),  # exec from /data/local/tmp
    (["/data/user/0/org.aiot.agent/files/x"], "start failed"),  # exec from the app's data
    (["/data/app/org.aiot.agent/lib/arm64/../../../../local/tmp/x"], "start failed"),
    (["/data/app/org.aiot.agent/lib/arm64/libld.so", "--library-path", "/data/local/tmp/aiot/lib",
      "/data/user/0/org.aiot.agent/files/python3"], "exited"),  # maps code from /data/local/tmp
    (["/data/app/org.aiot.agent/lib/arm64/libld.so", "--library-path", "/data/user/0/x/lib",
      "/data/local/tmp/aiot/python3", "-c", "1"], "exited"),
    (["/data/app/org.aiot.agent/lib/arm64/libld.so", "--library-path", "/data/user/0/x/lib",
      "/data/user/0/org.aiot.agent/files/python3", "/data/local/tmp/aiot/agent.py"], None),  # reads it only
    (["/system/bin/sh", "-c", "echo"], None),
    (["/bin/sh", "-c", "echo"], None),  # /bin is /system/bin on Android 10+
])
def test_policy_denial_models_what_selinux_lets_an_app_run(argv, reason):
    denied = android_apps.policy_denial(argv, FACTS)
    assert (denied or {}).get("aiot_reason") == reason
    if reason == "exited":
        assert denied["aiot_exit"] == "127" and "failed to map" in denied["aiot_stderr"]
    elif reason:
        assert "error=13" in denied["aiot_detail"]


class _DoctorPhone:
    """A phone for the doctor's app check: its pm list and run-as answers, its agent Python."""

    name = "pixel"

    def __init__(self, packages: str, run_as: tuple[int, str, str], python: str = PYTHON) -> None:
        self.packages, self.run_as, self._python = packages, run_as, python
        self.commands: list[list[str]] = []

    def python(self, backend=None) -> str:
        return self._python

    def shell(self, argv, timeout=None):
        from aiot.host.transports.base import ShellResult

        self.commands.append(list(argv))
        if argv[:3] == ["pm", "list", "packages"]:
            return ShellResult("pm", 0, self.packages, "", 0.01)
        code, out, err = self.run_as
        return ShellResult("run-as", code, out, err, 0.01)


@pytest.mark.parametrize(("packages", "run_as", "python", "detail", "warn"), [
    ("package:com.android.shell\n", (0, "", ""), PYTHON, "not installed", True),
    ("package:org.aiot.agent\n", (0, app_runtime.PRESENT + "\n", ""), PYTHON, f"runtime {TREE} is in its files", False),
    ("package:org.aiot.agent\n", (1, "", ""), PYTHON, f"runtime {TREE} is not in the app's files", True),
    ("package:org.aiot.agent\n", (1, "", "run-as: package not debuggable: org.aiot.agent"), PYTHON,
     "run-as refused: run-as: package not debuggable", True),
    ("package:org.aiot.agent\n", (0, "", ""), "/usr/bin/python3", "starts the device's own Python", False),
])
def test_doctor_says_what_via_app_still_needs(packages, run_as, python, detail, warn):
    check = app_runtime.check_app(_DoctorPhone(packages, run_as, python))
    assert check.ok and detail in check.detail and check.warn is warn
    assert (check.fix == "aiot app install pixel") is warn


def test_what_run_as_copies_is_made_readable_to_the_app():
    class Recorder(_Phone):
        def workdir(self) -> str:
            return "/data/local/tmp/aiot"

    phone = Recorder((0, "", ""))
    calls = []
    phone.shell = lambda argv, timeout=None: calls.append(argv) or _Phone((0, "", "")).shell(argv)
    tree = f"/data/local/tmp/aiot/runtime/aiot-aarch64-glibc/{TREE}"
    app_runtime._let_the_app_read(phone, tree, "/data/local/tmp/aiot/blobs/ab12/libc.so.6")
    [(sh, c, script)] = calls
    assert (sh, c) == ("sh", "-c")
    searchable = script.split(" && ")[0].split()[2:]
    assert searchable == ["/data/local/tmp/aiot", "/data/local/tmp/aiot/blobs", "/data/local/tmp/aiot/blobs/ab12",
                          "/data/local/tmp/aiot/runtime", "/data/local/tmp/aiot/runtime/aiot-aarch64-glibc", tree]
    assert f"chmod -R a+rX {tree}" in script and "chmod a+r /data/local/tmp/aiot/blobs/ab12/libc.so.6" in script
