"""The runtime made fit for the Android app's seccomp filter: the loader/libc patcher on
synthetic aarch64 code, and the agent's SIGSYS handler under a real RET_TRAP filter (x86_64)."""

from __future__ import annotations

import platform
import struct
import subprocess
import sys
import textwrap

import pytest

from aiot.host.app.seccomp import PatchError, patch_syscalls, require_patched

SVC = 0xD4000001
ENOSYS = 0x928004A0


def movz(reg: int, imm: int, wide: bool = False) -> int:
    return (0xD2800000 if wide else 0x52800000) | (imm << 5) | reg


MOV_X0_X1 = 0xAA0103E0  # orr x0, xzr, x1
LDR_X8 = 0xF9400008  # ldr x8, [x0]
NOP = 0xD503201F


def elf(code: list[int], executable: bool = True) -> bytes:
    """A minimal aarch64 ELF: header, one LOAD segment holding ``code``."""
    body = struct.pack(f"<{len(code)}I", *code)
    header = bytearray(64)
    header[:8] = b"\x7fELF\x02\x01\x01\x00"
    struct.pack_into("<HHI", header, 16, 3, 183, 1)
    struct.pack_into("<Q", header, 0x20, 64)  # e_phoff
    struct.pack_into("<HH", header, 0x36, 56, 1)  # e_phentsize, e_phnum
    phdr = struct.pack("<IIQQQQQQ", 1, 5 if executable else 4, 120, 0, 0, len(body), len(body), 0x1000)
    return bytes(header) + phdr + body


def words(data: bytes) -> list[int]:
    return list(struct.unpack_from(f"<{(len(data) - 120) // 4}I", data, 120))


def test_trapped_calls_become_enosys_and_nothing_else_moves():
    code = [movz(8, 99), MOV_X0_X1, NOP, SVC,          # set_robust_list, arguments in between
            movz(8, 293, wide=True), SVC,              # rseq, mov x8
            movz(8, 64), SVC,                          # write: left alone
            movz(8, 99), LDR_X8, SVC,                  # x8 last set by a load: left alone
            SVC]                                       # no x8 in sight: left alone
    patched, counts = patch_syscalls(elf(code), "test")
    assert counts == {"set_robust_list": 1, "rseq": 1}
    out = words(patched)
    assert out[3] == ENOSYS and out[5] == ENOSYS
    assert [w for i, w in enumerate(out) if i not in (3, 5)] == [w for i, w in enumerate(code) if i not in (3, 5)]
    assert len(patched) == len(elf(code))


def test_only_executable_segments_are_touched():
    data = elf([movz(8, 99), SVC], executable=False)
    assert patch_syscalls(data, "data") == (data, {"set_robust_list": 0, "rseq": 0})


def test_a_file_without_the_call_or_not_aarch64_is_refused():
    _, counts = patch_syscalls(elf([movz(8, 64), SVC]), "test")
    with pytest.raises(PatchError, match="found no set_robust_list call"):
        require_patched(counts, "a loader")
    x86 = bytearray(elf([NOP]))
    struct.pack_into("<H", x86, 18, 62)
    with pytest.raises(PatchError, match="not a 64-bit aarch64 ELF"):
        patch_syscalls(bytes(x86), "x86 loader")
    damaged = bytearray(elf([NOP]))
    struct.pack_into("<Q", damaged, 0x20, 1 << 40)
    with pytest.raises(PatchError, match="damaged ELF"):
        patch_syscalls(bytes(damaged), "damaged loader")


CHILD = textwrap.dedent("""
    import ctypes, os, struct, sys
    sys.path.insert(0, {agent_parent!r})
    if sys.argv[1] == "handler":
        os.environ["AIOT_SIGSYS"] = "skip"
        from device_agent import seccomp
        assert seccomp.install_from_env()
    libc = ctypes.CDLL(None, use_errno=True)
    # BPF: x86_64 only; mbind (237) -> SECCOMP_RET_TRAP, everything else allowed.
    insns = [(0x20, 0, 0, 4), (0x15, 0, 3, 0xC000003E), (0x20, 0, 0, 0), (0x15, 0, 1, 237),
             (0x06, 0, 0, 0x00030000), (0x06, 0, 0, 0x7FFF0000)]
    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]
    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]
    array = (Filter * len(insns))(*[Filter(*i) for i in insns])
    prog = Prog(len(insns), array)
    assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
    assert libc.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0, ctypes.get_errno()  # SECCOMP_MODE_FILTER
    libc.syscall(237, 0, 0, 0, 0, 0, 0)  # mbind, as OpenBLAS makes it
    libc.syscall(237, 0, 0, 0, 0, 0, 0)
    if sys.argv[1] == "handler":
        print("alive", seccomp.skipped())
    else:
        print("alive")
""")


@pytest.mark.skipif(platform.machine() != "x86_64" or not sys.platform.startswith("linux"),
                    reason="the test filter is written for x86_64 Linux")
def test_the_agents_handler_survives_a_call_the_filter_traps(tmp_path):
    from aiot.core.paths import source_root

    script = tmp_path / "child.py"
    script.write_text(CHILD.format(agent_parent=str(source_root())))
    bare = subprocess.run([sys.executable, str(script), "bare"], capture_output=True, text=True, timeout=60, check=False)
    assert bare.returncode == -31 and "alive" not in bare.stdout  # killed by SIGSYS, as on a phone
    handled = subprocess.run([sys.executable, str(script), "handler"], capture_output=True, text=True, timeout=60, check=False)
    assert handled.returncode == 0, handled.stderr
    assert handled.stdout.split()[0] == "alive" and int(handled.stdout.split()[1]) >= 1
