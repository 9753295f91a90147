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
