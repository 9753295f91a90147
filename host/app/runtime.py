"""aiot's aarch64 runtime as the Android app starts it: the loader from the APK, the rest from
the app's own files.

On Android 10+ an app targeting API 29+ may ``exec()`` only files Android extracted from its
APK into its native-library dir (SELinux ``apk_data_file``); files in its data dir
(``app_data_file``) it may map executable (``dlopen``, glibc's loader mapping a program) but
not ``exec()``; and files the shell pushed to ``/data/local/tmp`` (``shell_data_file``) it may
only read, never map executable. So the runtime the shell path starts from
``/data/local/tmp/aiot`` cannot run from an app as it lies. Instead:

* the one file executed, the runtime's glibc loader, travels in the APK as
  ``lib/arm64-v8a/libaiot_ld_<tree>.so`` (:func:`aiot.host.app.build.build_for_runtime`,
  pulled from the phone's own tree so loader and libc are the same build);
* the rest of the tree (CPython, its libraries and packages) is copied once into the app's
  ``files/aiot-runtime/<tree>`` by ``run-as`` (the APK is debuggable for this), which the
  loader maps from there (:func:`stage`);
* the agent's code, specs and models stay in ``/data/local/tmp/aiot``, which the app reads.

The host writes the app's folders as placeholders (``{native_lib_dir}``, ``{files_dir}``) the
app fills in (``RunSpec.expand``): only the app knows them.
"""

from __future__ import annotations

import posixpath
import tempfile
from dataclasses import dataclass
from pathlib import Path

from aiot.core.errors import AiotError
from aiot.host.app.build import PACKAGE, app_dir, build, build_for_runtime, loader_name
from aiot.host.app.instrument import AppError, install
from aiot.host.app.seccomp import PATCH_VERSION, is_aarch64_elf, patch_syscalls, require_patched
from aiot.host.devices import android_runtime as rt
from aiot.host.devices.checks import Check, last_line
from aiot.host.devices.deploy import push_file
from aiot.host.transports.quoting import quote

#: Where staged trees go: under the app's files dir, so relative to its data dir
#: (``run-as``'s working dir) ``files/aiot-runtime``.
TREES_IN_FILES = "aiot-runtime"
APP_TREES = f"files/{TREES_IN_FILES}"
#: A loader is an ELF file of a few hundred KB; anything far bigger is not one.
MAX_LOADER_BYTES = 16 * 1024 * 1024
#: What the staging script says it did.
PRESENT, COPIED = "aiot-runtime-present", "aiot-runtime-copied"


@dataclass(frozen=True)
class AppRuntime:
    """The aiot runtime of one phone, as the app runs it.

    Attributes:
        tree: the tree's id (folder name under ``runtime/aiot-aarch64-glibc``).
        python: the shell path's ``bin/python3`` of that tree on the phone.
    """

    tree: str
    python: str

    @property
    def device_root(self) -> str:
        """The shell's copy of the tree on the phone."""
        return posixpath.dirname(posixpath.dirname(self.python))

    @property
    def app_root(self) -> str:
        """The app's copy, as a placeholder path the app fills in."""
        return f"{{files_dir}}/{TREES_IN_FILES}/{self.tree}"

    def command(self, argv: list[str], env: dict[str, str]) -> tuple[list[str], dict]:
        """The app's form of a shell command ``[bin/python3, *args]``: what ``bin/python3``
        would run (the loader, its library path, CPython, the same environment), with the
        loader from the native-library dir and the tree from the app's files. HOME and TMPDIR
        are left to the app (its own folders: it may not write to /data/local/tmp)."""
        root = self.app_root
        library_path = ":".join(f"{root}/{d}" for d in rt.LIBRARY_DIRS)
        out = ["{native_lib_dir}/" + loader_name(self.tree), "--library-path", library_path,
               f"{root}/{rt.INTERPRETER}", *argv[1:]]
        environment: dict = {k: v for k, v in env.items() if k not in ("HOME", "TMPDIR")}
        environment.update({name: None for name in rt.CLEARED_ENV})
        environment.update(rt.FIXED_ENV)
        environment["AIOT_RUNTIME"] = f"{rt.RUNTIME_NAME}:{self.tree}"
        # The app's seccomp filter (see aiot.host.app.seccomp): glibc registers no rseq area
        # (its calls are patched out too), and the agent skips what libraries still trap.
        environment["GLIBC_TUNABLES"] = "glibc.pthread.rseq=0"
        environment["AIOT_SIGSYS"] = "skip"
        return out, environment


def for_device(transport) -> AppRuntime | None:
    """The phone's aiot runtime, or None when its agent Python is not aiot's runtime (the app
    then starts that Python as the shell does)."""
    python = transport.python()
    tree = rt.tree_id(python)
    return AppRuntime(tree, python) if tree else None


def pull_loader(transport, runtime: AppRuntime, folder: Path) -> Path:
    """The runtime's glibc loader, pulled from the phone's tree into ``folder``.

    Raises:
        AppError: the tree has no loader, or what came back is no aarch64 ELF file.
    """
    return pull_tree_file(transport, runtime, rt.LOADER, folder)[0]


def pull_tree_file(transport, runtime: AppRuntime, rel: str, folder: Path) -> tuple[Path, str]:
    """A file of the phone's runtime tree (symlinks resolved on the phone, within the tree),
    pulled into ``folder`` and checked to be an aarch64 ELF file; returns the local copy and
    the resolved file's path relative to the tree.

    Raises:
        AppError: it is missing, lies outside the tree, or is no aarch64 ELF file.
    """
    remote = posixpath.join(runtime.device_root, rel)
    resolved = _resolve(transport, runtime, remote)
    folder.mkdir(parents=True, exist_ok=True)
    local = folder / posixpath.basename(resolved)
    try:
        transport.pull(resolved, local)
    except (AiotError, OSError) as exc:  # the link, the phone's file, or this disk
        raise AppError(f"cannot pull {remote} of the runtime from {transport.name}: {exc}",
                       f"set the phone up again: aiot devices setup {transport.name}") from exc
    _check_loader(local, remote, transport.name)
    return local, posixpath.relpath(resolved, runtime.device_root)


def _resolve(transport, runtime: AppRuntime, remote: str) -> str:
    """``remote`` with its symlinks resolved on the phone; it must stay inside the tree."""
    done = transport.shell(["readlink", "-f", remote], timeout=60)
    resolved = done.stdout.strip().splitlines()[-1] if done.ok and done.stdout.strip() else remote
    if not posixpath.normpath(resolved).startswith(runtime.device_root + "/"):
        raise AppError(f"{remote} on {transport.name} leads out of the runtime's tree ({resolved[:200]})",
                       f"set the phone up again: aiot devices setup {transport.name}")
    return resolved


def _check_loader(path: Path, remote: str, device: str) -> None:
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(20)
    if size > MAX_LOADER_BYTES or not is_aarch64_elf(head):
        path.unlink(missing_ok=True)
        raise AppError(f"{remote} on {device} is not an aarch64 ELF file ({size} bytes)",
                       f"set the phone up again: aiot devices setup {device}")


def stage_mark() -> str:
    """What a complete copy's marker holds: a copy made under other patches is made again."""
    return f"aiot-app-runtime patch {PATCH_VERSION}"


def check_script(runtime: AppRuntime) -> str:
    """``sh`` for ``run-as`` in the app's data dir: says PRESENT when the copy is complete."""
    marker = posixpath.join(APP_TREES, runtime.tree, rt.COMPLETE)
    return f"if [ \"$(cat {quote(marker)} 2>/dev/null)\" = {quote(stage_mark())} ]; then echo {PRESENT}; fi"


def stage_script(runtime: AppRuntime, libc: str, libc_rel: str) -> str:
    """The ``sh`` script ``run-as`` runs in the app's data dir: copy the shell's tree into the
    app's files with the patched libc (pushed to ``libc``) put at ``libc_rel``, beside the
    target then renamed, marker last; older trees go (each is ~150 MB of the phone's storage)."""
    trees, target = APP_TREES, posixpath.join(APP_TREES, runtime.tree)
    part = target + ".part"
    return (f"set -e; rm -rf {quote(part)}; mkdir -p {quote(trees)}; "
            f"cp -RP {quote(runtime.device_root)} {quote(part)}; "
            f"rm -f {quote(part)}/bin/python3 {quote(part)}/{rt.COMPLETE} {quote(part + '/' + libc_rel)}; "
            f"cp {quote(libc)} {quote(part + '/' + libc_rel)}; chmod 755 {quote(part + '/' + libc_rel)}; "
            f"echo {quote(stage_mark())} > {quote(part)}/{rt.COMPLETE}; "
            f"rm -rf {quote(target)}; mv {quote(part)} {quote(target)}; "
            f"for old in {quote(trees)}/*; do [ \"$old\" = {quote(target)} ] || rm -rf \"$old\"; done; "
            f"echo {COPIED}")


def stage(transport, runtime: AppRuntime) -> bool:
    """Copy the runtime into the app's files, its libc patched for the app's seccomp filter
    (once per tree and patch); True when it copied now.

    Raises:
        AppError: the app is not installed or not debuggable (``run-as`` refuses), the copy
            failed (the phone's storage, most likely), or its libc cannot be patched.
    """
    done = _run_as(transport, check_script(runtime), timeout=60)
    if PRESENT in done.stdout:
        return False
    libc_rel = posixpath.join(rt.LIBRARY_DIRS[0], "libc.so.6")
    with tempfile.TemporaryDirectory(dir=app_dir(), prefix="libc-") as tmp:
        original, resolved_rel = pull_tree_file(transport, runtime, libc_rel, Path(tmp) / "pulled")
        patched, counts = patch_syscalls(original.read_bytes(), f"{runtime.tree}'s libc")
        require_patched(counts, f"{runtime.tree}'s libc")
        local = Path(tmp) / "libc.so.6"
        local.write_bytes(patched)
        pushed = push_file(transport, local)
    _let_the_app_read(transport, runtime.device_root, pushed.remote)
    done = _run_as(transport, stage_script(runtime, pushed.remote, resolved_rel), timeout=1800)
    if COPIED not in done.stdout:
        text = last_line(done)
        raise AppError(f"cannot copy the runtime into the app on {transport.name}: {text[:300]}",
                       f"free ~200 MB on the phone, then run: aiot app install {transport.name}")
    return True


def _let_the_app_read(transport, tree: str, libc: str) -> None:
    """Make what ``run-as`` copies readable to the app's uid (the shell user pushed it): the
    tree and the patched libc, and every folder above them inside the work dir searchable.

    Raises:
        AppError: chmod failed.
    """
    workdir = transport.workdir().rstrip("/")
    folders = set()
    for path in (tree, posixpath.dirname(libc)):
        while path.startswith(workdir + "/"):
            folders.add(path)
            path = posixpath.dirname(path)
    folders.add(workdir)
    script = (f"chmod a+x {' '.join(quote(f) for f in sorted(folders))} && "
              f"chmod -R a+rX {quote(tree)} && chmod a+r {quote(libc)}")
    done = transport.shell(["sh", "-c", script], timeout=300)
    if not done.ok:
        text = last_line(done)
        raise AppError(f"cannot make the runtime readable to the app on {transport.name}: {text[:300]}")


def _run_as(transport, script: str, timeout: float):
    """``run-as`` the app with ``script``; refusals of run-as itself are one line with the fix.

    Raises:
        AppError: the app is not installed or not debuggable.
    """
    done = transport.shell(["run-as", PACKAGE, "sh", "-c", script], timeout=timeout)
    if done.ok:
        return done
    text = last_line(done)
    if "unknown package" in text or "not installed" in text or "not debuggable" in text:
        raise AppError(f"run-as {PACKAGE} on {transport.name}: {text[:300]}",
                       f"install the app (debuggable, with this phone's runtime): "
                       f"aiot app install {transport.name}")
    return done


def install_app(transport, progress=None) -> dict:
    """Build the APK this phone needs and install it: with its runtime's loader when it has
    aiot's runtime (then the tree is staged into the app's files at once), else the plain app.
    Returns what :func:`aiot.host.app.instrument.install` says, plus the runtime's part.

    Raises:
        AppError, SdkError, AppBuildError: a step failed.
    """
    runtime = for_device(transport)
    if runtime is None:
        return {**install(transport, build(progress=progress)), "runtime_tree": None}
    with tempfile.TemporaryDirectory(dir=app_dir(), prefix="loader-") as tmp:
        if progress:
            progress(f"pulling runtime {runtime.tree}'s loader from {transport.name}")
        loader = pull_loader(transport, runtime, Path(tmp))
        meta = build_for_runtime(loader, runtime.tree, progress=progress)
    done = install(transport, meta)
    if progress:
        progress("copying the runtime into the app's files (once per runtime)")
    copied = stage(transport, runtime)
    return {**done, "runtime_tree": runtime.tree, "native_library": meta["native_library"],
            "runtime_copied": copied}


def check_app(transport) -> Check:
    """``devices doctor``'s verdict on ``--via app`` for a phone: is the app installed, may the
    host ``run-as`` it, is the phone's runtime in its files. Never a failure (the shell path
    does not need the app), a warning with the fix where something is missing."""
    listed = transport.shell(["pm", "list", "packages"], timeout=60)
    if not listed.ok:
        return Check("app", True, f"pm does not answer: {(listed.stderr or listed.stdout).strip()[:200]}",
                     warn=True)
    if f"package:{PACKAGE}" not in listed.stdout.split():
        return Check("app", True, "the aiot app is not installed (only --via app needs it)",
                     f"aiot app install {transport.name}", warn=True)
    runtime = for_device(transport)
    if runtime is None:
        return Check("app", True, "installed; it starts the device's own Python")
    done = transport.shell(["run-as", PACKAGE, "sh", "-c", check_script(runtime)], timeout=60)
    if PRESENT in done.stdout:
        return Check("app", True, f"installed; runtime {runtime.tree} is in its files")
    why = (done.stderr.strip() or done.stdout.strip()).splitlines()
    detail = (f"run-as refused: {why[-1][:200]}" if why and "run-as" in why[-1]
              else f"runtime {runtime.tree} is not in the app's files")
    return Check("app", True, f"installed, but {detail}", f"aiot app install {transport.name}", warn=True)
