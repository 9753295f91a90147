"""Another host's result store, opened for ``aiot results import``: a file as untrusted as a
device's answer.

Before a row is read the file must be an aiot store this aiot reads: a SQLite file with aiot's
tables, a ``schema_version`` that is a version number, and every column of a record in its
``runs`` table; else it is refused whole, in one line, before anything is written. Its rows
are then read one at a time, each only once SQLite has measured it (``length()`` of its
columns, in SQL): a row longer than :data:`MAX_ROW_CHARS` is named and refused without ever
being fetched into Python (Python's memory does not grow with it; SQLite holds its longest
value once, while it measures it).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from aiot.core.errors import UsageError
from aiot.host.store.schema import SCHEMA_VERSION
from aiot.host.store.store import RunRecord
from aiot.host.store.validate import MAX_JSON_CHARS, PARTS, TEXT_CAPS

HINT = "give a file written by: aiot results export --format json -o FILE, or another results.db"
#: The longest row read from another store, in characters: a record's JSON and its columns.
MAX_ROW_CHARS = MAX_JSON_CHARS + sum(TEXT_CAPS.values()) + 4096
#: The columns of ``runs`` that hold a record (the store's own bookkeeping aside).
RECORD_COLUMNS = tuple(f"{name}_json" if name in dict(PARTS) else name
                       for name in RunRecord.__dataclass_fields__)


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{quote(str(path.absolute()))}?mode=ro", uri=True)


def refuse_foreign(path: Path) -> None:
    """Refuse, in one line, a SQLite file that is not an aiot store this aiot can read: other
    tables (opening it as a store would say it needs migrating, which is not the case), a
    ``schema_version`` that is no version number, a ``runs`` table without a record's columns.

    Raises:
        UsageError: what it is instead.
    """
    try:
        conn = _connect(path)
        try:
            tables = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"meta", "runs"} <= tables:
                raise UsageError(f"{path} is a SQLite file but not an aiot result store", HINT)
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            columns = {r[1] for r in conn.execute("PRAGMA table_xinfo(runs)")}
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise UsageError(f"cannot read {path} as an aiot result store ({exc})", HINT) from None
    version = row[0] if row else None
    if not re.fullmatch(r"[0-9]{1,6}", str(version)):
        raise UsageError(f"{path} is not an aiot result store this aiot reads: its schema_version "
                         f"is {str(version)[:40]!r}, not a version number (up to "
                         f"v{SCHEMA_VERSION})", HINT)
    missing = [c for c in RECORD_COLUMNS if c not in columns]
    if missing and int(version) >= SCHEMA_VERSION:  # an older one is refused as older
        raise UsageError(f"{path} is not a whole aiot result store: its runs table lacks "
                         f"column(s) {', '.join(missing)}", HINT)


def rows(conn: sqlite3.Connection) -> Iterator[dict | tuple[str, int]]:
    """Every row of ``runs`` in ``conn`` (an aiot store, read-only) as a dict, or, for a row
    longer than :data:`MAX_ROW_CHARS`, ``(its id cut to 40 characters, its length)``: that
    row is never fetched. SQLite measures each row first (``length()`` of every column, once
    a row: SQLite holds the row's longest value while it does, in its own memory, never in
    Python), then the rows that fit are read."""
    columns = [r[1] for r in conn.execute("PRAGMA table_xinfo(runs)")]
    size = " + ".join(f'coalesce(length("{c}"), 0)' for c in columns)
    long = [(rowid, chars) for rowid, chars in conn.execute(f"SELECT rowid, {size} FROM runs")
            if chars > MAX_ROW_CHARS]
    cursor = conn.execute("SELECT * FROM runs WHERE rowid NOT IN (SELECT value FROM "
                          "json_each(?)) ORDER BY rowid", (json.dumps([r for r, _ in long]),))
    names = [d[0] for d in cursor.description]
    for row in cursor:
        yield dict(zip(names, row))
    for rowid, chars in long:
        found = conn.execute("SELECT substr(CAST(id AS TEXT), 1, 40) FROM runs WHERE rowid = ?",
                             (rowid,)).fetchone()
        yield (str(found[0]) if found else "?", chars)
