"""Getting the records out of a damaged store (``aiot results recover``).

SQLite's own ``.recover`` is not in every sqlite3 build (and it fails on WAL databases in
some), so aiot salvages with the standard library: it lists record ids along every access
path it has (the table, the id index), each read up to its first damaged page, copies every
record it can still read into a new store, then moves the damaged store aside (kept, never
deleted) and puts the new one in its place.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from aiot.core.errors import StoreError, UsageError
from aiot.host.store.store import DB_NAME, Store

_COMPANIONS = ("-wal", "-shm")


@dataclass(frozen=True)
class Recovery:
    """What :func:`recover_store` did."""

    recovered: int  # records copied into the new store
    listed: int | None  # records the damaged store counted (None: it could not count them)
    pushes: int  # ``aiot push`` entries copied
    kept_as: Path  # where the damaged store now lies


def _problem(conn: sqlite3.Connection) -> str | None:
    try:
        rows = conn.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as exc:
        return str(exc)
    return None if [tuple(r) for r in rows] == [("ok",)] else str(rows[0][0] if rows else "damaged")


def _partial(conn: sqlite3.Connection, sql: str, args=()) -> list[tuple]:
    """The rows of ``sql`` up to the first damaged page."""
    rows = []
    try:
        for row in conn.execute(sql, args):
            rows.append(row)  # noqa: PERF402 - one by one: keeps what came before the error
    except sqlite3.DatabaseError:
        pass
    return rows


def _salvage(src: sqlite3.Connection, table: str, key: str, paths: list[str]) -> list[dict]:
    """Every row of ``table`` readable by its ``key``, found along the given access paths."""
    keys: dict = {}
    for sql in paths:
        keys.update((row[0], None) for row in _partial(src, sql))
    rows = []
    for value in keys:
        found = _partial(src, f"SELECT * FROM {table} WHERE {key} = ?", (value,))
        rows += [dict(r) for r in found[:1]]
    return rows


def _copy(dst: sqlite3.Connection, table: str, rows: list[dict]) -> int:
    columns = {r[1] for r in dst.execute(f"PRAGMA table_info({table})")}
    copied = 0
    for row in rows:
        data = {k: v for k, v in row.items() if k in columns}
        try:
            dst.execute(f"INSERT INTO {table} ({', '.join(data)}) VALUES ({', '.join('?' * len(data))})",
                        list(data.values()))
        except sqlite3.IntegrityError:
            continue  # a damaged row that breaks the schema's rules: not a record any more
        copied += 1
    return copied


def recover_store(results_dir: Path) -> Recovery:
    """Copy every readable record of the damaged store in ``results_dir`` into a new store
    that takes its place; the damaged one is kept beside it.

    Raises:
        UsageError: the store is missing, empty, or not damaged.
        StoreError: it is not an SQLite database at all.
    """
    path = results_dir / DB_NAME
    if not path.is_file() or path.stat().st_size == 0:
        raise UsageError(f"{path} is missing or empty: there are no records to recover",
                         "restore it from a backup, or move it away to start a new store")
    src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    src.row_factory = sqlite3.Row
    try:
        problem = _problem(src)
        if problem is None:
            raise UsageError(f"result store {path} is not damaged: nothing to recover")
        if "not a database" in problem:
            raise StoreError(f"{path} is not an SQLite database: nothing can be recovered from it",
                             "restore it from a backup, or move it away to start a new store")
        runs = _salvage(src, "runs", "id", [
            "SELECT id FROM runs NOT INDEXED",
            "SELECT id FROM runs INDEXED BY sqlite_autoindex_runs_1 ORDER BY id",
            "SELECT id FROM runs INDEXED BY sqlite_autoindex_runs_1 ORDER BY id DESC"])
        pushes = _salvage(src, "pushes", "id", ["SELECT id FROM pushes"])
        listed = next(iter(_partial(src, "SELECT COUNT(*) FROM runs")), [None])[0]
    finally:
        src.close()
    return _replace(path, runs, pushes, listed)


def _replace(path: Path, runs: list[dict], pushes: list[dict], listed: int | None) -> Recovery:
    """Write the salvaged rows into a new store, move the damaged one aside, new one in."""
    fresh = path.with_name(f".{path.name}.recovering")
    for stale in (fresh, *(fresh.with_name(fresh.name + tail) for tail in _COMPANIONS)):
        stale.unlink(missing_ok=True)  # a recovery that was interrupted before
    Store(fresh).close()
    dst = sqlite3.connect(fresh, isolation_level=None)
    try:
        dst.execute("BEGIN IMMEDIATE")
        recovered, pushed = _copy(dst, "runs", runs), _copy(dst, "pushes", pushes)
        dst.execute("COMMIT")
    finally:
        dst.close()
    kept = path.with_name(f"{path.name}.damaged-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}")
    os.replace(path, kept)
    for tail in _COMPANIONS:  # the damaged store's log belongs with it
        companion = path.with_name(path.name + tail)
        if companion.exists():
            os.replace(companion, kept.with_name(kept.name + tail))
    os.replace(fresh, path)
    return Recovery(recovered, listed, pushed, kept)
