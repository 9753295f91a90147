"""``pm`` and ``am`` of the emulated Android phone: the aiot app installed and instrumented.

The phone's adbd hands a shell command that starts with ``pm`` or ``am`` to this module, run
on the host side of the emulator (the phone's own root has no Java and no package manager):

* ``pm install [-r] PATH`` checks the APK as Android would refuse it: its signature
  (``apksigner verify``), its manifest (``aapt2``: package, instrumentation classes), and an
  update signed by another key; then keeps it as ``/data/app/PACKAGE/base.apk`` and in
  ``packages.json`` beside the phone's root. ``pm list packages|instrumentation`` and
  ``pm uninstall`` answer from there.
* ``am instrument -w -r -e spec BASE64 PACKAGE/CLASS`` of an installed instrumentation starts
  what the app would (the spec's argv, cwd and environment) inside the phone, and prints each
  stdout line as the app does (``INSTRUMENTATION_STATUS: aiot=LINE``), then the result bundle,
  with ``aiot_emulated=1``: no app process, cgroup, cpuset or foreground activity exists here,
  so the record says emulation, and the timings mean nothing for a phone.
* ``am force-stop PACKAGE`` kills the agent an instrumentation started.
* ``run-as PACKAGE COMMAND...`` runs a command in the app's data dir, for a debuggable app only
  (``run-as: package not debuggable``), as Android's ``run-as`` does.

Installing extracts the APK's ``lib/arm64-v8a/lib*.so`` into the app's native-library dir
(``/data/app/PACKAGE/lib/arm64``) and makes its data dir (``/data/user/0/PACKAGE`` with
``files/`` and ``cache/``). An instrumentation's spec gets the app's folders filled in as the
app's ``RunSpec.expand`` does, and the SELinux rules an app targeting API 29+ lives under are
checked before its command starts (:func:`policy_denial`): it may execute only files from its
native-library dir or the system, and may not map executable code from ``/data/local/tmp``.
The phone's processes all run as one user under qemu, so those rules are checked here, by
path, not enforced by a kernel: this is a model of the phone's policy, not the policy itself.

Run by adbd as ``python -m aiot.host.emulator.android_apps --root ROOT --enter SCRIPT COMMAND``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

from aiot.core.errors import AiotError
from aiot.core.fileio import sha256_file
from aiot.host.app.build import NATIVE_ABI, manifest_facts, verify_signature
from aiot.host.app.instrument import decode_spec
from aiot.host.transports.quoting import build_command

COMMANDS = ("pm", "am", "run-as")
#: The app's native-library dir, its data dir (relative to the phone's root, per package).
NATIVE_LIB_DIR, DATA_DIR = "/data/app/{package}/lib/arm64", "/data/user/0/{package}"
#: Where ``adb push`` and the shell path put files: readable by apps, never executable by them.
SHELL_DATA = "/data/local/tmp"
#: Where an app may execute files from besides its own native-library dir (``/bin`` is a
#: link to ``/system/bin`` since Android 10).
SYSTEM_DIRS = ("/system/", "/apex/", "/vendor/", "/product/", "/bin/")
CHUNK = 16000  # as the app's StatusLines.CHUNK


def handles(command: str) -> bool:
    """Whether a phone shell command is a ``pm``/``am`` call this module answers."""
    try:
        words = shlex.split(command)
        # Operators (; && | > ...) make it a script for the phone's shell, not one pm/am call.
        tokens = list(shlex.shlex(command, posix=True, punctuation_chars=True))
    except ValueError:
        return False
    operator = any(token and set(token) <= set("();<>|&") for token in tokens)
    return bool(words) and words[0] in COMMANDS and not operator


class Phone:
    """The emulated phone's app state: its root and ``packages.json`` beside it."""

    def __init__(self, root: Path, enter: Path) -> None:
        self.root, self.enter = root, enter
        self.state = root.parent / "packages.json"
        self.running = root.parent / "running"

    def packages(self) -> dict:
        try:
            return json.loads(self.state.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def save(self, packages: dict) -> None:
        part = self.state.with_suffix(".part")
        part.write_text(json.dumps(packages, indent=2), encoding="utf-8")
        part.replace(self.state)

    def host_path(self, path: str) -> Path:
        inside = os.path.normpath(os.path.join("/", path)).lstrip("/")
        return self.root / inside


def _say(text: str, stream=None) -> None:
    (stream or sys.stdout).write(text + "\n")
    (stream or sys.stdout).flush()


# -- pm ----------------------------------------------------------------------------------------

def pm(phone: Phone, args: list[str]) -> int:
    if args[:1] == ["install"]:
        return _pm_install(phone, args[1:])
    if args[:2] == ["list", "packages"]:
        for name in sorted(phone.packages()):
            _say(f"package:{name}")
        return 0
    if args[:2] == ["list", "instrumentation"]:
        for name, facts in sorted(phone.packages().items()):
            for cls in facts["instrumentation"]:
                short = cls[len(name):] if cls.startswith(name + ".") else cls
                _say(f"instrumentation:{name}/{short} (target={name})")
        return 0
    if args[:1] == ["uninstall"] and len(args) == 2:
        packages = phone.packages()
        if packages.pop(args[1], None) is None:
            _say("Failure [DELETE_FAILED_INTERNAL_ERROR]")
            return 1
        phone.save(packages)
        shutil.rmtree(phone.host_path(f"/data/app/{args[1]}"), ignore_errors=True)
        shutil.rmtree(phone.host_path(DATA_DIR.format(package=args[1])), ignore_errors=True)
        _say("Success")
        return 0
    _say(f"Error: unknown or unsupported pm command: {' '.join(args)} (aiot emulated phone)", sys.stderr)
    return 1


def _pm_install(phone: Phone, args: list[str]) -> int:
    flags = [a for a in args if a.startswith("-")]
    paths = [a for a in args if not a.startswith("-")]
    if len(paths) != 1:
        _say("Error: pm install needs one APK path", sys.stderr)
        return 1
    apk = phone.host_path(paths[0])
    if not apk.is_file():
        _say(f"Error: Unable to open file: {paths[0]}", sys.stderr)
        return 1
    try:
        certificate = verify_signature(apk)
    except AiotError as exc:
        _say(f"Failure [INSTALL_PARSE_FAILED_NO_CERTIFICATES: {exc.message}]")
        return 1
    try:
        facts = manifest_facts(apk)
    except AiotError as exc:
        _say(f"Failure [INSTALL_PARSE_FAILED_MANIFEST_MALFORMED: {exc.message}]")
        return 1
    if not facts["package"]:
        _say("Failure [INSTALL_PARSE_FAILED_BAD_PACKAGE_NAME]")
        return 1
    packages = phone.packages()
    held = packages.get(facts["package"])
    if held and "-r" not in flags:
        _say(f"Failure [INSTALL_FAILED_ALREADY_EXISTS: Attempt to re-install {facts['package']} "
             "without first uninstalling.]")
        return 1
    if held and held["certificate_sha256"] != certificate:
        _say(f"Failure [INSTALL_FAILED_UPDATE_INCOMPATIBLE: Package {facts['package']} signatures "
             "do not match previously installed version; ignoring!]")
        return 1
    package = facts["package"]
    target = phone.host_path(f"/data/app/{package}/base.apk")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(apk, target)
    libraries = _extract_native_libs(phone, target, package) if facts["extract_native_libs"] else []
    data = phone.host_path(DATA_DIR.format(package=package))
    for folder in ("files", "cache"):  # kept across updates, as Android keeps app data
        (data / folder).mkdir(parents=True, exist_ok=True)
    packages[package] = {**facts, "certificate_sha256": certificate,
                         "sha256": sha256_file(target), "path": f"/data/app/{package}/base.apk",
                         "native_library_dir": NATIVE_LIB_DIR.format(package=package),
                         "native_libraries": libraries, "data_dir": DATA_DIR.format(package=package),
                         "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    phone.save(packages)
    _say("Success")
    return 0


def _extract_native_libs(phone: Phone, apk: Path, package: str) -> list[str]:
    """``lib/arm64-v8a/lib*.so`` of the APK into the native-library dir (mode 755, as the
    package manager leaves them); returns their names."""
    folder = phone.host_path(NATIVE_LIB_DIR.format(package=package))
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    names = []
    with zipfile.ZipFile(apk) as zf:
        for item in zf.infolist():
            directory, _, name = item.filename.rpartition("/")
            if directory == f"lib/{NATIVE_ABI}" and name.startswith("lib") and name.endswith(".so"):
                (folder / name).write_bytes(zf.read(item))
                (folder / name).chmod(0o755)
                names.append(name)
    return sorted(names)


# -- run-as ------------------------------------------------------------------------------------

def run_as(phone: Phone, args: list[str]) -> int:
    """``run-as PACKAGE COMMAND...``: the command in the app's data dir (debuggable apps only)."""
    if not args:
        _say("run-as: usage: run-as <package-name> [--user <uid>] <command> [<args>]", sys.stderr)
        return 1
    package, command = args[0], args[1:]
    if command[:1] == ["--user"]:
        command = command[2:]
    facts = phone.packages().get(package)
    if facts is None:
        _say(f"run-as: unknown package: {package}", sys.stderr)
        return 1
    if not facts.get("debuggable"):
        _say(f"run-as: package not debuggable: {package}", sys.stderr)
        return 1
    line = build_command(command or ["/system/bin/sh"], cwd=facts["data_dir"])
    return subprocess.run([str(phone.enter), line], check=False).returncode


# -- am ----------------------------------------------------------------------------------------

def am(phone: Phone, args: list[str]) -> int:
    if args[:1] == ["instrument"]:
        return _am_instrument(phone, args[1:])
    if args[:1] == ["force-stop"] and len(args) == 2:
        _force_stop(phone, args[1])
        return 0
    _say(f"Error: unknown or unsupported am command: {' '.join(args)} (aiot emulated phone)", sys.stderr)
    return 1


def _parse_instrument(args: list[str]) -> tuple[dict[str, str], set[str], str | None]:
    extras, flags, component, i = {}, set(), None, 0
    while i < len(args):
        arg = args[i]
        if arg == "-e" and i + 2 < len(args):
            extras[args[i + 1]] = args[i + 2]
            i += 3
            continue
        if arg.startswith("-"):
            flags.add(arg)
        else:
            component = arg
        i += 1
    return extras, flags, component


def _resolve(packages: dict, component: str | None) -> tuple[str, str] | None:
    if not component or "/" not in component:
        return None
    package, _, cls = component.partition("/")
    cls = package + cls if cls.startswith(".") else cls
    facts = packages.get(package)
    return (package, cls) if facts and cls in facts["instrumentation"] else None


def _am_instrument(phone: Phone, args: list[str]) -> int:
    extras, _flags, component = _parse_instrument(args)
    packages = phone.packages()
    found = _resolve(packages, component)
    if found is None:
        _say(f"INSTRUMENTATION_FAILED: {component}")
        _say(f"Error: Unable to find instrumentation info for: ComponentInfo{{{component}}}", sys.stderr)
        return 1
    package, _ = found
    result = {"aiot_emulated": "1", "aiot_app_version": packages[package].get("version_name") or "",
              "aiot_cpuset": "emulated phone: no cpuset", "aiot_cgroup": "emulated phone: no cgroups",
              "aiot_foreground": "0"}
    try:
        spec = expand(decode_spec(extras["spec"]), _app_dirs(packages[package]))
        argv, timeout_ms = spec["argv"], spec.get("timeout_ms") or 30 * 60 * 1000
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        _finish({**result, "aiot_error": f"IllegalArgumentException: bad or missing spec ({exc})"}, 0)
        return 0
    denied = policy_denial(argv, packages[package])
    if denied is not None:
        result.update(denied)
    else:
        result.update(_run_child(phone, package, argv, spec["env"], spec.get("cwd"), timeout_ms))
    _finish(result, -1)
    return 0


def _app_dirs(facts: dict) -> dict[str, str]:
    data = facts.get("data_dir") or DATA_DIR.format(package=facts["package"])
    return {"native_lib_dir": facts.get("native_library_dir") or NATIVE_LIB_DIR.format(package=facts["package"]),
            "files_dir": f"{data}/files", "cache_dir": f"{data}/cache"}


def expand(spec: dict, dirs: dict[str, str]) -> dict:
    """The spec as the app's ``RunSpec.expand`` and ``withAppDirs`` leave it: ``{name}``
    placeholders filled in, null env values dropped (the phone's shell sets none of them),
    HOME and TMPDIR in the app's files and cache dirs unless the spec set them."""
    def fill(text: str) -> str:
        for name, value in dirs.items():
            text = text.replace("{" + name + "}", value)
        return text

    env = {name: fill(value) for name, value in (spec.get("env") or {}).items() if value is not None}
    env.setdefault("TMPDIR", dirs["cache_dir"])
    env.setdefault("HOME", dirs["files_dir"])
    cwd = spec.get("cwd")
    return {**spec, "argv": [fill(a) for a in spec["argv"]], "env": env,
            "cwd": fill(cwd) if cwd else cwd}


def policy_denial(argv: list[str], facts: dict) -> dict | None:
    """What the phone would answer, as a result bundle, where SELinux stops an app targeting
    API 29+ from starting ``argv``; None where it may. An app may ``exec()`` only files of its
    native-library dir or the system (``error=13`` from ProcessBuilder otherwise), and a glibc
    loader it starts may not map a program or library from ``/data/local/tmp`` (apps have
    read-only access to ``shell_data_file``: the loader then fails to map it and exits 127)."""
    program = argv[0]
    allowed = (facts.get("native_library_dir", "\0") + "/", *SYSTEM_DIRS)
    if not os.path.normpath(program).startswith(allowed):
        detail = f'Cannot run program "{program}": error=13, Permission denied (emulated SELinux: ' \
                 f"an app targeting API {facts.get('target_sdk', 29)} executes only its native libraries)"
        return {"aiot_reason": "start failed", "aiot_exit": "null", "aiot_lines": "0",
                "aiot_detail": _one_line(detail), "aiot_stderr": ""}
    for path in _loader_maps(argv):
        if os.path.normpath(path).startswith(SHELL_DATA + "/"):
            stderr = (f"{program}: error while loading {path}: failed to map segment from shared "
                      f"object: Permission denied (emulated SELinux: apps may not map executable "
                      f"code from {SHELL_DATA})")
            return {"aiot_reason": "exited", "aiot_exit": "127", "aiot_lines": "0",
                    "aiot_detail": "None", "aiot_stderr": _one_line(stderr)}
    return None


def _loader_maps(argv: list[str]) -> list[str]:
    """What a glibc loader run as ``argv`` maps executable: its --library-path dirs and the
    program (the first argument after its options); nothing for a program that is no loader."""
    if len(argv) < 2 or not argv[1].startswith("--"):
        return []
    maps, i = [], 1
    while i < len(argv) and argv[i].startswith("--"):
        if argv[i] in ("--library-path", "--preload", "--argv0", "--audit") and i + 1 < len(argv):
            if argv[i] != "--argv0":
                maps += [p for p in argv[i + 1].split(":") if p]
            i += 2
        else:
            i += 1
    return maps + argv[i:i + 1]


def _run_child(phone: Phone, package: str, argv: list[str], env: dict, cwd: str | None,
               timeout_ms: int) -> dict:
    """The spec's command inside the phone, its stdout relayed as statuses (AgentRunner's rules)."""
    command = build_command(argv, cwd=cwd, env=env, replace_shell=True)
    # Same process group as this handler: adbd kills the group when the host goes away.
    proc = subprocess.Popen([str(phone.enter), command], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    phone.running.mkdir(exist_ok=True)
    marker = phone.running / f"{package}.{os.getpid()}"
    marker.write_text(str(proc.pid))
    tail: list[bytes] = []
    drain = threading.Thread(target=lambda: tail.append(proc.stderr.read()), daemon=True)
    drain.start()
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        proc.kill()

    timer = threading.Timer(timeout_ms / 1000, expire)
    timer.start()
    lines, reason, detail = 0, "exited", None
    try:
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            try:
                _status(line)
            except (BrokenPipeError, OSError) as exc:  # the host is gone
                reason, detail = "host disconnected", str(exc)
                proc.kill()
                break
            lines += 1
        code = proc.wait()
    finally:
        timer.cancel()
        marker.unlink(missing_ok=True)
    if reason == "exited" and expired.is_set():
        reason, detail = "timeout", f"ran over {timeout_ms} ms"
    drain.join(2)
    stderr = b"".join(tail).decode("utf-8", "replace")[-4000:]
    return {"aiot_reason": reason, "aiot_exit": str(code), "aiot_lines": str(lines),
            "aiot_detail": _one_line(str(detail)), "aiot_stderr": _one_line(stderr)}


def _status(line: str) -> None:
    chunks = [line[i:i + CHUNK] for i in range(0, len(line), CHUNK)] or [""]
    for n, chunk in enumerate(chunks):
        text = f"INSTRUMENTATION_STATUS: aiot={chunk}\n"
        if n < len(chunks) - 1:
            text += "INSTRUMENTATION_STATUS: aiot_more=1\n"
        sys.stdout.write(text + "INSTRUMENTATION_STATUS_CODE: 1\n")
    sys.stdout.flush()


def _one_line(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def _finish(result: dict, code: int) -> None:
    for key in sorted(result):
        sys.stdout.write(f"INSTRUMENTATION_RESULT: {key}={result[key]}\n")
    sys.stdout.write(f"INSTRUMENTATION_CODE: {code}\n")
    sys.stdout.flush()


def _force_stop(phone: Phone, package: str) -> None:
    """Kill the commands instrumentations of ``package`` started (their whole process group)."""
    for marker in phone.running.glob(f"{package}.*") if phone.running.is_dir() else ():
        try:
            handler = int(marker.name.rsplit(".", 1)[1])
            os.killpg(os.getpgid(handler), signal.SIGKILL)
        except (ValueError, ProcessLookupError, PermissionError, OSError):
            pass
        marker.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--enter", type=Path, required=True)
    parser.add_argument("command")
    args = parser.parse_args(argv)
    words = shlex.split(args.command)
    phone = Phone(args.root, args.enter)
    return {"pm": pm, "am": am, "run-as": run_as}[words[0]](phone, words[1:])


if __name__ == "__main__":
    sys.exit(main())
