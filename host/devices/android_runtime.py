"""aiot's own aarch64 runtime for phones without Python: glibc, CPython 3.11 and the agent's
runtimes as one relocatable tree, pushed once and started through its own loader.

Android has no glibc and no ``/lib/ld-linux-aarch64.so.1``, so a glibc program cannot be
exec'd there directly. The tree carries the loader, and its ``bin/python3`` (a ``/system/bin/sh``
script) starts ``ld-linux-aarch64.so.1 --library-path ... python3.11``, with what Android lacks
set in the environment (HOME, TMPDIR; no ``LD_PRELOAD`` of bionic libraries). The tree is cut
from the same Debian arm64 userland that backs ``aiot emulator start --arch arm64``
(:func:`aiot.host.emulator.arm64.ensure_userland`): only the interpreter, the stdlib the agent
and its runtimes import, their shared libraries and the runtimes' packages.

It travels as one ``.tar.gz``, content-addressed like every blob (a second set-up sends 0
bytes), checked by sha256 on the device before it is unpacked into
``<workdir>/runtime/aiot-aarch64-glibc/<hash>``; a ``.complete`` marker goes in last, so an
interrupted set-up is redone, never trusted. A glibc process cannot load Android's bionic
libraries: NNAPI, GPU and vendor delegates stay with native binaries (``--native``).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import posixpath
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiot.core.errors import AiotError
from aiot.core.fileio import sha256_file, write_text_atomic
from aiot.core.units import size_text
from aiot.host.devices.deploy import push_file, require_space, unpack_failure
from aiot.host.devices.phone_checks import elf_load_alignment
from aiot.host.transports.quoting import quote

log = logging.getLogger(__name__)

RUNTIME_NAME = "aiot-aarch64-glibc"
#: Bump when what goes into the tree changes: the archive's cache key includes it.
LAYOUT_VERSION = 2
COMPLETE = ".complete"

#: Parts of the userland the agent never needs (tests, tools, GUI, compilers' data), by
#: path prefix inside the userland root. What stays is what imports needed.
_PRUNE = (
    "usr/lib/python3.11/test/", "usr/lib/python3.11/idlelib/", "usr/lib/python3.11/tkinter/",
    "usr/lib/python3.11/ensurepip/", "usr/lib/python3.11/lib2to3/",
    "usr/lib/python3.11/pydoc_data/",
    "usr/lib/python3.11/turtledemo/", "usr/lib/python3.11/unittest/test/",
    "usr/lib/python3.11/distutils/", "usr/lib/python3.11/config-3.11-aarch64-linux-gnu/",
    "usr/lib/python3/dist-packages/onnxruntime/transformers/",
    "usr/lib/python3/dist-packages/onnxruntime/quantization/",
    "usr/lib/python3/dist-packages/onnxruntime/tools/",
    "usr/lib/python3/dist-packages/onnxruntime/datasets/",
    "usr/lib/python3/dist-packages/numpy/_core/tests/",
    "usr/lib/python3/dist-packages/numpy/tests/", "usr/lib/python3/dist-packages/numpy/f2py/",
    "usr/lib/python3/dist-packages/numpy/typing/tests/",
    "usr/lib/aarch64-linux-gnu/gconv/",
    # A glibc process reaches no GPU (the phone's drivers are bionic libraries): no WebGPU
    # accelerator. The Python module links ONNX Runtime statically: no libonnxruntime.so.
    # Converting and GenAI ops are no part of measuring.
    "usr/lib/python3/dist-packages/ai_edge_litert/libLiteRtWebGpuAccelerator.so",
    "usr/lib/python3/dist-packages/onnxruntime/capi/libonnxruntime.so",
    "usr/lib/python3/dist-packages/ai_edge_litert/pywrap_genai_ops.so",
    "usr/lib/python3/dist-packages/ai_edge_litert/_pywrap_litert_converter.so",
)
_KEEP_DIRS = ("lib/", "usr/bin/python3.11", "usr/lib/python3.11/", "usr/lib/python3/dist-packages/",
              "usr/lib/aarch64-linux-gnu/")

#: Inside the tree: glibc's loader, the directories it searches, CPython. ``bin/python3``
#: below starts the three from the shell; the Android app starts them itself
#: (:mod:`aiot.host.app.runtime`), the loader from the APK's native-library dir.
LOADER = "lib/ld-linux-aarch64.so.1"
LIBRARY_DIRS = ("lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu")
INTERPRETER = "usr/bin/python3.11"
#: What ``bin/python3`` clears and sets for CPython (HOME and TMPDIR aside: where they go
#: depends on who starts it).
CLEARED_ENV = ("LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME")
FIXED_ENV = {"PYTHONNOUSERSITE": "1", "PYTHONUTF8": "1", "LANG": "C.UTF-8"}

#: ``bin/python3`` of the tree: the tree's own loader runs its CPython, from wherever it lies.
WRAPPER = """#!/system/bin/sh
# aiot's aarch64 runtime: glibc's loader from this tree runs this tree's CPython (Android has
# no glibc). HOME and TMPDIR go under the work dir; bionic preloads must not reach glibc.
R="$(cd "$(dirname "$0")/.." && pwd)"
W="$(cd "$R/../../.." && pwd)"
mkdir -p "$W/home" "$W/tmp"
unset LD_PRELOAD LD_LIBRARY_PATH PYTHONPATH PYTHONHOME
export HOME="$W/home" TMPDIR="$W/tmp" PYTHONNOUSERSITE=1 PYTHONUTF8=1 LANG=C.UTF-8
export AIOT_RUNTIME="{name}:$(basename "$R")"
exec "$R/lib/ld-linux-aarch64.so.1" \\
  --library-path "$R/lib/aarch64-linux-gnu:$R/usr/lib/aarch64-linux-gnu" \\
  "$R/usr/bin/python3.11" "$@"
"""


@dataclass(frozen=True)
class RuntimeArchive:
    """The packed tree: the file to push, its hash, and what is in it."""

    path: Path
    sha256: str
    size_bytes: int  # compressed, what a first set-up sends
    tree_bytes: int  # unpacked, what it takes on the device
    files: int
    load_align: int | None = None  # smallest LOAD alignment of its ELF files: the largest page size


def archive_runtime(userland: Path, cache: Path, extras: tuple[str, ...] = ()) -> RuntimeArchive:
    """The runtime archive cut from ``userland`` (built once, cached beside it).

    Args:
        userland: an :func:`~aiot.host.emulator.arm64.ensure_userland` folder.
        extras: what the userland was built with (recorded, part of the cache key).
    """
    key = hashlib.sha256(json.dumps([userland.name, LAYOUT_VERSION, sorted(extras)]).encode())
    folder = cache / "android-runtime" / key.hexdigest()[:16]
    meta = folder / "runtime.json"
    if meta.exists():
        facts = json.loads(meta.read_text())
        if "load_align" not in facts:  # written before aiot recorded it
            facts["load_align"] = _load_alignment(userland / "root")
            _write_meta(meta, facts)
        return _archive(folder, facts)
    folder.mkdir(parents=True, exist_ok=True)
    part = folder / "runtime.tar.gz.part"
    tree_bytes, files = _write_archive(userland / "root", part)
    digest = sha256_file(part)
    final = folder / f"{RUNTIME_NAME}-{digest[:16]}.tar.gz"
    os.replace(part, final)
    facts = {"file": final.name, "sha256": digest, "size_bytes": final.stat().st_size,
             "tree_bytes": tree_bytes, "files": files, "extras": sorted(extras),
             "load_align": _load_alignment(userland / "root")}
    _write_meta(meta, facts)
    return _archive(folder, facts)


def cached_load_alignment(cache: Path) -> int | None:
    """The smallest library alignment of any runtime built on this host, or None (none built):
    what ``devices doctor`` compares a phone's page size with."""
    aligns = []
    for meta in (cache / "android-runtime").glob("*/runtime.json"):
        align = json.loads(meta.read_text()).get("load_align")
        if align:
            aligns.append(align)
    return min(aligns) if aligns else None


def _archive(folder: Path, facts: dict) -> RuntimeArchive:
    return RuntimeArchive(folder / facts["file"], facts["sha256"], facts["size_bytes"], facts["tree_bytes"],
                          facts["files"], facts.get("load_align"))


def _write_meta(meta: Path, facts: dict) -> None:
    write_text_atomic(meta, json.dumps(facts) + "\n")


def _load_alignment(root: Path) -> int | None:
    """The smallest LOAD alignment over the tree's ELF files (programs and libraries)."""
    aligns = []
    for dirpath, _dirs, filenames in os.walk(root):
        for name in filenames:
            path = Path(dirpath) / name
            if path.is_symlink() or not _wanted(path.relative_to(root).as_posix()):
                continue
            if name.endswith(".so") or ".so." in name or name.startswith(("python3", "ld-linux")):
                align = elf_load_alignment(path)
                if align:
                    aligns.append(align)
    return min(aligns) if aligns else None


def _wanted(rel: str) -> bool:
    if any(rel.startswith(p) for p in _PRUNE) or "/__pycache__/" in f"/{rel}":
        return False
    return any(rel.startswith(k) or rel == k.rstrip("/") for k in _KEEP_DIRS)


def _write_archive(root: Path, out: Path) -> tuple[int, int]:
    """Tar the wanted part of ``root`` (sorted, fixed times: the same userland gives the same
    bytes) plus ``bin/python3``; returns (unpacked bytes, files)."""
    total = files = 0
    with tarfile.open(out, "w:gz", compresslevel=6) as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                path = Path(dirpath) / name
                rel = path.relative_to(root).as_posix()
                if not _wanted(rel):
                    continue
                info = tar.gettarinfo(str(path), arcname=rel)
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                if info.isreg():
                    with open(path, "rb") as fh:
                        tar.addfile(info, fh)
                    total += info.size
                else:
                    tar.addfile(info)
                files += 1
        wrapper = WRAPPER.format(name=RUNTIME_NAME).encode()
        info = tarfile.TarInfo("bin/python3")
        info.size, info.mode = len(wrapper), 0o755
        tar.addfile(info, io.BytesIO(wrapper))
    return total + len(wrapper), files + 1


def tree_id(python: str) -> str | None:
    """The tree's id (its folder: the archive hash's first 16 digits) when ``python`` is this
    runtime's ``bin/python3`` on a device, else None (the device has a Python of its own)."""
    parts = python.split("/")
    if len(parts) >= 4 and parts[-4] == RUNTIME_NAME and parts[-2:] == ["bin", "python3"]:
        return parts[-3]
    return None


def runtime_root(transport, archive: RuntimeArchive) -> str:
    """Where the tree lives on the device."""
    return posixpath.join(transport.workdir(), "runtime", RUNTIME_NAME, archive.sha256[:16])


def install_runtime(transport, archive: RuntimeArchive,
                    on_step: Callable[[str], None] = lambda step: None) -> dict:
    """Push and unpack the tree on the device unless it is there; returns what was done.

    Raises:
        DeviceCommandError: the pushed archive's hash differs, or unpacking failed.
        DeviceStorageError: the phone has not the space for it, or ran out unpacking it.
    """
    started = time.perf_counter()
    root = runtime_root(transport, archive)
    python = posixpath.join(root, "bin", "python3")
    if transport.exists(posixpath.join(root, COMPLETE)):
        return {"python": python, "root": root, "pushed_bytes": 0, "installed": False,
                "seconds": time.perf_counter() - started}
    require_space(transport, archive.size_bytes + archive.tree_bytes,
                  "the aarch64 runtime and its unpacked tree")
    on_step(f"pushing the aarch64 runtime ({size_text(archive.size_bytes)})")
    pushed = push_file(transport, archive.path, archive.sha256)
    on_step("checking and unpacking it on the device")
    # One shell line: hash check, unpack beside the target, marker last, then rename, so a
    # tree that is there was complete (toybox and busybox both have sha256sum and tar -z).
    # A failed unpack (a full disk) removes the partial tree and the archive: the phone is
    # left with the space it had.
    staging = root + ".part"
    script = (f"set -e; [ \"$(sha256sum {quote(pushed.remote)} | cut -d' ' -f1)\" = "
              f"{quote(archive.sha256)} ] || {{ echo 'runtime archive hash mismatch' >&2; "
              f"rm -f {quote(pushed.remote)}; exit 3; }}; rm -rf {quote(staging)}; "
              f"{{ mkdir -p {quote(staging)} && tar -xzf {quote(pushed.remote)} -C {quote(staging)} "
              f"&& chmod 755 {quote(staging + '/bin/python3')} "
              f"&& touch {quote(staging + '/' + COMPLETE)}; }} || {{ rm -rf {quote(staging)} "
              f"{quote(pushed.remote)}; echo 'unpacking failed; partial tree removed' >&2; exit 4; }}; "
              f"rm -rf {quote(root)}; mv {quote(staging)} {quote(root)}")
    done = transport.shell(["sh", "-c", script], timeout=1800)
    if not done.ok:
        raise unpack_failure(transport, done)
    return {"python": python, "root": root, "pushed_bytes": pushed.size if pushed.sent else 0,
            "installed": True, "seconds": time.perf_counter() - started}


def check_runtime(transport, python: str, modules: tuple[str, ...]) -> str:
    """Import ``modules`` with the pushed Python on the device; returns its platform line.

    Raises:
        AiotError: the runtime does not start or a module does not import, with its last line.
    """
    probe = ("import platform, importlib; "
             f"[importlib.import_module(m) for m in {list(modules)!r}]; "
             "print(platform.machine(), platform.libc_ver()[1])")
    done = transport.shell([python, "-c", probe], timeout=600)
    if not done.ok:
        last = (done.stderr.strip() or done.stdout.strip() or str(done.exit_code)).splitlines()[-1]
        raise AiotError(f"aiot's aarch64 runtime does not start on '{transport.name}': {last}",
                        f"run: aiot devices doctor {transport.name}")
    return done.stdout.strip().splitlines()[-1]
