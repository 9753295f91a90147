"""The phone checks' parsers: page size from the auxiliary vector, ELF alignment, mounts."""

from __future__ import annotations

import struct
import sys

from aiot.host.devices.phone_checks import (
    _noexec_mount,
    elf_load_alignment,
    parse_auxv_page_size,
    parse_kernel_version,
)

#: ``od -An -tu8 -v /proc/self/auxv`` on a 16 KB-page phone (toybox prints two words a row).
AUXV_16K = """
                   33      281473093271552
                   16           3724541951
                    6                16384
                   17                  100
                    0                    0
"""


def test_page_size_from_auxv():
    assert parse_auxv_page_size(AUXV_16K) == 16384
    assert parse_auxv_page_size("  0 0\n") is None
    assert parse_auxv_page_size("od: /proc/self/auxv: Permission denied") is None


def _elf(aligns: list[int], kinds: list[int]) -> bytes:
    """A 64-bit little-endian ELF header with program headers of these types and alignments."""
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x20, 64)
    struct.pack_into("<HH", header, 0x36, 56, len(aligns))
    table = b"".join(struct.pack("<IIQQQQQQ", kind, 5, 0, 0, 0, 0, 0, align)
                     for kind, align in zip(kinds, aligns, strict=True))
    return bytes(header) + table


def test_elf_alignment_is_the_smallest_load_segment(tmp_path):
    lib = tmp_path / "libx.so"
    lib.write_bytes(_elf([0x10000, 0x1000, 0x4], [1, 1, 4]))  # two LOADs and a NOTE
    assert elf_load_alignment(lib) == 0x1000
    (tmp_path / "text.py").write_text("print('not ELF')\n")
    assert elf_load_alignment(tmp_path / "text.py") is None
    assert elf_load_alignment(sys.executable) >= 4096  # this machine's Python really is ELF


def test_noexec_mount_is_the_longest_prefix():
    mounts = ("/dev/root / ext4 rw,relatime 0 0\n"
              "/dev/block/dm-5 /data f2fs rw,nosuid,nodev,noatime 0 0\n"
              "tmpfs /data/media tmpfs rw,nosuid,nodev,noexec 0 0\n")
    assert not _noexec_mount(mounts, "/data/local/tmp/aiot")
    assert _noexec_mount(mounts, "/data/media/0/aiot")
    assert not _noexec_mount(mounts, "/data/mediax")


def test_kernel_versions():
    assert parse_kernel_version("5.15.94-android14-11-g3b5e8a7c1d2f") == (5, 15)
    assert parse_kernel_version("3.4.0-perf") == (3, 4)
    assert parse_kernel_version("unknown") is None
