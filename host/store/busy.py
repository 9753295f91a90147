"""Waiting for a result store whose write lock another process holds.

SQLite lets one writer at a time into a store. aiot's own writes are short, but another
program (an ``sqlite3`` shell left inside ``BEGIN``, a backup tool, a long query) can hold
the lock for minutes. A write then waits for the lock, saying once that it does and who
holds it, for at most ``AIOT_STORE_WAIT_S`` seconds (default 300); when the wait runs out the
failure says the store is locked by another process, never that the disk is full.
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from aiot.core import environment, notices
from aiot.core.errors import StoreError, UsageError

#: How long a write waits for a busy store when ``AIOT_STORE_WAIT_S`` does not say.
DEFAULT_WAIT_S = 300.0
WAIT_VARIABLE = "AIOT_STORE_WAIT_S"

#: How long one try to take a busy store's write lock waits inside SQLite (a writable
#: connection's timeout); :func:`begin` tries again until the store's wait runs out, so
#: Ctrl-C and the "store is busy" notice come within about this long.
LOCK_TRY_S = 1.0

#: The byte of a WAL store's ``-shm`` file whose lock is SQLite's write lock (WAL_WRITE_LOCK:
#: the first of the lock bytes at offset 120 of the shared-memory file).
_WAL_WRITE_LOCK = 120


class StoreBusy(StoreError):
    """Another process held the store's write lock for longer than aiot waits."""


def wait_s() -> float:
    """Seconds a write waits for a busy store (``AIOT_STORE_WAIT_S``, default 300).

    Raises:
        UsageError: the variable is not a non-negative number.
    """
    text = environment.get(WAIT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_WAIT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < math.inf:
        raise UsageError(f"{WAIT_VARIABLE}={text!r} is not a number of seconds",
                         f"set {WAIT_VARIABLE} to how long a write waits for a busy store, e.g. 300")
    return value


def is_busy(exc: BaseException) -> bool:
    """Whether an SQLite failure is the lock of another connection (SQLITE_BUSY/LOCKED)."""
    return "database is locked" in str(exc) or "database table is locked" in str(exc)


def begin(conn: sqlite3.Connection, path: Path, limit_s: Callable[[], float]) -> None:
    """Take the store's write lock (BEGIN IMMEDIATE). While another process holds it, wait:
    say so once, naming the holder when it can be told, for at most ``limit_s()`` seconds
    (asked again at each try: a cancelled sweep shortens the wait of the writes in flight).

    Raises:
        StoreBusy: the lock was still held when the wait ran out.
    """
    started = None
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            limit = limit_s()
            if started is None:  # the first try already waited LOCK_TRY_S
                started = time.monotonic() - LOCK_TRY_S
                if limit > LOCK_TRY_S:
                    notices.say(waiting_notice(path, lock_holder(path), limit))
            if time.monotonic() - started >= limit:
                raise busy_error(path, lock_holder(path), limit) from None


def lock_holder(path: Path) -> str | None:
    """Who holds the write lock of the store at ``path``: ``pid N (command)``, or None when
    it cannot be told (not Linux, no ``/proc/locks``, a lock on another host's NFS client)."""
    try:
        shm = os.stat(path.with_name(path.name + "-shm"))
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            table = fh.read()
    except OSError:
        return None
    for line in table.splitlines():
        # "1: POSIX  ADVISORY  WRITE 1234 08:01:5678 120 120" (a blocked waiter has "->").
        fields = line.split()
        if len(fields) < 8 or "->" in fields or fields[3] != "WRITE":
            continue
        try:
            inode = int(fields[5].rsplit(":", 1)[1])
            start, end = int(fields[6]), fields[7]
            pid = int(fields[4])
        except (ValueError, IndexError):
            continue
        covers = start <= _WAL_WRITE_LOCK and (end == "EOF" or int(end) >= _WAL_WRITE_LOCK)
        if inode == shm.st_ino and covers and pid != os.getpid():
            command = _command(pid)
            return f"pid {pid} ({command})" if command else f"pid {pid}"
    return None


def _command(pid: int) -> str | None:
    """The command line of ``pid``, short (a holder is named, not documented)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    text = " ".join(raw.replace(b"\0", b" ").decode(errors="replace").split())
    return text if len(text) <= 60 else text[:57] + "..."


def waiting_notice(path: Path, holder: str | None, limit_s: float) -> str:
    """The one line said when a write starts waiting for the store."""
    who = holder or "another process"
    return (f"result store {path} is busy: {who} holds its write lock; aiot waits for it, "
            f"at most {limit_s:g} s ({WAIT_VARIABLE})")


def busy_error(path: Path, holder: str | None, limit_s: float, kept: str = "") -> StoreBusy:
    """The failure when the wait ran out: the store is locked, by whom, and what was kept."""
    who = holder or "another process"
    return StoreBusy(
        f"result store {path} is locked by another process: {who} held its write lock for "
        f"over {limit_s:g} s{kept}",
        f"end or finish what holds it, then run again (set {WAIT_VARIABLE} to wait longer)")
