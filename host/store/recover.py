"""Getting the records out of a damaged store (``aiot results recover``).

SQLite's own ``.recover`` is not in every sqlite3 build (and it fails on WAL databases in
some), so aiot salvages with the standard library, two ways: through SQLite, listing record
ids along every access path it has (the table, the id index), each read up to its first
damaged page; and from the file's pages themselves (:mod:`aiot.host.store.pages`), which
finds the records on leaf pages that SQLite can no longer reach (below a lost interior page
of a truncated file). It copies every record it got into a new store, then moves the damaged
store aside (kept, never deleted) and puts the new one in its place. Finished runs kept
beside the store when it could not take them (:mod:`aiot.host.store.unstored`) are written
into the new one.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import struct
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from aiot.core.errors import StoreError, UsageError
from aiot.host.store import pages
from aiot.host.store.damage import broken_json
from aiot.host.store.schema import MIGRATIONS, SCHEMA_VERSION
from aiot.host.store.store import DB_NAME, STATUSES, Store

log = logging.getLogger(__name__)

_COMPANIONS = ("-wal", "-shm")
#: How a whole store of an older schema is migrated (the same words as the store's refusal to
#: read it unmigrated, :class:`aiot.host.store.store.Store`).
MIGRATE_HINT = ("open it once for writing where its folder is writable, which migrates it: "
                "aiot results prune --older-than 36500d --dry-run (changes nothing else), or "
                "any run")


@dataclass(frozen=True)
class Recovery:
    """What :func:`recover_store` did."""

    recovered: int  # records copied into the new store
    listed: int | None  # records the damaged store counted (None: it could not count them)
    pushes: int  # ``aiot push`` entries copied
    kept_as: Path  # where the damaged store now lies
    kept_runs: int = 0  # finished runs kept beside the store (see unstored) written into it


def _problem(conn: sqlite3.Connection) -> str | None:
    try:
        rows = conn.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as exc:
        return str(exc)
    return None if [tuple(r) for r in rows] == [("ok",)] else str(rows[0][0] if rows else "damaged")


def _broken(conn: sqlite3.Connection) -> list[tuple[str, list[str]]]:
    """Records whose JSON does not parse (:func:`~aiot.host.store.damage.broken_json`)."""
    try:
        return broken_json(conn)
    except sqlite3.DatabaseError:
        return []


def _whole_hint(conn: sqlite3.Connection) -> str:
    """What to run on a store that is not damaged: a store of an older schema is migrated
    by any command that opens it for writing; a whole one needs nothing."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = int(row[0]) if row else SCHEMA_VERSION
    except (sqlite3.DatabaseError, ValueError, TypeError):
        version = SCHEMA_VERSION
    if version < SCHEMA_VERSION:
        return (f"it has schema v{version} and this aiot reads v{SCHEMA_VERSION}: {MIGRATE_HINT}")
    return "aiot results check checks every page and record of it"


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
        broken = {rid for rid, _parts in _broken(src)} if problem is None else set()
        if problem is None and not broken:
            raise UsageError(f"result store {path} is not damaged: nothing to recover",
                             _whole_hint(src))
        if problem is not None and "not a database" in problem:
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
    if broken:  # whole pages, but records no reader can decode: every other one is copied
        runs = [row for row in runs if row["id"] not in broken]
    found_runs, found_pushes = _from_pages(path)  # whole JSON only (_as_run)
    runs += _unseen(runs, found_runs, "id")
    pushes += _unseen(pushes, found_pushes, "id")
    done = _replace(path, runs, pushes, listed)
    with Store(path) as store:
        return replace(done, kept_runs=store.store_kept())


def _schema_columns() -> dict[str, list[str]]:
    """The columns of ``runs`` and ``pushes`` in this aiot's schema, in their stored order."""
    conn = sqlite3.connect(":memory:")
    try:
        for version in range(SCHEMA_VERSION):
            MIGRATIONS[version](conn)
        return {table: [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
                for table in ("runs", "pushes")}
    finally:
        conn.close()


def _from_pages(path: Path) -> tuple[list[dict], list[dict]]:
    """The runs and pushes on the file's table leaf pages, told apart by their shape; a row
    on a page that is free (left over from before a page split) comes after a live copy."""
    try:
        found, usable = pages.read_pages(path)
    except (OSError, pages.Unreadable) as exc:
        log.info("cannot read %s page by page: %s", path, exc)
        return [], []
    columns = _schema_columns()
    free = _free_pages(found)
    runs, pushes = [], []
    for number, rowid, values in pages.table_rows(found, usable):
        rank = number not in free
        run = _as_run(values, columns["runs"])
        if run is not None:
            runs.append((rank, run))
        elif len(values) == len(columns["pushes"]) and values[0] is None and isinstance(values[1], str):
            pushes.append((rank, dict(zip(columns["pushes"], [rowid, *values[1:]], strict=True))))
    return _best(runs), _best(pushes)


def _as_run(values: list, names: list[str]) -> dict | None:
    """``values`` as a run record when they look like one (an id, a known status, whole
    JSON), else None. Rows written before a later migration have fewer columns."""
    if not 20 <= len(values) <= len(names):
        return None
    row = dict(zip(names, values + [None] * (len(names) - len(values)), strict=True))
    if not (isinstance(row["id"], str) and len(row["id"]) == 32 and row["status"] in STATUSES):
        return None
    try:
        for key in ("spec_json", "provenance_json", "result_json", "writer_json"):
            if row[key] is not None:
                json.loads(row[key])
    except (TypeError, ValueError):
        return None
    return row


def _best(found: list[tuple[bool, dict]]) -> list[dict]:
    """One row per id: a live page's before a free one's, a finished record before a
    pending copy of it, a later finish before an earlier one."""
    best: dict = {}
    for rank, row in found:
        key = (rank, row.get("status") not in (None, "pending"), str(row.get("finished_at") or ""))
        if row["id"] not in best or key > best[row["id"]][0]:
            best[row["id"]] = (key, row)
    return [row for _key, row in best.values()]


def _free_pages(found: dict[int, bytes]) -> set[int]:
    """The pages on the file's free list (as far as its trunk pages are there)."""
    free: set[int] = set()
    trunk = struct.unpack(">I", found[1][32:36])[0] if 1 in found else 0
    while trunk and trunk in found and trunk not in free:
        free.add(trunk)
        page = found[trunk]
        count = min(struct.unpack(">I", page[4:8])[0], (len(page) - 8) // 4)
        free.update(struct.unpack(f">{count}I", page[8:8 + 4 * count]))
        trunk = struct.unpack(">I", page[:4])[0]
    return free


def _unseen(rows: list[dict], found: list[dict], key: str) -> list[dict]:
    """The rows of ``found`` whose ``key`` SQLite did not read already."""
    known = {row[key] for row in rows}
    return [row for row in found if row[key] not in known]


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
