"""A damaged or truncated store, found and named truly.

A store is checked for damaged pages when it is opened after an unclean stop or a change aiot
did not make (``PRAGMA quick_check``, :mod:`aiot.host.store.integrity`), and before
each write for the one damage SQLite itself does not notice while it writes: the file made
shorter (truncated) or replaced under a running sweep. aiot never makes a store shorter (it
deletes no record and never vacuums), so a store file smaller than this connection has seen
it, or another file at its path, is something else's doing. SQLite keeps writing into such a
file without an error (the pages it needs are in its cache and its log), so without this
check a sweep would carry on and the damage show only at the next open.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from aiot.core.errors import StoreError

#: The first bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"

_RECOVER_HINT = ("run: aiot results recover (copies every readable record into a new store "
                 "and keeps the damaged one beside it)")


class StoreDamaged(StoreError):
    """The store's file is damaged, truncated or replaced: ``aiot results recover``."""


def is_sqlite(path: Path) -> bool:
    """Whether ``path`` starts as an SQLite database does."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def is_damage(exc: sqlite3.DatabaseError) -> bool:
    """Whether an SQLite failure says the file's pages are damaged."""
    text = str(exc)
    return "malformed" in text or "not a database" in text or "corrupt" in text


def damaged(path: Path, detail: str, written: int = 0) -> StoreDamaged:
    """The one-line failure of a damaged store, with how to get its records back.

    Args:
        written: records this process had stored in it (0: it is refused before any write).
    """
    lines = [line.strip() for line in detail.splitlines() if line.strip() and "***" not in line]
    detail = lines[0] if lines else "quick_check failed"
    if len(detail) > 100:
        detail = detail[:97] + "..."
    if not written:
        return StoreDamaged(f"result store {path} is damaged ({detail}); nothing was written to it",
                          _RECOVER_HINT)
    return StoreDamaged(
        f"result store {path} is damaged ({detail}): something other than aiot damaged it after "
        f"this aiot process had stored {_records(written)} in it; nothing more is written to it",
        _RECOVER_HINT)


def check_integrity(conn: sqlite3.Connection, path: Path, written: int = 0,
                    full: bool = False) -> None:
    """Refuse a store whose pages are damaged: ``PRAGMA quick_check`` reads every page (~10 ms
    for 2000 runs, seconds at 100k: see :mod:`aiot.host.store.integrity` for when it runs);
    ``full`` runs ``integrity_check``, which also compares every index with its table."""
    try:
        rows = conn.execute("PRAGMA integrity_check" if full else "PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as exc:
        raise damaged(path, str(exc), written) from None
    if [tuple(r) for r in rows] != [("ok",)]:
        raise damaged(path, str(rows[0][0]) if rows else "quick_check found problems", written)


class FileWatch:
    """What one connection has seen of its store file (inode, largest size), to tell a file
    truncated or replaced by something else before writing into it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.inode, self.size = self._stat()

    def _stat(self) -> tuple[int | None, int]:
        try:  # stat, not open: closing a descriptor of the file would drop SQLite's locks
            found = os.stat(self.path)
        except OSError:
            return None, 0
        return found.st_ino, found.st_size

    def check(self, written: int) -> None:
        """Raise :class:`StoreDamaged` if the file shrank or is another file now."""
        inode, size = self._stat()
        if inode is None or inode != self.inode:
            raise StoreDamaged(
                f"result store {self.path} was moved, deleted or replaced by something other "
                f"than aiot while this aiot process had stored {_records(written)} in it; aiot "
                "writes nothing more to it",
                "see whether another program (a sync tool, a cleanup job, a restore) touched "
                "the results folder; aiot results recover salvages a damaged store")
        if size < self.size:
            raise StoreDamaged(
                f"result store {self.path} was truncated by something other than aiot (now "
                f"{size} bytes, {self.size} before) after this aiot process had stored "
                f"{_records(written)} in it; aiot writes nothing more to it", _RECOVER_HINT)

    def seen(self) -> None:
        """Note the file as it is after our own write (a checkpoint may have grown it)."""
        inode, size = self._stat()
        if inode == self.inode:
            self.size = max(self.size, size)


def _records(count: int) -> str:
    return f"{count} record" + ("" if count == 1 else "s")


#: A record's JSON columns, as the store's readers decode them; the first two are never NULL.
JSON_COLUMNS = ("spec_json", "provenance_json", "result_json", "writer_json")
#: How many records a one-line report of broken JSON names.
NAMED = 5


def broken_json(conn: sqlite3.Connection) -> list[tuple[str, list[str]]]:
    """``[(record id, [its parts whose JSON does not parse: spec, result…])]``: records a
    reader cannot decode (edited by hand or by another program; SQLite's pages are whole).

    SQLite's ``json_valid`` finds the candidates without decoding every record in Python; each
    is then decoded as the store's readers decode it (Python's ``json`` also reads the NaN
    and Infinity that ``json.dumps`` writes and ``json_valid`` refuses)."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    columns = [c for c in JSON_COLUMNS if c in present]
    required = JSON_COLUMNS[:2]
    where = " OR ".join(f"NOT coalesce(json_valid({c}), {0 if c in required else 1})"
                        for c in columns)
    found = []
    for row in conn.execute(f"SELECT id, {', '.join(columns)} FROM runs WHERE {where}"):
        parts = []
        for name, text in zip(columns, row[1:], strict=True):
            try:
                if text is not None or name in required:
                    json.loads(text)
            except (TypeError, ValueError):
                parts.append(name.removesuffix("_json"))
        if parts:
            found.append((str(row[0]), parts))
    return found


class BrokenRecords(StoreError):
    """Records whose JSON does not parse (the store's pages are whole): ``broken`` lists them."""

    def __init__(self, path: Path, broken: list[tuple[str, list[str]]], total: int | None) -> None:
        named = ", ".join(f"{rid[:8]} ({' and '.join(parts)})" for rid, parts in broken[:NAMED])
        more = f", and {len(broken) - NAMED} more" if len(broken) > NAMED else ""
        of = f" of {total}" if total is not None else ""
        super().__init__(
            f"result store {path}: {len(broken)}{of} record(s) hold JSON that does not parse "
            f"(changed by something other than aiot): {named}{more}",
            "aiot results recover copies every other record into a new store and keeps this "
            "one beside it; or restore the store from a backup")
        self.broken = broken
