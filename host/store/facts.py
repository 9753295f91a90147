"""Each record's facts, the few values a summary of the whole store reads, in a compact table
kept by SQLite itself.

A lab's record is ~8 KB (its raw samples), and a summary (:mod:`aiot.host.report.scale`)
reads of it only its status, times, verdict, latency, load time, configuration and a few
provenance facts. Reading those from the records costs a read of every record's pages and a
decode of its JSON (~90 µs a record, 100 s at 1M records); ``run_facts`` holds them in ~100
bytes a record, so the summary reads one narrow table and fetches whole records by primary
key only for the few runs it shows.

* ``run_facts``: one row per record (``seq`` orders them as the records were stored; ``id``
  is the record's primary key): sweep, kind, status, times, device, validity, latency (the
  rule of :func:`aiot.host.store.identity.latency`, in SQL: :data:`identity.LATENCY_SQL`),
  load time, the ids of its key's parts and of its provenance facts, and its telemetry.
* ``run_texts``: each distinct text a fact names by id: what a key is made of
  (:data:`identity.KEY_COLUMNS` and :data:`identity.KEY_SPEC`, ``key_id``; :func:`key_of`
  makes the key with :func:`identity.key`, the one owner of run identity: the table only
  interns its parts) and the provenance facts a summary names (:data:`SLIM_PROVENANCE`:
  versions, device, runtime; ``parts_id``).

Triggers on ``runs`` keep them, so every write (a run begun and finished, an import, a
prune, a recovery's copy, a failed pending record) changes a record and its facts in one
transaction, whichever path made it. A store from before (schema v5) gets them built once
from its records (:func:`fill`, logged). :func:`problem` compares them with the records
cheaply (counts, triggers) before each summary (:func:`require`), :func:`disagreement` in
full on demand (``aiot results check``), and :func:`rebuild` makes them again from the
records.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time

from aiot.core.errors import StoreError
from aiot.host.store import identity, readable

log = logging.getLogger(__name__)

#: The provenance facts a summary names (versions, device, runtime): few distinct values in
#: a lab's store, interned in ``run_texts``.
SLIM_PROVENANCE = ("aiot_version", "git", "host", "runtime", "device", "toolchain")
#: The telemetry readings of ``provenance.device_state`` (its ``before`` and ``after``).
SLIM_STATE = ("timestamp", "cpu_temp_max_c", "cpu_freq_khz")
STATE_PATHS = [f"device_state.{phase}.{name}" for phase in ("before", "after") for name in SLIM_STATE]

_TRIGGERS = ("runs_facts_insert", "runs_facts_update", "runs_facts_delete")
def json_paths(names) -> str:
    """``'$.a', '$.b'``: the JSON paths of ``names`` as arguments of ``json_extract``."""
    return ", ".join(f"'$.{name}'" for name in names)


def _made(r: str) -> dict[str, str]:
    """The SQL of each fact made of the record named by ``r`` (``NEW.``, or nothing over
    ``runs``): its columns as they are, its latency, and the texts interned in ``run_texts``:
    what its key is made of, its provenance facts and its telemetry."""
    spec, prov = f"{r}spec_json", f"{r}provenance_json"
    key_text = (f"json_array({', '.join(r + c for c in identity.KEY_COLUMNS)}, "
                f"CASE WHEN json_valid({spec}) THEN json_extract({spec}, "
                f"{json_paths((*identity.KEY_COLUMNS, *identity.KEY_SPEC))}) END)")
    parts = (f"CASE WHEN json_valid({prov}) THEN json_extract({prov}, "
             f"{json_paths(SLIM_PROVENANCE)}) ELSE '[]' END")
    # Telemetry only where it may make a reading (build._readings: a temperature, or a
    # frequency): most stores' records carry a device state without either (a VM, a container).
    reading = " OR ".join(
        f"json_extract({prov}, '$.device_state.{phase}.cpu_temp_max_c') IS NOT NULL OR EXISTS "
        f"(SELECT 1 FROM json_each({prov}, '$.device_state.{phase}.cpu_freq_khz') WHERE value)"
        for phase in ("before", "after"))
    state = (f"CASE WHEN json_valid({prov}) THEN CASE WHEN {reading} "
             f"THEN json_extract({prov}, {json_paths(STATE_PATHS)}) END END")
    plain = ("id", "sweep_id", "kind", "status", "created_at", "finished_at", "device", "validity")
    return {**{c: r + c for c in plain}, "latency_ms": identity.LATENCY_SQL.format(r=r),
            "load_ms": f"{r}load_ms", "key_text": key_text, "parts_text": parts, "state": state}


def _stored() -> dict[str, str]:
    """The same facts as stored (``run_facts f``, its texts joined as ``k`` and ``p``)."""
    return {c: {"key_text": "k.text", "parts_text": "p.text"}.get(c, f"f.{c}") for c in _made("")}


_NEW = _made("NEW.")
_TABLES = f"""
CREATE TABLE run_texts (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);
--
CREATE TABLE run_facts (
    seq          INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    sweep_id     TEXT,
    kind         TEXT,
    status       TEXT,
    created_at   TEXT,
    finished_at  TEXT,
    device       TEXT,
    validity     TEXT,
    latency_ms   REAL,
    load_ms      REAL,
    key_id       INTEGER NOT NULL REFERENCES run_texts (id),
    parts_id     INTEGER NOT NULL REFERENCES run_texts (id),
    state        TEXT
);
--
CREATE VIEW run_facts_new AS SELECT {', '.join(f'NULL AS {c}' for c in _NEW)} WHERE 0;
--
CREATE TRIGGER run_facts_make INSTEAD OF INSERT ON run_facts_new BEGIN
    INSERT OR IGNORE INTO run_texts (text) VALUES (NEW.key_text), (NEW.parts_text);
    INSERT OR REPLACE INTO run_facts (seq, id, sweep_id, kind, status, created_at, finished_at,
                                      device, validity, latency_ms, load_ms, key_id, parts_id,
                                      state)
    VALUES (coalesce((SELECT seq FROM run_facts WHERE id = NEW.id),
                     (SELECT coalesce(max(seq), 0) + 1 FROM run_facts)),
            NEW.id, NEW.sweep_id, NEW.kind, NEW.status, NEW.created_at, NEW.finished_at,
            NEW.device, NEW.validity, NEW.latency_ms, NEW.load_ms,
            (SELECT id FROM run_texts WHERE text = NEW.key_text),
            (SELECT id FROM run_texts WHERE text = NEW.parts_text), NEW.state);
END
"""

# The facts are made in one statement per record (SQLite parses each JSON text once in it).
_KEEPERS = f"""
CREATE TRIGGER runs_facts_insert AFTER INSERT ON runs BEGIN
    INSERT INTO run_facts_new VALUES ({', '.join(_NEW.values())});
END;
--
CREATE TRIGGER runs_facts_update AFTER UPDATE ON runs BEGIN
    DELETE FROM run_facts WHERE id = OLD.id AND OLD.id IS NOT NEW.id;
    INSERT INTO run_facts_new VALUES ({', '.join(_NEW.values())});
END;
--
CREATE TRIGGER runs_facts_delete AFTER DELETE ON runs BEGIN
    DELETE FROM run_facts WHERE id = OLD.id;
END
"""


def _statements(script: str) -> list[str]:
    """The statements of ``script``, each ended by a line ``--`` (a trigger's body holds
    semicolons of its own)."""
    return [s.strip() for s in script.split("\n--\n") if s.strip()]


def create(conn: sqlite3.Connection) -> None:
    """The facts' tables and the triggers that keep them (inside the caller's transaction)."""
    for statement in _statements(_TABLES + "\n--\n" + _KEEPERS):
        conn.execute(statement)


def fill(conn: sqlite3.Connection) -> int:
    """Every record's facts, made from the records (a store from before the facts, or a
    rebuild): one pass over the store, logged since it reads every record once."""
    started = time.monotonic()
    total = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    if total:
        log.warning("making the report's facts of %d records from the records (once; a large "
                    "store takes a while)", total)
    conn.execute(f"INSERT INTO run_facts_new SELECT {', '.join(_made('').values())} FROM runs "
                 "ORDER BY rowid")
    if total:
        log.warning("made the facts of %d records in %.1f s", total, time.monotonic() - started)
    return total


def rebuild(conn: sqlite3.Connection) -> int:
    """Make every fact again from the records (inside the caller's transaction)."""
    for name in _TRIGGERS:  # all of it, whatever is left of it
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    conn.execute("DROP VIEW IF EXISTS run_facts_new")  # its trigger goes with it
    for table in ("run_facts", "run_texts"):
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    create(conn)
    return fill(conn)


def problem(conn: sqlite3.Connection) -> str | None:
    """Why the facts cannot be trusted at a glance (triggers missing, counts differ), or None:
    index counts only, milliseconds at any size."""
    triggers = conn.execute(
        f"SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND name IN "
        f"({', '.join('?' * len(_TRIGGERS))})", _TRIGGERS).fetchone()[0]
    if triggers != len(_TRIGGERS):
        return "the triggers that keep them are missing"
    records = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    facts = conn.execute("SELECT COUNT(*) FROM run_facts").fetchone()[0]
    if records != facts:
        return f"{facts} facts for {records} records"
    return None


def differences(conn: sqlite3.Connection) -> int:
    """How many records' facts differ from what their records say (reads every record)."""
    stored = (f"SELECT {', '.join(_stored().values())} FROM run_facts f "
              "LEFT JOIN run_texts k ON k.id = f.key_id LEFT JOIN run_texts p ON p.id = f.parts_id")
    made = f"SELECT {', '.join(_made('').values())} FROM runs"
    return conn.execute(f"SELECT (SELECT COUNT(*) FROM ({made} EXCEPT {stored})) + "
                        f"(SELECT COUNT(*) FROM ({stored} EXCEPT {made}))").fetchone()[0]


def disagreement(conn: sqlite3.Connection) -> str | None:
    """How the facts disagree with the records, comparing every one (reads every record),
    or None."""
    wrong = problem(conn)
    if wrong is None and (n := differences(conn)):
        wrong = f"{n} facts differ from their records"
    return wrong


class FactsDisagree(StoreError):
    """A store's facts disagree with its records (``aiot results check`` makes them again);
    ``wrong`` says how."""

    def __init__(self, message: str, hint: str | None = None, wrong: str = "") -> None:
        super().__init__(message, hint)
        self.wrong = wrong


def disagree_error(path, wrong: str) -> FactsDisagree:
    """The one line that refuses a summary from facts that disagree with the records."""
    return FactsDisagree(f"result store {path}: the facts its report reads disagree with its "
                         f"records ({wrong})",
                         "run aiot results check, which makes them again from the records", wrong)


def require(store) -> None:
    """Refuse (one line) a store whose facts disagree with its records at a glance (counts,
    triggers), so a summary never reports from wrong facts."""
    with store._errors():
        wrong = problem(store._conn)
    if wrong:
        raise disagree_error(store.path, wrong)


# -- reading -----------------------------------------------------------------------------------

#: What :func:`iter_facts` yields of each record, in this order.
FACTS = ("id", "kind", "status", "sweep_id", "created_at", "finished_at", "device", "validity",
         "latency_ms", "load_ms", "key_id", "parts_id", "state")


def iter_facts(store, sweep_id: str | None = None, batch: int = 2000):
    """Every record's facts (of one sweep) in the order the records were stored, as plain
    tuples of :data:`FACTS`, read ``batch`` rows at a time (one pass over the facts table,
    whose rows are ~100 bytes: never over the records)."""
    where, args = ("WHERE sweep_id = ?", (sweep_id,)) if sweep_id else ("", ())
    with store._errors():
        cursor = store._conn.cursor()
        cursor.row_factory = None
        cursor.execute(f"SELECT {', '.join(FACTS)} FROM run_facts {where} ORDER BY seq", args)
    while True:
        with store._errors():
            rows = cursor.fetchmany(batch)
        if not rows:
            return
        yield from rows


class _Parts:
    """What :func:`identity.key` reads of a record: its key columns and spec entries."""

    __slots__ = ("device", "format", "host", "model", "spec", "threads")

    def __init__(self, columns, spec: dict) -> None:
        self.device, self.model, self.format, self.threads, self.host = columns
        self.spec = spec


def key_of(text: str) -> identity.Key:
    """The key of a ``key_id``'s text: :func:`identity.key` of the columns and spec entries
    it holds."""
    values = json.loads(text)
    n = len(identity.KEY_COLUMNS)
    names = (*identity.KEY_COLUMNS, *identity.KEY_SPEC)
    spec = {k: v for k, v in zip(names, values[n] or ()) if v is not None}
    return identity.key(_Parts(values[:n], spec))


def texts(store) -> dict[int, str]:
    """Every interned text by id (few: one per configuration and per set of provenance facts
    a store was measured with); :func:`key_of` and :func:`parts_of` read them."""
    return dict(store._read("SELECT id, text FROM run_texts"))


def parts_of(text: str) -> dict:
    """A ``parts_id``'s text as a (slim) provenance dict."""
    values = json.loads(text) or ()
    return readable.repaired("provenance", {k: v for k, v in zip(SLIM_PROVENANCE, values)
                                            if v is not None})


def state_of(text: str | None) -> dict | None:
    """A fact's telemetry as ``provenance.device_state`` (``before``, ``after``), or None."""
    values = json.loads(text) if text else ()
    if not any(v is not None for v in values):
        return None
    half = len(SLIM_STATE)
    state = {"before": dict(zip(SLIM_STATE, values[:half])),
             "after": dict(zip(SLIM_STATE, values[half:]))}
    return readable.repaired("provenance", {"device_state": state}).get("device_state")
