"""What can stop aiot's aarch64 runtime on an Android phone, checked before it bites.

``aiot devices doctor`` runs these on ADB devices (see :mod:`aiot.host.devices.doctor`): each is a
shell one-liner that toybox (phones) and busybox (the emulated phone) both run, and each
failure comes with a fix. The runtime (:mod:`aiot.host.devices.android_runtime`) is a glibc tree
started through its own loader from the work dir, so what matters is: room for it, a work dir
whose files may be executed (no ``noexec`` mount, no SELinux denial), pages no larger than
its libraries' segment alignment (Android 15 devices may use 16 KB pages), and a kernel new
enough for its glibc.
"""

from __future__ import annotations

import posixpath
import re
import struct
import uuid
from pathlib import Path

from aiot.core.units import MIB, size_text
from aiot.host.devices.checks import Check, last_line, parse_df
from aiot.host.transports.base import Transport
from aiot.host.transports.quoting import quote

#: What a set-up needs in the work dir: the archive (~50 MB) and the unpacked tree (~150 MB).
RUNTIME_SPACE_MB = 250
#: glibc 2.36 (the runtime's, Debian bookworm) runs on Linux 3.7 or newer on aarch64.
MIN_KERNEL = (3, 7)
AT_PAGESZ = 6


def page_size(transport: Transport) -> int | None:
    """The device's page size from its auxiliary vector (``AT_PAGESZ``), read with ``od``."""
    done = transport.shell(["od", "-An", "-tu8", "-v", "/proc/self/auxv"], timeout=30)
    return parse_auxv_page_size(done.stdout) if done.ok else None


def parse_auxv_page_size(text: str) -> int | None:
    """``AT_PAGESZ`` from ``od -An -tu8`` of /proc/self/auxv (key, value pairs of u64)."""
    words = [int(w) for w in text.split() if w.isdigit()]
    for key, value in zip(words[::2], words[1::2], strict=False):
        if key == AT_PAGESZ:
            return value
    return None


def elf_load_alignment(path: Path) -> int | None:
    """The smallest ``p_align`` of a 64-bit little-endian ELF file's LOAD segments, or None
    for any other file. A library loads on a page size no larger than this."""
    with open(path, "rb") as fh:
        head = fh.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            return None
        phoff, = struct.unpack_from("<Q", head, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
        fh.seek(phoff)
        table = fh.read(phentsize * phnum)
    aligns = [struct.unpack_from("<Q", table, i * phentsize + 0x30)[0]
              for i in range(phnum) if struct.unpack_from("<I", table, i * phentsize)[0] == 1]
    return min(aligns) if aligns else None


def check_exec(transport: Transport) -> Check:
    """A program copied into the work dir runs: no ``noexec`` mount, no SELinux denial."""
    # A copy of the shell, still named sh: toybox and busybox pick their command by that name.
    folder = posixpath.join(transport.workdir(), f".aiot-exec-{uuid.uuid4().hex[:8]}")
    probe = posixpath.join(folder, "sh")
    script = ("for s in /system/bin/sh /bin/sh; do [ -x \"$s\" ] && break; done; "
              f"mkdir -p {quote(folder)} && cp \"$s\" {quote(probe)} && chmod 755 {quote(probe)} && "
              f"{quote(probe)} -c 'echo exec-ok'; rc=$?; rm -rf {quote(folder)}; exit $rc")
    done = transport.shell(["sh", "-c", script], timeout=30)
    if done.ok and "exec-ok" in done.stdout:
        return Check("exec", True, f"programs run from {transport.workdir()}")
    mounts = transport.shell(["cat", "/proc/mounts"], timeout=30).stdout
    if _noexec_mount(mounts, transport.workdir()):
        return Check("exec", False, f"{transport.workdir()} is on a noexec mount: {last_line(done)}",
                     f"use a work dir on an exec mount (/data/local/tmp on a phone): workdir = "
                     f"\"/data/local/tmp/aiot\" under [devices.{transport.name}]")
    enforce = transport.shell(["getenforce"], timeout=30).stdout.strip() or "unknown"
    return Check("exec", False, f"running a program from {transport.workdir()} was denied "
                 f"(SELinux {enforce}): {last_line(done)}",
                 "keep the work dir under /data/local/tmp, the one place adb shell may run programs")


def check_page_size(transport: Transport, alignment: int | None) -> Check:
    """The device's pages are no larger than the runtime's libraries are aligned to."""
    size = page_size(transport)
    if size is None:
        return Check("page size", True, "could not read AT_PAGESZ from /proc/self/auxv", warn=True)
    if alignment is not None and size > alignment:
        return Check("page size", False, f"{size // 1024} KiB pages, but the runtime's libraries are "
                     f"aligned to {alignment // 1024} KiB: glibc cannot map them",
                     "time this phone with a native benchmark binary built for 16 KiB pages (--native)")
    detail = f"{size // 1024} KiB pages" + (f" (libraries aligned to {alignment // 1024} KiB)" if alignment else "")
    return Check("page size", True, detail)


def check_kernel(transport: Transport) -> Check:
    """The kernel is new enough for the runtime's glibc."""
    release = transport.shell(["uname", "-r"], timeout=30).stdout.strip()
    version = parse_kernel_version(release)
    need = ".".join(map(str, MIN_KERNEL))
    if version is None:
        return Check("kernel", True, f"cannot read the kernel version from '{release}'", warn=True)
    if version < MIN_KERNEL:
        return Check("kernel", False, f"Linux {release}: the runtime's glibc needs {need} or newer",
                     "time this phone with a native benchmark binary (--native)")
    return Check("kernel", True, f"Linux {release} (glibc needs {need}+)")


def check_room(transport: Transport, installed: bool) -> Check:
    """Room in the work dir for the runtime, where it is not installed yet."""
    if installed:
        return Check("room for runtime", True, "aiot's runtime is installed")
    df = transport.shell(["df", "-Pk", transport.workdir()], timeout=30)
    free_kib = parse_df(df.stdout) if df.ok else None
    if free_kib is None:
        return Check("room for runtime", True, "df could not tell", warn=True)
    free = free_kib * 1024
    if free < RUNTIME_SPACE_MB * MIB:
        return Check("room for runtime", False, f"{size_text(free)} free; aiot's runtime needs "
                     f"{RUNTIME_SPACE_MB} MiB", "free space on the phone (Settings > Storage)")
    return Check("room for runtime", True, f"{size_text(free)} free, {RUNTIME_SPACE_MB} MiB needed")


def parse_kernel_version(release: str) -> tuple[int, int] | None:
    """``(5, 15)`` from ``5.15.94-android14-11-...``."""
    m = re.match(r"(\d+)\.(\d+)", release.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def _noexec_mount(mounts: str, path: str) -> bool:
    """Whether the longest mount point above ``path`` in /proc/mounts is mounted noexec."""
    best, options = "", ""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        point = fields[1]
        if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) > len(best):
            best, options = point, fields[3]
    return "noexec" in options.split(",")


def phone_checks(transport: Transport, installed: bool, alignment: int | None) -> list[Check]:
    """Every check above, in the order a set-up meets them."""
    return [check_room(transport, installed), check_exec(transport), check_page_size(transport, alignment),
            check_kernel(transport)]


__all__ = ["check_exec", "check_kernel", "check_page_size", "check_room", "elf_load_alignment",
           "page_size", "parse_auxv_page_size", "parse_kernel_version", "phone_checks"]
