"""Versioned SQLite schema and its migrations.

``MIGRATIONS[n]`` takes a database at version ``n`` to ``n + 1``. A database written by a
newer aiot is refused rather than guessed at.
"""

from __future__ import annotations

import sqlite3

from aiot.host.store import facts

SCHEMA_VERSION = 7

_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id               TEXT PRIMARY KEY,
    sweep_id         TEXT,
    kind             TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('pending', 'ok', 'failed', 'skipped')),
    reason           TEXT,
    created_at       TEXT NOT NULL,
    finished_at      TEXT,
    device           TEXT,
    model            TEXT,
    format           TEXT,
    threads          INTEGER,
    artifact_sha256  TEXT,
    size_bytes       INTEGER,
    median_ms        REAL,
    p90_ms           REAL,
    load_ms          REAL,
    accuracy         REAL,
    spec_json        TEXT NOT NULL,
    result_json      TEXT,
    provenance_json  TEXT NOT NULL
);
CREATE INDEX runs_by_sweep ON runs (sweep_id);
CREATE INDEX runs_by_target ON runs (device, model, format, threads);
"""


def _execute_all(conn: sqlite3.Connection, script: str) -> None:
    """Run each statement of ``script`` inside the caller's transaction.

    (``executescript`` would COMMIT first and break the migration's atomicity.)
    """
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def _to_v1(conn: sqlite3.Connection) -> None:
    _execute_all(conn, _V1)


def _to_v2(conn: sqlite3.Connection) -> None:
    """v2: each run's VALID / INVALID verdict (see aiot.host.engine.validity); NULL for older runs."""
    conn.execute("ALTER TABLE runs ADD COLUMN validity TEXT")


def _to_v3(conn: sqlite3.Connection) -> None:
    """v3: what ``aiot push`` put on which device, so ``aiot sweep`` without ``--model`` can
    measure what was last pushed. ``reference`` is what resolves to the model again on this
    host (a zoo name or the user's file); run records never hold it."""
    _execute_all(conn, """
CREATE TABLE pushes (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    pushed_at        TEXT NOT NULL,
    device           TEXT NOT NULL,
    model            TEXT NOT NULL,
    format           TEXT NOT NULL,
    reference        TEXT NOT NULL,
    binarize         TEXT,
    weights          TEXT,
    artifact_sha256  TEXT NOT NULL,
    remote           TEXT NOT NULL
);
CREATE INDEX pushes_by_device ON pushes (device, id)
""")


def _to_v4(conn: sqlite3.Connection) -> None:
    """v4: which process wrote each record (pid, host, boot, process start), so a later
    campaign can tell a pending record of a killed process from one still being measured
    (see :func:`aiot.host.store.writer.is_gone`); NULL for older records (never reaped)."""
    conn.execute("ALTER TABLE runs ADD COLUMN writer_json TEXT")
    conn.execute("CREATE INDEX runs_pending ON runs (status) WHERE status = 'pending'")


def _to_v5(conn: sqlite3.Connection) -> None:
    """v5: records by time, so the newest N (``results list``), a time range and a filtered
    page are read from an index instead of sorting the whole table
    (see :mod:`aiot.host.store.queries`). The index holds each row's rowid, which orders
    records of the same second."""
    conn.execute("CREATE INDEX runs_by_time ON runs (created_at)")


def _to_v6(conn: sqlite3.Connection) -> None:
    """v6: each record's facts in a compact table kept by triggers, so a summary of the whole
    store (``aiot report``) reads ~100 bytes a record instead of every record
    (see :mod:`aiot.host.store.facts`). Their tables are made by v7, which keys them by host
    too (a store is always migrated to the newest version in one transaction)."""


#: The host id a record's provenance names (``provenance.host.id``), as SQL: NULL for a
#: record written before host ids were recorded, or one whose id is not text.
HOST_SQL = ("CASE WHEN json_valid(provenance_json) AND json_type(provenance_json, '$.host.id') "
            "= 'text' THEN json_extract(provenance_json, '$.host.id') END")


def _to_v7(conn: sqlite3.Connection) -> None:
    """v7: each record's host (see :func:`aiot.host.store.identity.this_host`) as a column
    computed from its provenance, with an index (``--host`` filters, a sweep's own records);
    when a record came in by ``aiot results import`` (``imported_at``, NULL for this host's
    own runs); the facts made again, their keys holding the host."""
    conn.execute(f"ALTER TABLE runs ADD COLUMN host TEXT GENERATED ALWAYS AS ({HOST_SQL}) VIRTUAL")
    conn.execute("ALTER TABLE runs ADD COLUMN imported_at TEXT")
    conn.execute("CREATE INDEX runs_by_host ON runs (host, created_at)")
    facts.rebuild(conn)


MIGRATIONS = {0: _to_v1, 1: _to_v2, 2: _to_v3, 3: _to_v4, 4: _to_v5, 5: _to_v6, 6: _to_v7}


def current_version(conn: sqlite3.Connection) -> int:
    """The schema version recorded in ``conn`` (0 for an empty database)."""
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if not has_meta:
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0
