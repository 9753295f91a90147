"""When a store's pages are checked: after an unclean stop or a change aiot did not make, on
demand, and cheaply otherwise.

``PRAGMA quick_check`` reads every page (seconds at 100k records), so it is not run on every
open. Every open checks the file's size against the pages SQLite counts in it (a truncation is named at
once) and runs the full check when any of these holds:

* no stamp: a store never checked, or checked before this aiot version;
* the store file is not the one the stamp describes (inode, size or modification time
  differ): something changed it after aiot last checked it or closed it cleanly;
* a non-empty write-ahead log (``-wal``) is there while no connection of this process has the
  store open: a process stopped without closing it (killed, crashed, a power cut), or another
  process is writing to it now; either way its pages are checked.

The stamp (``aiot.sqlite-checked``, beside the store) is written after a check passes and when
the last connection of a process that wrote closes cleanly (SQLite then folds the log into
the file and deletes it). Modification times have the kernel's tick as their grain, so a
stamp is written only once the file's time is older than :data:`_TICK_S`: a later change,
even a same-size overwrite, then always shows as another time. ``aiot results check`` runs the
full check on demand.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path

from aiot.core.fileio import write_text_atomic
from aiot.host.store.damage import BrokenRecords, StoreDamaged, broken_json, check_integrity, damaged

log = logging.getLogger(__name__)

#: Longer than any kernel's timestamp grain (1/HZ, at most 10 ms).
_TICK_S = 0.025
STAMP_SUFFIX = "-checked"

#: Connections this process has open on each verified store file, by (path, inode).
_LIVE: dict[tuple[str, int], int] = {}
_LIVE_LOCK = threading.Lock()
#: Stores found damaged by this process: never stamped again until a full check passes.
_DAMAGED: set[str] = set()


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


def stamp_path(path: Path) -> Path:
    """Where the stamp of the store at ``path`` is kept."""
    return path.with_name(path.name + STAMP_SUFFIX)


def _stamped(path: Path) -> tuple[int, int, int] | None:
    try:
        data = json.loads(stamp_path(path).read_text(encoding="utf-8"))
        return int(data["inode"]), int(data["size"]), int(data["mtime_ns"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _wal_in_use(path: Path) -> bool:
    try:
        return os.stat(path.with_name(path.name + "-wal")).st_size > 0
    except OSError:
        return False


def size_problem(path: Path, conn) -> str | None:
    """A store file shorter than the pages SQLite counts in it (truncated), or None.

    Asked of SQLite, never by opening the file: closing a descriptor of it would drop the
    locks SQLite holds on it for this process. A log with pages of its own may make the
    database longer than its file, so this says nothing while one is in use.
    """
    if _wal_in_use(path):
        return None
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    now = _stat(path)
    if now is not None and now[1] < pages * page:
        return (f"database disk image is malformed (truncated: the file holds {now[1] // page} "
                f"of its {pages} pages)")
    return None


def why_check(path: Path) -> str | None:
    """Why the store at ``path`` needs a full check now, or None when a cheap one does."""
    now = _stat(path)
    if now is None:
        return "no file"
    with _LIVE_LOCK:
        if _LIVE.get((str(path), now[0])):
            return None  # checked when this process opened it, and still open here
    if _wal_in_use(path):
        return "a write-ahead log is left (an unclean stop, or another process writing)"
    stamp = _stamped(path)
    if stamp is None:
        return "never checked"
    if stamp != now:
        return "changed since it was last checked"
    return None


def check_on_open(path: Path, conn, written: int = 0, force: bool = False,
                  full: bool = False) -> None:
    """Check the store just opened on ``conn``: its size always, its pages when
    :func:`why_check` says so (or ``force``); raises :class:`StoreDamaged`. ``force`` (``aiot
    results check``) also decodes what readers decode: records whose JSON does not parse
    raise :class:`~aiot.host.store.damage.BrokenRecords` (their pages are whole)."""
    try:
        problem = size_problem(path, conn)
    except sqlite3.DatabaseError as exc:
        problem = str(exc)
    if problem:
        forget(path)
        raise damaged(path, problem, written)
    reason = "asked for" if force else why_check(path)
    if reason is not None:
        before = _stat(path)
        started = time.monotonic()
        try:
            check_integrity(conn, path, written, full)
        except StoreDamaged:
            forget(path)
            raise
        with _LIVE_LOCK:
            _DAMAGED.discard(str(path))
        log.debug("checked %s (%s) in %.2f s", path, reason, time.monotonic() - started)
        if _stat(path) == before and not _wal_in_use(path):
            stamp(path)
    if force:
        broken = broken_json(conn)
        if broken:
            raise BrokenRecords(path, broken, conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])


def register(path: Path, inode: int | None) -> None:
    """Note a connection opened (and checked) on the store file ``inode``."""
    key = (str(path), inode or 0)
    with _LIVE_LOCK:
        _LIVE[key] = _LIVE.get(key, 0) + 1


def closed(path: Path, inode: int | None, wrote: bool) -> None:
    """Note a connection closed; the last one of a writing process that left no log behind
    stamps the file as it now is (a clean stop)."""
    key = (str(path), inode or 0)
    with _LIVE_LOCK:
        left = _LIVE.get(key, 0) - 1
        if left > 0:
            _LIVE[key] = left
        else:
            _LIVE.pop(key, None)
    if wrote and left <= 0 and not _wal_in_use(path):
        now = _stat(path)
        if now is not None and now[0] == inode:
            stamp(path)


def forget(path: Path) -> None:
    """Drop the stamp (the store was found damaged): the next open checks it in full, and no
    connection of this process stamps it again until a full check passes."""
    with _LIVE_LOCK:
        _DAMAGED.add(str(path))
    try:
        stamp_path(path).unlink(missing_ok=True)
    except OSError:
        pass


def stamp(path: Path) -> None:
    """Record the store file as it is now as checked (best effort: a read-only folder keeps
    no stamp, and its store is checked at each open)."""
    now = _stat(path)
    with _LIVE_LOCK:
        if now is None or str(path) in _DAMAGED:
            return
    age = time.time() - now[2] / 1e9
    if 0 <= age < _TICK_S:  # a change within this tick would keep the same time
        time.sleep(_TICK_S - age)
        if _stat(path) != now:
            return
    try:
        write_text_atomic(stamp_path(path), json.dumps(
            {"inode": now[0], "size": now[1], "mtime_ns": now[2]}) + "\n")
    except OSError:
        log.debug("cannot stamp %s as checked", path, exc_info=True)
