"""The store's read queries: each bounded by what it asks for and answered from an index.

Every filter is pushed into SQL, so a reader gets the rows it asked for and no others: the
newest N from the ``created_at`` index, one sweep from the ``sweep_id`` index, one record by
its primary key, and an id or sweep prefix as a range of its index (``LIKE`` compares without
case and so cannot use one). ``tests/unit/test_store_plans.py`` reads SQLite's query plan of
each to keep it so.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import UTC, datetime

from aiot.core.errors import UsageError

#: Above every character an id or sweep id holds: ``[prefix, prefix + _TOP)`` is the range
#: of the values that start with ``prefix``.
_TOP = "\U0010ffff"
_ORDER = {False: "created_at, rowid", True: "created_at DESC, rowid DESC"}


@dataclass(frozen=True)
class Filters:
    """Which records a read wants: every given field must match (``since``/``until``: ISO 8601
    times, ``since`` inclusive and ``until`` exclusive)."""

    kind: str | None = None
    status: str | None = None
    sweep_id: str | None = None
    device: str | None = None
    model: str | None = None
    format: str | None = None
    since: str | None = None
    until: str | None = None
    host: str | None = None  # a host id (identity.this_host), from the record's provenance
    own: bool | None = None  # True: this store's own runs only; False: imported ones only

    def where(self) -> tuple[str, list]:
        """The SQL ``WHERE`` clause (``""`` for none) and its arguments."""
        clauses, args = [], []
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if f.name == "own":
                clauses.append(f"imported_at IS {'' if value else 'NOT '}NULL")
                continue
            op = {"since": "created_at >= ?", "until": "created_at < ?"}.get(f.name, f"{f.name} = ?")
            clauses.append(op)
            args.append(value)
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), args


def select(filters: Filters, newest_first: bool = False, limit: int | None = None,
           offset: int = 0) -> tuple[str, list]:
    """``SELECT *`` of the records ``filters`` wants, by time (oldest first unless
    ``newest_first``), at most ``limit`` of them after skipping ``offset``."""
    where, args = filters.where()
    sql = f"SELECT * FROM runs{where} ORDER BY {_ORDER[newest_first]}"
    if limit is not None:
        sql += " LIMIT ? OFFSET ?"
        args = [*args, limit, offset]
    return sql, args


def prefix_range(prefix: str) -> tuple[str, str]:
    """``(low, high)``: the values starting with ``prefix`` are ``low <= v < high``."""
    return prefix, prefix + _TOP


BY_ID = "SELECT * FROM runs WHERE id = ?"
#: Records whose id is in a prefix's range, of one kind (or any, given NULL).
BY_ID_PREFIX = "SELECT * FROM runs WHERE id >= ? AND id < ? AND (? IS NULL OR kind = ?) LIMIT ?"
SWEEPS_BY_PREFIX = ("SELECT DISTINCT sweep_id FROM runs WHERE sweep_id >= ? AND sweep_id < ? "
                    "ORDER BY sweep_id LIMIT ?")
#: The newest sweep that is KEY or KEY.<suffix> (``.`` and ``/`` are neighbours in ASCII).
LATEST_SWEEP = ("SELECT sweep_id FROM runs WHERE sweep_id = ? OR (sweep_id > ? AND sweep_id < ?) "
                "OR sweep_id LIKE ? "
                "GROUP BY sweep_id ORDER BY MAX(created_at) DESC, MAX(rowid) DESC LIMIT 1")


#: One sweep's records counted by status (from the sweep index).
SWEEP_COUNTS = "SELECT status, COUNT(*) FROM runs WHERE sweep_id = ? GROUP BY status"
#: One sweep's newest failures.
SWEEP_FAILURES = ("SELECT id, device, model, format, threads, reason, created_at FROM runs "
                  "WHERE sweep_id = ? AND status = 'failed' ORDER BY created_at DESC LIMIT ?")
#: The sweeps among the newest N records (N bounds the read, whatever the store's size).
RECENT_SWEEPS = ("SELECT sweep_id, MIN(created_at) AS started, MAX(COALESCE(finished_at, created_at)) "
                 "AS ended, COUNT(*) AS records, SUM(status = 'ok') AS ok, SUM(status = 'failed') AS "
                 "failed, SUM(status = 'pending') AS pending, GROUP_CONCAT(DISTINCT device) AS devices "
                 "FROM (SELECT sweep_id, created_at, finished_at, status, device FROM runs "
                 "ORDER BY created_at DESC LIMIT ?) WHERE sweep_id IS NOT NULL "
                 "GROUP BY sweep_id ORDER BY MAX(created_at) DESC LIMIT ?")


def latest_sweep_args(key: str) -> tuple[str, str, str, str]:
    """The arguments of :data:`LATEST_SWEEP` for ``key``: the sweep ``key``, a ``--fresh``
    restart ``<token>.key`` (and, from stores of earlier versions, ``key.<time>``). ``key``
    is hex: nothing in it is a LIKE wildcard."""
    return key, key + ".", key + "/", "%." + key


def parse_time(text: str | None, option: str) -> str | None:
    """A user's ``--since``/``--until`` (``2026-05-01``, ``2026-05-01T12:00``, with or without
    a zone; UTC when none) as the store writes times, so they compare as text."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"{option} '{text}' is not a date or time",
                         "give an ISO 8601 date or time, e.g. 2026-05-01 or 2026-05-01T12:00") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="seconds")
