"""Rows read straight from an SQLite file's pages, for a store SQLite can no longer walk.

When a store is truncated or overwritten, SQLite's own reads stop at the first page they
cannot use: a missing interior page hides every record below it, although the pages that
hold those records are intact. This reads the file the way SQLite's file format
(https://www.sqlite.org/fileformat.html) lays it out: every page, with the newest copy of
each page from the write-ahead log (``-wal``) laid over it, and from every table b-tree leaf
page the cells whose payload is whole (the leaf and all its overflow pages present). Each
row comes back as its rowid and column values; which table it belongs to is the caller's
judgement (here, by the shape of the row).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

from aiot.host.store.damage import SQLITE_HEADER

_TABLE_LEAF = 0x0D
_WAL_MAGIC = (0x377F0682, 0x377F0683)  # little- and big-endian checksums
_INT_SIZES = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8}


class Unreadable(ValueError):
    """A cell or record that does not decode (damaged bytes)."""


def read_pages(path: Path) -> tuple[dict[int, bytes], int]:
    """The store's pages by number (1-based), the log's committed copies laid over the file's,
    and the usable bytes of a page. Pages past the end of a truncated file are absent."""
    data = path.read_bytes()
    if not data.startswith(SQLITE_HEADER) or len(data) < 100:
        raise Unreadable("no SQLite header")
    size = struct.unpack(">H", data[16:18])[0]
    size = 65536 if size == 1 else size
    if size < 512 or size & (size - 1):
        raise Unreadable(f"page size {size}")
    usable = size - data[20]
    pages = {n + 1: data[n * size:(n + 1) * size] for n in range(len(data) // size)}
    pages.update(_wal_pages(path.with_name(path.name + "-wal"), size))
    return pages, usable


def _wal_pages(wal: Path, size: int) -> dict[int, bytes]:
    """The newest committed copy of each page in the write-ahead log (checksums checked)."""
    try:
        data = wal.read_bytes()
    except OSError:
        return {}
    if len(data) < 32:
        return {}
    magic, _version, wal_size, _seq, salt1, salt2 = struct.unpack(">6I", data[:24])
    if magic not in _WAL_MAGIC or wal_size != size:
        return {}
    order = ">" if magic & 1 else "<"
    sums = _checksum(data[:24], (0, 0), order)
    if sums != struct.unpack(">2I", data[24:32]):
        return {}
    pages: dict[int, bytes] = {}
    uncommitted: dict[int, bytes] = {}
    offset = 32
    while offset + 24 + size <= len(data):
        number, commit, s1, s2, c1, c2 = struct.unpack(">6I", data[offset:offset + 24])
        page = data[offset + 24:offset + 24 + size]
        sums = _checksum(page, _checksum(data[offset:offset + 8], sums, order), order)
        if (s1, s2) != (salt1, salt2) or sums != (c1, c2):
            break  # a frame of an older log, or torn: the log ends here
        uncommitted[number] = page
        if commit:  # a transaction's last frame: its pages are the store's now
            pages.update(uncommitted)
            uncommitted.clear()
        offset += 24 + size
    return pages


def _checksum(data: bytes, sums: tuple[int, int], order: str) -> tuple[int, int]:
    """SQLite's WAL checksum of ``data`` continued from ``sums``."""
    s0, s1 = sums
    words = struct.unpack(f"{order}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


def table_rows(pages: dict[int, bytes], usable: int) -> Iterator[tuple[int, int, list]]:
    """Every whole row on the table leaf pages: (page number, rowid, column values)."""
    for number in sorted(pages):
        page = pages[number]
        start = 100 if number == 1 else 0
        if len(page) <= start + 8 or page[start] != _TABLE_LEAF:
            continue
        cells = struct.unpack(">H", page[start + 3:start + 5])[0]
        for i in range(cells):
            at = start + 8 + 2 * i
            if at + 2 > len(page):
                break
            try:
                rowid, payload = _cell(pages, page, struct.unpack(">H", page[at:at + 2])[0], usable)
                yield number, rowid, _record(payload)
            except (Unreadable, IndexError, struct.error, UnicodeDecodeError):
                continue  # a damaged cell, or one whose overflow pages are gone


def _cell(pages: dict[int, bytes], page: bytes, at: int, usable: int) -> tuple[int, bytes]:
    """A table leaf cell's rowid and its whole payload (following its overflow pages)."""
    if not 8 <= at < len(page):
        raise Unreadable("cell pointer out of the page")
    total, at = _varint(page, at)
    rowid, at = _varint(page, at)
    rowid -= (rowid >> 63) << 64  # a signed 64-bit integer
    most = usable - 35
    if total <= most:
        local = total
    else:
        least = (usable - 12) * 32 // 255 - 23
        local = least + (total - least) % (usable - 4)
        local = local if local <= most else least
    payload = bytearray(page[at:at + local])
    if len(payload) < local:
        raise Unreadable("cell runs past its page")
    following = struct.unpack(">I", page[at + local:at + local + 4])[0] if local < total else 0
    seen = set()
    while len(payload) < total:
        overflow = pages.get(following)
        if overflow is None or following in seen:
            raise Unreadable("an overflow page is missing")
        seen.add(following)
        payload += overflow[4:4 + min(usable - 4, total - len(payload))]
        following = struct.unpack(">I", overflow[:4])[0]
    return rowid, bytes(payload)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = 0
    for i in range(9):
        byte = data[at + i]
        if i == 8:
            return (value << 8) | byte, at + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    raise Unreadable("varint")  # not reached


def _record(payload: bytes) -> list:
    """The column values of a record (SQLite's record format, UTF-8 text)."""
    header, at = _varint(payload, 0)
    if not 0 < header <= len(payload):
        raise Unreadable("record header")
    types = []
    while at < header:
        kind, at = _varint(payload, at)
        types.append(kind)
    values, body = [], header
    for kind in types:
        if kind in _INT_SIZES:
            width = _INT_SIZES[kind]
            values.append(int.from_bytes(payload[body:body + width], "big", signed=True))
            body += width
        elif kind == 7:
            values.append(struct.unpack(">d", payload[body:body + 8])[0])
            body += 8
        elif kind in (0, 8, 9):
            values.append(None if kind == 0 else kind - 8)
        elif kind >= 12:
            width = (kind - 12) // 2
            chunk = payload[body:body + width]
            values.append(bytes(chunk) if kind % 2 == 0 else chunk.decode("utf-8"))
            body += width
        else:
            raise Unreadable(f"serial type {kind}")
        if body > len(payload):
            raise Unreadable("record runs past its payload")
    return values
