"""Run records in SQLite: written as ``pending`` before a run starts, finished after.

The store lives in ``<results dir>/aiot.sqlite``. Every write is one transaction, so an
interrupted sweep leaves rows that are either pending (then marked failed on Ctrl-C or
SIGTERM, or by the next campaign once their process is gone) or complete, never half-written.
A write waits (bounded, saying so) for a store another process holds locked, and a finished
run that still cannot be written is kept beside the store (:mod:`aiot.host.store.unstored`);
a store truncated or replaced under a running sweep is named so at the next write.

A new store appears whole (built beside it, then linked into place), so no process ever sees
a half-made one; an empty or damaged store file is refused rather than written into.
"""

from __future__ import annotations

import errno
import json
import logging
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Self
from urllib.parse import quote

from aiot.core.diskfull import DISK_ERRNOS, disk_errno, free_bytes, read_only_mount, store_errno
from aiot.core.errors import StoreError
from aiot.host.store import busy, creating, facts, identity, integrity, queries, readable, unstored
from aiot.host.store.damage import FileWatch, StoreDamaged, damaged, is_damage, is_sqlite
from aiot.host.store.schema import SCHEMA_VERSION, current_version
from aiot.host.store.writer import is_gone, this_writer

log = logging.getLogger(__name__)

DB_NAME = "aiot.sqlite"
STATUSES = ("pending", "ok", "failed", "skipped")

#: Records this process began in each store (by path): what damage found under a running
#: sweep may have cost, said in its message.
_WRITTEN: dict[str, int] = {}
_WRITTEN_LOCK = threading.Lock()


def utc_now(timespec: str = "seconds") -> str:
    """UTC time in ISO 8601, to ``timespec`` (an ``isoformat`` precision)."""
    return datetime.now(UTC).isoformat(timespec=timespec)


def stored_now() -> str:
    """``finished_at`` for a write: microseconds, so the host's own overhead between the end of
    a measurement and its record being stored can be measured (``bench/transports.py``)."""
    return utc_now("microseconds")


@dataclass
class RunRecord:
    """One measurement (or training) record with its provenance."""

    id: str
    kind: str
    status: str
    created_at: str
    spec: dict
    provenance: dict
    sweep_id: str | None = None
    reason: str | None = None
    finished_at: str | None = None
    device: str | None = None
    model: str | None = None
    format: str | None = None
    threads: int | None = None
    artifact_sha256: str | None = None
    size_bytes: int | None = None
    median_ms: float | None = None
    p90_ms: float | None = None
    load_ms: float | None = None
    accuracy: float | None = None
    validity: str | None = None
    result: dict | None = field(default=None, repr=False)

    def to_dict(self) -> dict:
        """Plain JSON-able form (what ``results export --format json`` writes)."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


#: Columns of ``runs`` that are the store's, not the record's (never exported or imported).
BOOKKEEPING = ("writer_json", "host", "imported_at")

_COLUMNS = (
    "id", "sweep_id", "kind", "status", "reason", "created_at", "finished_at", "device",
    "model", "format", "threads", "artifact_sha256", "size_bytes", "median_ms", "p90_ms",
    "load_ms", "accuracy", "spec_json", "result_json", "provenance_json", "validity",
)


def _row_to_record(row: sqlite3.Row) -> RunRecord:
    data = dict(row)
    # The store's bookkeeping, not the record's: who wrote it (see reap_stale), its host (a
    # column made from its provenance) and when it was imported.
    for name in BOOKKEEPING:
        data.pop(name, None)
    result_json = data.pop("result_json")
    # A field of a type no reader reads (a damaged store, one written before imports were
    # checked) is read as missing: every view shows "—" for it (see ``readable``).
    return RunRecord(
        spec=readable.repaired("spec", _part(data, "spec", data.pop("spec_json"))),
        provenance=readable.repaired("provenance",
                                     _part(data, "provenance", data.pop("provenance_json"))),
        result=readable.repaired("result", _part(data, "result", result_json))
        if result_json else None,
        **data,
    )


def _part(data: dict, name: str, text):
    """A record's JSON part decoded; one that does not parse (changed by something other than
    aiot) is one line naming the record, never a traceback."""
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        raise StoreError(f"record {str(data.get('id'))[:8]} holds {name} JSON that does not "
                         "parse (changed by something other than aiot)",
                         "run aiot results check, which names every such record") from None


class Store:
    """The SQLite result store at ``path``; use :func:`open_store`.

    Opening creates a missing store, refuses an empty (truncated) or damaged one with a
    :class:`StoreError` saying how to recover, and migrates an older schema. A store opened
    ``readonly`` (for the commands that only read) is never written, so it reads on a full
    disk or a read-only mount; a store that cannot be written is refused for writing with
    ENOSPC/EROFS named, never called damaged.
    """

    def __init__(self, path: Path, readonly: bool = False) -> None:
        self.path = path
        self.readonly = readonly
        self.wait_s = busy.wait_s()
        if not path.exists():
            creating.create(path)
        creating.refuse_empty(path)
        if not readonly:
            _refuse_unwritable(path)
        try:
            self._conn = _connect(path, readonly)
        except sqlite3.Error as exc:
            raise _open_failure(path, exc, readonly) from None
        self._conn.row_factory = sqlite3.Row
        try:
            self._open()
        except BaseException:
            self._conn.close()
            raise
        self._file = FileWatch(path)
        integrity.register(path, self._file.inode)
        self._closed = False

    def _open(self) -> None:
        try:
            if not self.readonly:
                self._conn.execute("PRAGMA journal_mode = WAL")
            version = current_version(self._conn)
        except sqlite3.DatabaseError as exc:
            if is_damage(exc) and "not a database" not in str(exc):
                raise damaged(self.path, str(exc), self.written()) from None
            raise _open_failure(self.path, exc, self.readonly) from None
        integrity.check_on_open(self.path, self._conn, self.written())
        creating.refuse_newer(self.path, version)
        if version < SCHEMA_VERSION and self.readonly:
            raise StoreError(f"result store {self.path} has schema v{version} and this aiot "
                             f"reads v{SCHEMA_VERSION}: it must be migrated, which writes to it",
                             "open it once for writing where its folder is writable, which "
                             "migrates it: aiot results prune --older-than 36500d --dry-run "
                             "(changes nothing else), or any run")
        if version < SCHEMA_VERSION:
            with self._transaction() as conn:
                creating.migrate(conn, self.path)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """SQLite failures as one-line StoreErrors (damage found mid-use, a full disk or
        read-only mount named as such; a lock held too long: see :func:`busy.begin`)."""
        try:
            yield
        except StoreDamaged:
            integrity.forget(self.path)
            raise
        except sqlite3.DatabaseError as exc:
            if is_damage(exc):
                integrity.forget(self.path)
                raise damaged(self.path, str(exc), self.written()) from None
            if busy.is_busy(exc):
                raise busy.busy_error(self.path, busy.lock_holder(self.path), self.wait_s) from None
            code = store_errno(exc, self.path)
            if code is not None:
                raise StoreError(f"result store {self.path}: cannot write: {DISK_ERRNOS[code]}",
                                 _disk_hint(code)) from None
            raise StoreError(f"result store {self.path}: {exc}",
                             "check the folder's free space and permissions, then retry") from None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._errors():
            busy.begin(self._conn, self.path, lambda: self.wait_s)
            try:
                if hasattr(self, "_file"):  # not while opening (a migration)
                    self._file.check(self.written())
                yield self._conn
            except BaseException:
                try:
                    self._conn.execute("ROLLBACK")
                except sqlite3.Error:  # the failure at hand says more than the rollback's
                    log.debug("rollback failed", exc_info=True)
                raise
            self._conn.execute("COMMIT")
            if hasattr(self, "_file"):
                self._file.seen()

    def written(self) -> int:
        """Records this process has begun in this store (all its connections)."""
        with _WRITTEN_LOCK:
            return _WRITTEN.get(str(self.path), 0)

    def _read(self, sql: str, args=()) -> list[sqlite3.Row]:
        with self._errors():
            return self._conn.execute(sql, args).fetchall()

    def close(self) -> None:
        """Close the connection; the last one of a writing process stamps the store as
        cleanly closed (see :mod:`aiot.host.store.integrity`)."""
        if self._closed:
            return
        self._closed = True
        self._conn.close()
        integrity.closed(self.path, self._file.inode, wrote=not self.readonly)

    def verify(self, full: bool = False) -> int | None:
        """Check every page now (``PRAGMA quick_check``; ``full``: ``integrity_check``, which
        also compares each index with its table), then every record's facts with the record
        (:mod:`aiot.host.store.facts`): facts that disagree are made again from the records
        (returns how many; None when they agreed), or refused on a store opened read-only.

        Raises:
            StoreDamaged: damaged pages.
            StoreError: the facts disagree and the store is opened read-only.
        """
        with self._errors():
            integrity.check_on_open(self.path, self._conn, self.written(), force=True, full=full)
            wrong = facts.disagreement(self._conn)
        if wrong is None:
            return None
        if self.readonly:
            raise facts.disagree_error(self.path, wrong)
        return self.rebuild_facts(wrong)

    def unreadable(self, shown: int = 5) -> tuple[int, list[str]]:
        """How many records hold a field of a type no reader reads (views show it as "—"),
        and the first ``shown`` named (:func:`aiot.host.store.readable.unreadable`)."""
        with self._errors():
            return readable.unreadable(self._conn, shown)

    def rebuild_facts(self, why: str = "asked for") -> int:
        """Make every record's facts again from the records, in one transaction; returns how
        many records there are."""
        log.warning("result store %s: making the report's facts again from the records (%s)",
                    self.path, why)
        with self._transaction() as conn:
            return facts.rebuild(conn)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------

    def begin(self, kind: str, spec: dict, provenance: dict, **columns) -> RunRecord:
        """Insert a ``pending`` record before the work starts and return it.

        A record begun here is this host's: its provenance names this host's id
        (:func:`aiot.host.store.identity.this_host`) whatever else it says of the host."""
        host = provenance.get("host") if isinstance(provenance.get("host"), dict) else {}
        if host.get("id") != (mine := identity.this_host()):
            provenance = {**provenance, "host": {**host, "id": mine}}
        record = RunRecord(
            id=uuid.uuid4().hex, kind=kind, status="pending", created_at=utc_now(),
            spec=spec, provenance=provenance, **columns,
        )
        values = {k: v for k, v in record.to_dict().items() if k not in ("spec", "provenance", "result")}
        values.update(spec_json=json.dumps(spec), provenance_json=json.dumps(provenance),
                      result_json=None, writer_json=json.dumps(this_writer()))
        columns = (*_COLUMNS, "writer_json")
        with self._transaction() as conn:
            conn.execute(
                f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                [values[c] for c in columns],
            )
        with _WRITTEN_LOCK:
            _WRITTEN[str(self.path)] = _WRITTEN.get(str(self.path), 0) + 1
        return record

    def finish(self, record_id: str, status: str, reason: str | None = None,
               result: dict | None = None, provenance: dict | None = None, **columns) -> None:
        """Close a record as ok / failed / skipped, with its result and summary columns."""
        if status not in STATUSES[1:]:
            raise ValueError(f"cannot finish a record as {status!r}")
        sets = {"status": status, "reason": reason, "finished_at": stored_now(), **columns}
        if result is not None:
            sets["result_json"] = json.dumps(result)
        if provenance is not None:
            sets["provenance_json"] = json.dumps(provenance)
        unknown = set(sets) - set(_COLUMNS)
        if unknown:
            raise ValueError(f"unknown record columns {sorted(unknown)}")
        try:
            self._close_record(record_id, sets)
        except (busy.StoreBusy, StoreDamaged) as exc:
            later = ("aiot results recover" if isinstance(exc, StoreDamaged) else
                     "the next aiot run or sweep")
            raise unstored.kept_error(self.path, record_id, sets, exc, later) from None
        except StoreError as exc:
            code = disk_errno(exc)
            if code not in (errno.ENOSPC, errno.EDQUOT):
                raise
            # The result did not fit: close the record as failed, saying why (a small write,
            # which often still fits), else leave a mark for the next command to do so.
            try:
                self._close_record(record_id, unstored.failed_columns(
                    status, reason, code, self.path.parent, stored_now()), only_pending=True)
            except StoreError:
                unstored.mark(self.path, record_id, status, code)
                raise StoreError(f"{exc.message}; run {record_id[:8]} stays pending until the "
                                 "next aiot run or sweep marks it failed", exc.hint) from None
            raise StoreError(f"{exc.message}; run {record_id[:8]} is recorded as failed",
                             exc.hint) from None

    def _close_record(self, record_id: str, sets: dict, only_pending: bool = False) -> int:
        """UPDATE one record's columns in one transaction; returns the rows changed."""
        where = "id = ? AND status = 'pending'" if only_pending else "id = ?"
        with self._transaction() as conn:
            return conn.execute(f"UPDATE runs SET {', '.join(f'{k} = ?' for k in sets)} WHERE {where}",
                                [*sets.values(), record_id]).rowcount

    def fail_pending(self, reason: str, sweep_id: str | None = None) -> int:
        """Mark pending records (of one sweep, or all) as failed; returns how many. On a
        store locked past the wait, each is kept as failed beside it instead (see ``unstored``)."""
        where, args = "status = 'pending'", []
        if sweep_id:
            where += " AND sweep_id = ?"
            args.append(sweep_id)
        try:
            self.store_kept()  # a run kept while the store was locked is finished, not failed
            with self._transaction() as conn:
                return conn.execute(
                    f"UPDATE runs SET status = 'failed', reason = ?, finished_at = ? WHERE {where}",
                    [reason, stored_now(), *args]).rowcount
        except busy.StoreBusy:
            kept = {record_id for _path, record_id, columns in unstored.kept(self.path)
                    if columns.get("status") == "ok"}  # a measurement; a failure takes ``reason``
            ids = [row[0] for row in self._read(f"SELECT id FROM runs WHERE {where}", args)
                   if row[0] not in kept]
            for record_id in ids:  # a lock blocks writers only: the ids still read
                unstored.keep(self.path, record_id, {"status": "failed", "reason": reason,
                                                     "finished_at": stored_now()})
            return len(ids)

    def reap_stale(self) -> int:
        """Mark failed the pending records whose writing process is certainly gone (killed,
        crashed, rebooted away); returns how many. Records of live processes, of other hosts
        and of older aiot versions (writer unknown) stay pending. Finished runs kept beside
        the store (:mod:`aiot.host.store.unstored`) are written first."""
        self.store_kept()
        rows = self._read("SELECT id, writer_json FROM runs "
                          "WHERE status = 'pending' AND writer_json IS NOT NULL")
        by_writer: dict[str, list[str]] = {}
        for row in rows:
            by_writer.setdefault(row["writer_json"], []).append(row["id"])
        reaped = 0
        for writer_json, ids in by_writer.items():
            writer = json.loads(writer_json)
            if not is_gone(writer):
                continue
            reason = (f"interrupted: aiot process {writer.get('pid')} on {writer.get('host')} "
                      "ended before finishing this run")
            with self._transaction() as conn:
                cur = conn.execute(
                    f"UPDATE runs SET status = 'failed', reason = ?, finished_at = ? WHERE "
                    f"status = 'pending' AND id IN ({', '.join('?' * len(ids))})",
                    [reason, stored_now(), *ids])
            reaped += cur.rowcount
        if reaped:
            log.info("marked %d pending records of ended processes as failed", reaped)
        return reaped

    def store_kept(self) -> int:
        """Write the finished runs kept beside the store into their still-pending records;
        returns how many."""
        stored = 0
        for path, record_id, columns in unstored.kept(self.path, stored_now()):
            if set(columns) - set(_COLUMNS):
                log.warning("ignoring kept record %s: unknown columns", path)
                continue
            stored += self._close_record(record_id, columns, only_pending=True)
            if self._read("SELECT 1 FROM runs WHERE id = ? AND status != 'pending'", (record_id,)):
                path.unlink(missing_ok=True)  # closed now (or already): no longer needed
        if stored:
            log.info("stored %d finished runs kept beside %s", stored, self.path)
        return stored

    # -- reading ---------------------------------------------------------------------------

    def latest_sweep(self, key: str) -> str | None:
        """The newest sweep id that is ``key`` or ``key.<suffix>`` (a ``--fresh`` restart)."""
        rows = self._read(queries.LATEST_SWEEP, queries.latest_sweep_args(key))
        return rows[0][0] if rows else None

    def get(self, record_id: str) -> RunRecord:
        """The record whose id is or starts with ``record_id`` (at least 4 characters)."""
        if len(record_id) < 4:
            raise StoreError(f"record id '{record_id}' is too short", "give at least 4 characters")
        # The primary key first (a run reading its own record back), then a prefix.
        found = ([_row_to_record(r) for r in self._read(queries.BY_ID, (record_id,))]
                 or self.with_prefix(record_id))
        if not found:
            raise StoreError(f"no record '{record_id}' in {self.path}", "see: aiot results list")
        if len(found) > 1:
            raise StoreError(f"record id '{record_id}' is ambiguous", "give more characters")
        return found[0]

    def with_prefix(self, prefix: str, kind: str | None = None, limit: int = 2) -> list[RunRecord]:
        """Up to ``limit`` records (of ``kind``) whose id starts with ``prefix`` (ids are
        lower-case hex: an upper-case prefix finds them too)."""
        found: list[RunRecord] = []
        for each in dict.fromkeys((prefix, prefix.lower())):
            rows = self._read(queries.BY_ID_PREFIX, (*queries.prefix_range(each), kind, kind, limit))
            found += [_row_to_record(r) for r in rows]
            if found:
                break
        return found

    def count(self) -> int:
        """How many records the store holds (read from an index, not the table)."""
        return self._read("SELECT COUNT(*) FROM runs")[0][0]

    def sweep_ids(self, prefix: str, limit: int = 5) -> list[str]:
        """Up to ``limit`` sweep ids starting with ``prefix`` (``prefix`` itself first)."""
        rows = self._read(queries.SWEEPS_BY_PREFIX, (*queries.prefix_range(prefix), limit))
        ids = [r[0] for r in rows]
        return sorted(ids, key=lambda s: s != prefix)

    def query(self, *, kind: str | None = None, status: str | None = None,
              sweep_id: str | None = None, device: str | None = None, model: str | None = None,
              fmt: str | None = None, limit: int | None = None, host: str | None = None,
              own: bool | None = None) -> list[RunRecord]:
        """Records matching every given filter, oldest first (``limit``: the newest N);
        ``host``: of that host id; ``own``: True for this store's own runs (not imported)."""
        filters = queries.Filters(kind, status, sweep_id, device, model, fmt, host=host, own=own)
        if limit:  # the newest ``limit`` records, returned oldest first like the unlimited query
            return list(self.records(filters, newest_first=True, limit=limit))[::-1]
        return list(self.records(filters))

    def records(self, filters: queries.Filters, newest_first: bool = False,
                limit: int | None = None, offset: int = 0, batch: int = 200) -> Iterator[RunRecord]:
        """The records ``filters`` wants by time, read ``batch`` rows at a time: a reader of
        the whole store holds one batch in memory, not the store."""
        sql, args = queries.select(filters, newest_first, limit, offset)
        with self._errors():
            cursor = self._conn.execute(sql, args)
        while True:
            with self._errors():
                rows = cursor.fetchmany(batch)
            if not rows:
                return
            yield from (_row_to_record(r) for r in rows)

    def sweep_counts(self, sweep_id: str) -> dict[str, int]:
        """``{status: records}`` of one sweep."""
        return {r[0]: r[1] for r in self._read(queries.SWEEP_COUNTS, (sweep_id,))}

    def sweep_failures(self, sweep_id: str, limit: int = 20) -> list[dict]:
        """The newest ``limit`` failed records of one sweep (id, target and reason)."""
        return [dict(r) for r in self._read(queries.SWEEP_FAILURES, (sweep_id, limit))]

    def recent_sweeps(self, window: int = 5000, limit: int = 20) -> list[dict]:
        """The newest ``limit`` sweeps among the newest ``window`` records, each with its
        times, record counts by status and devices (a bounded read at any store size)."""
        return [dict(r) for r in self._read(queries.RECENT_SWEEPS, (window, limit))]

    # -- pushes ----------------------------------------------------------------------------

    def record_push(self, push: Push) -> None:
        """Remember that ``push.model`` in ``push.format`` is now on ``push.device``."""
        values = {**push.__dict__, "pushed_at": stored_now()}
        with self._transaction() as conn:
            conn.execute(f"INSERT INTO pushes ({', '.join(values)}) "
                         f"VALUES ({', '.join('?' * len(values))})", list(values.values()))

    def last_push(self, device: str) -> Push | None:
        """What was last pushed to ``device``, or None if nothing was."""
        rows = self._read(
            "SELECT device, model, format, reference, binarize, weights, artifact_sha256, remote "
            "FROM pushes WHERE device = ? ORDER BY id DESC LIMIT 1", (device,))
        return Push(**dict(rows[0])) if rows else None


@dataclass(frozen=True)
class Push:
    """One ``aiot push``: which model, in which format, is on which device."""

    device: str
    model: str
    format: str
    reference: str  # resolves to the model again on this host (zoo name or the user's file)
    binarize: str | None
    weights: str | None
    artifact_sha256: str
    remote: str


def open_store(results_dir: Path, readonly: bool = False) -> Store:
    """Open (creating and migrating as needed) the store in ``results_dir``.

    Args:
        readonly: for commands that only read: the store is opened read-only (a store on a
            full disk or a read-only mount still reads; a missing one is still created).

    Raises:
        StoreError: the folder cannot be made, or the store there is empty (truncated),
            damaged (see ``aiot results recover``), not a store, newer than this aiot, or (for
            writing) on a full disk or read-only mount.
    """
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        code = disk_errno(exc)
        if code is not None:
            raise StoreError(f"cannot create results folder {results_dir}: {DISK_ERRNOS[code]}",
                             _disk_hint(code)) from None
        raise StoreError(f"cannot create results folder {results_dir}: {exc}") from None
    return Store(results_dir / DB_NAME, readonly)


def _disk_hint(code: int) -> str:
    return ("the store is intact; mount its folder read-write, or read it as it is with "
            "aiot results list/show/export" if code == errno.EROFS else
            "the store is intact; free some space on its disk and retry")


def _connect(path: Path, readonly: bool) -> sqlite3.Connection:
    """A connection to the store; read-only ones never write (no journal-mode change, no
    -wal/-shm made where the folder cannot take them)."""
    if not readonly:
        return sqlite3.connect(path, timeout=busy.LOCK_TRY_S, isolation_level=None)
    uri = f"file:{quote(str(path.absolute()))}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)
    try:
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        conn.close()
        # A WAL store whose -shm cannot be made (read-only mount, full disk): read the file
        # as it stands, which is the whole store when no -wal holds newer pages.
        wal = path.with_name(path.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise
        return sqlite3.connect(f"{uri}&immutable=1", uri=True, timeout=30, isolation_level=None)


def _refuse_unwritable(path: Path) -> None:
    """A store on a read-only mount cannot take a record: say so before any run starts."""
    if read_only_mount(path):
        raise StoreError(f"result store {path} cannot be written: {DISK_ERRNOS[errno.EROFS]}",
                         _disk_hint(errno.EROFS))


def _open_failure(path: Path, exc: sqlite3.Error, readonly: bool) -> StoreError:
    """Why the store at ``path`` did not open: a full disk or read-only mount named as such
    (a healthy SQLite file is never called "not a store"), else "not an aiot result store"."""
    code = store_errno(exc, path)
    if code is None and not readonly and is_sqlite(path):
        code = errno.ENOSPC if (free_bytes(path.parent) or 0) < 64 * 1024 else None
    if code is not None:
        doing = "read" if readonly else "opened for writing"
        return StoreError(f"result store {path} cannot be {doing}: {DISK_ERRNOS[code]}",
                          _disk_hint(code))
    if is_sqlite(path):
        return StoreError(f"cannot open result store {path}: {exc}",
                          "check the folder's free space and permissions, then retry")
    return StoreError(f"{path} is not an aiot result store ({exc})",
                      "point --results-dir elsewhere or move the file away")
