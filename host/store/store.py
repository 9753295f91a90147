"""Run records in SQLite: written as ``pending`` before a run starts, finished after.

The store lives in ``<results dir>/aiot.sqlite``. Every write is one transaction, so an
interrupted sweep leaves rows that are either pending (then marked failed on Ctrl-C) or
complete, never half-written.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from aiot.host.errors import StoreError
from aiot.host.store.schema import MIGRATIONS, SCHEMA_VERSION, current_version

DB_NAME = "aiot.sqlite"
STATUSES = ("pending", "ok", "failed", "skipped")


def utc_now(timespec: str = "seconds") -> str:
    """UTC time in ISO 8601, to ``timespec`` (an ``isoformat`` precision)."""
    return datetime.now(timezone.utc).isoformat(timespec=timespec)


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


_COLUMNS = (
    "id", "sweep_id", "kind", "status", "reason", "created_at", "finished_at", "device",
    "model", "format", "threads", "artifact_sha256", "size_bytes", "median_ms", "p90_ms",
    "load_ms", "accuracy", "spec_json", "result_json", "provenance_json", "validity",
)


def _row_to_record(row: sqlite3.Row) -> RunRecord:
    data = dict(row)
    result_json = data.pop("result_json")
    return RunRecord(
        spec=json.loads(data.pop("spec_json")),
        provenance=json.loads(data.pop("provenance_json")),
        result=json.loads(result_json) if result_json else None,
        **data,
    )


class Store:
    """The SQLite result store at ``path``; use :func:`open_store`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._conn = sqlite3.connect(path, timeout=30, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open result store {path}: {exc}") from None
        self._conn.row_factory = sqlite3.Row
        self._migrate()

    def _migrate(self) -> None:
        try:
            self._conn.execute("PRAGMA journal_mode = WAL")
            version = current_version(self._conn)
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"{self.path} is not an aiot result store ({exc})",
                "point --results-dir elsewhere or move the file away",
            ) from None
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema v{version}, this aiot reads up to v{SCHEMA_VERSION}",
                "upgrade aiot to read these results",
            )
        while version < SCHEMA_VERSION:
            with self._transaction():
                MIGRATIONS[version](self._conn)
                version += 1
                self._conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(version),),
                )

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------

    def begin(self, kind: str, spec: dict, provenance: dict, **columns) -> RunRecord:
        """Insert a ``pending`` record before the work starts and return it."""
        record = RunRecord(
            id=uuid.uuid4().hex, kind=kind, status="pending", created_at=utc_now(),
            spec=spec, provenance=provenance, **columns,
        )
        values = {k: v for k, v in record.to_dict().items() if k not in ("spec", "provenance", "result")}
        values.update(spec_json=json.dumps(spec), provenance_json=json.dumps(provenance),
                      result_json=None)
        with self._transaction() as conn:
            conn.execute(
                f"INSERT INTO runs ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                [values[c] for c in _COLUMNS],
            )
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
        with self._transaction() as conn:
            conn.execute(
                f"UPDATE runs SET {', '.join(f'{k} = ?' for k in sets)} WHERE id = ?",
                [*sets.values(), record_id],
            )

    def fail_pending(self, reason: str, sweep_id: str | None = None) -> int:
        """Mark pending records (of one sweep, or all) as failed; returns how many."""
        where, args = "status = 'pending'", []
        if sweep_id:
            where += " AND sweep_id = ?"
            args.append(sweep_id)
        with self._transaction() as conn:
            cur = conn.execute(
                f"UPDATE runs SET status = 'failed', reason = ?, finished_at = ? WHERE {where}",
                [reason, stored_now(), *args],
            )
        return cur.rowcount

    # -- reading ---------------------------------------------------------------------------

    def latest_sweep(self, key: str) -> str | None:
        """The newest sweep id that is ``key`` or ``key.<suffix>`` (a ``--fresh`` restart)."""
        row = self._conn.execute(
            "SELECT sweep_id FROM runs WHERE sweep_id = ? OR sweep_id LIKE ? "
            "GROUP BY sweep_id ORDER BY MAX(created_at) DESC, MAX(rowid) DESC LIMIT 1",
            (key, key.replace("%", "") + ".%"),
        ).fetchone()
        return row[0] if row else None

    def get(self, record_id: str) -> RunRecord:
        """The record whose id is or starts with ``record_id`` (at least 4 characters)."""
        if len(record_id) < 4:
            raise StoreError(f"record id '{record_id}' is too short", "give at least 4 characters")
        rows = self._conn.execute(
            "SELECT * FROM runs WHERE id LIKE ? LIMIT 2", (record_id.replace("%", "") + "%",)
        ).fetchall()
        if not rows:
            raise StoreError(f"no record '{record_id}' in {self.path}", "see: aiot results list")
        if len(rows) > 1:
            raise StoreError(f"record id '{record_id}' is ambiguous", "give more characters")
        return _row_to_record(rows[0])

    def query(self, *, kind: str | None = None, status: str | None = None,
              sweep_id: str | None = None, device: str | None = None, model: str | None = None,
              fmt: str | None = None, limit: int | None = None) -> list[RunRecord]:
        """Records matching every given filter, oldest first."""
        filters = {"kind": kind, "status": status, "sweep_id": sweep_id, "device": device,
                   "model": model, "format": fmt}
        clauses = [(f"{col} = ?", val) for col, val in filters.items() if val is not None]
        sql = "SELECT * FROM runs"
        if clauses:
            sql += " WHERE " + " AND ".join(c for c, _ in clauses)
        args = [v for _, v in clauses]
        if limit:
            # The newest ``limit`` records, returned oldest first like the unlimited query.
            sql += " ORDER BY created_at DESC, rowid DESC LIMIT ?"
            rows = self._conn.execute(sql, [*args, limit]).fetchall()[::-1]
        else:
            rows = self._conn.execute(sql + " ORDER BY created_at, rowid", args).fetchall()
        return [_row_to_record(r) for r in rows]


    # -- pushes ----------------------------------------------------------------------------

    def record_push(self, push: Push) -> None:
        """Remember that ``push.model`` in ``push.format`` is now on ``push.device``."""
        values = {**push.__dict__, "pushed_at": stored_now()}
        with self._transaction() as conn:
            conn.execute(f"INSERT INTO pushes ({', '.join(values)}) "
                         f"VALUES ({', '.join('?' * len(values))})", list(values.values()))

    def last_push(self, device: str) -> Push | None:
        """What was last pushed to ``device``, or None if nothing was."""
        row = self._conn.execute(
            "SELECT device, model, format, reference, binarize, weights, artifact_sha256, remote "
            "FROM pushes WHERE device = ? ORDER BY id DESC LIMIT 1", (device,)).fetchone()
        return Push(**dict(row)) if row else None


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


def open_store(results_dir: Path) -> Store:
    """Open (creating and migrating as needed) the store in ``results_dir``."""
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create results folder {results_dir}: {exc}") from None
    return Store(results_dir / DB_NAME)
