"""The runtime's glibc made fit for the Android app's seccomp filter.

Every process an app starts carries the app seccomp filter: the system calls bionic makes
(its ``SYSCALLS.TXT`` plus allowlists) pass, any other gets ``SIGSYS`` (``SECCOMP_RET_TRAP``),
which kills a program that does not handle it. Debian's glibc 2.36 makes two such calls on
aarch64 before any code of ours runs: ``set_robust_list`` and ``rseq``, in the loader while it
starts (``__tls_init_tp``) and in libc for each new thread and fork. Neither is needed to
measure a model (robust futexes and restartable sequences only speed up rare paths), and glibc
copes with either failing with ``ENOSYS``, as on an old kernel.

So for the app, the loader and libc are patched where they make those calls: each
``svc #0`` whose system call number was just set by ``mov w8, #NR`` (NR one of
:data:`TRAPPED`) becomes ``mov x0, #-ENOSYS``, one instruction for another, nothing moved.
A site is patched only when the instruction that last set ``x8`` before the ``svc`` is that
``mov``; where anything else set it, the site is left alone (counted, so a glibc built another
way is refused, not half patched). What libraries still make through ``syscall()`` (OpenBLAS's
``mbind``) the agent skips with a ``SIGSYS`` handler (``device_agent/seccomp.py``).
"""

from __future__ import annotations

import struct

from aiot.core.errors import AiotError

#: aarch64 system call numbers the app filter traps and glibc makes on its own.
TRAPPED = {"set_robust_list": 99, "rseq": 293}
#: Bump when what is patched changes: the app's APK and its copy of libc are rebuilt.
PATCH_VERSION = 1

_SVC0 = 0xD4000001
_MOV_X0_ENOSYS = 0x928004A0  # movn x0, #37: x0 = -38 = -ENOSYS
_LOOKBACK = 8  # instructions between setting x8 and the svc (arguments are set in between)
_PT_LOAD, _PF_X = 1, 1
_EM_AARCH64 = 183


class PatchError(AiotError):
    """A loader or libc that cannot be made fit for the app's filter."""


def patch_syscalls(data: bytes, what: str) -> tuple[bytes, dict[str, int]]:
    """``data`` (an aarch64 ELF file) with each trapped system call site made to fail with
    ENOSYS; returns the new bytes and how many sites of each call were patched.

    Raises:
        PatchError: not a 64-bit little-endian aarch64 ELF file, or a damaged one.
    """
    if len(data) < 64 or not is_aarch64_elf(data):
        raise PatchError(f"{what} is not a 64-bit aarch64 ELF file")
    out = bytearray(data)
    counts = {name: 0 for name in TRAPPED}
    numbers = {nr: name for name, nr in TRAPPED.items()}
    for start, end in _executable_ranges(data, what):
        for offset in range(start, end - 3, 4):
            if struct.unpack_from("<I", data, offset)[0] != _SVC0:
                continue
            nr = _x8_constant(data, offset, start)
            if nr in numbers:
                struct.pack_into("<I", out, offset, _MOV_X0_ENOSYS)
                counts[numbers[nr]] += 1
    return bytes(out), counts


def is_aarch64_elf(head: bytes) -> bool:
    """Whether ``head`` (at least the first 20 bytes of a file) starts a 64-bit little-endian
    aarch64 ELF file."""
    return (len(head) >= 20 and head[:4] == b"\x7fELF" and head[4] == 2 and head[5] == 1
            and struct.unpack_from("<H", head, 18)[0] == _EM_AARCH64)


def require_patched(counts: dict[str, int], what: str, need: tuple[str, ...] = ("set_robust_list",)) -> None:
    """Refuse a file where a call the app filter traps was not found to patch.

    Raises:
        PatchError: none of the ``need`` calls' sites was found.
    """
    missing = [name for name in need if not counts.get(name)]
    if missing:
        raise PatchError(f"found no {', '.join(missing)} call to disable in {what}: under the "
                         f"app's seccomp filter it would die at start", "use --via shell on this phone")


def _executable_ranges(data: bytes, what: str) -> list[tuple[int, int]]:
    """File offsets of the executable LOAD segments.

    Raises:
        PatchError: the program headers lie outside the file.
    """
    phoff = struct.unpack_from("<Q", data, 0x20)[0]
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    if phentsize < 56 or phoff + phnum * phentsize > len(data):
        raise PatchError(f"{what} is a damaged ELF file (program headers out of bounds)")
    ranges = []
    for i in range(phnum):
        p_type, p_flags, p_offset, _vaddr, _paddr, p_filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + i * phentsize)
        if p_type == _PT_LOAD and p_flags & _PF_X:
            ranges.append((p_offset - p_offset % 4, min(len(data), p_offset + p_filesz)))
    return ranges


def _x8_constant(data: bytes, svc: int, start: int) -> int | None:
    """The constant ``mov w8|x8, #imm`` put in x8 before the ``svc`` at ``svc``, or None when
    the last instruction writing register 8 is something else (or none is near)."""
    for back in range(1, _LOOKBACK + 1):
        at = svc - 4 * back
        if at < start:
            return None
        word = struct.unpack_from("<I", data, at)[0]
        if word & 0x1F != 8:  # does not name register 8 where most instructions put Rd/Rt
            continue
        # MOVZ (32 or 64 bit), shift 0: sf 10 100101 00 imm16 Rd
        if word & 0x7FE00000 == 0x52800000:
            return (word >> 5) & 0xFFFF
        return None
    return None
