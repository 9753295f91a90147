"""Reading a whole store one record at a time, in bounded memory (for readers of every record:
the report of a large store). ``Store.query`` returns a list, which at 100k records is
gigabytes of decoded JSON; this yields each record and lets it go."""

from __future__ import annotations

from collections.abc import Iterator

from aiot.host.store.store import RunRecord, Store, _row_to_record


def count(store: Store, sweep_id: str | None = None) -> int:
    """How many records the store holds (of one sweep): an index count, no row read."""
    where, args = ("WHERE sweep_id = ?", (sweep_id,)) if sweep_id else ("", ())
    return store._read(f"SELECT COUNT(*) FROM runs {where}", args)[0][0]


def iter_records(store: Store, sweep_id: str | None = None) -> Iterator[RunRecord]:
    """Every record (of one sweep) in the order they were stored, one at a time."""
    where, args = ("WHERE sweep_id = ?", (sweep_id,)) if sweep_id else ("", ())
    with store._errors():  # damage found while reading: one line
        cursor = store._conn.execute(f"SELECT * FROM runs {where} ORDER BY rowid", args)
        for row in cursor:
            yield _row_to_record(row)
