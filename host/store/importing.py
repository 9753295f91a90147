"""``aiot results import``: records from an export file or another host's store, gathered here.

A lab with several hosts or CI jobs gathers its results in one store. The source is either
the JSON that ``aiot results export --format json`` writes (a list of records), read as a
stream (a 500 MB file is never held in memory), or another aiot result store (SQLite),
opened read-only through :class:`~aiot.host.store.store.Store`.

**Idempotent by record id.** A record whose id is already stored is skipped when it is the
same record (counted as already present) and reported as a conflict when it differs; the
stored one is never overwritten. Importing a file twice adds nothing.

**Untrusted input.** Every record is checked (:mod:`aiot.host.store.validate`); a bad one is
refused with one line naming it, and the others are imported.

**Decoded once, and only its columns.** A record of an export laid out as aiot writes it (or
one record a line) is read by msgspec: its columns decoded, its spec, result and provenance
only checked to be well-formed JSON, never built as Python objects (its raw samples are most of
its text; the standard library's decoder took 60 % of an import's time building them). Any
record msgspec does not take whole (NaN, a lone surrogate, another layout) is read again by
the standard library's decoder, as before, which says why it is refused.

**Whole batches.** Records are written in batches of :data:`BATCH` records, each batch one
transaction: a batch is stored whole or not at all, and a running sweep waits at most one
batch's write for the store (one transaction over 100k records would hold the write lock for
the whole import, and the sweep's writes would time out). An import stopped half-way (Ctrl-C,
a file that ends early) leaves whole batches only, and running it again resumes: what was
stored is already present. A file that is not an export at all is refused before anything is
written.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import msgspec

from aiot.core.errors import UsageError
from aiot.host.store.damage import is_sqlite
from aiot.host.store.store import BOOKKEEPING, RunRecord, Store, utc_now
from aiot.host.store.validate import PARTS, BadRecord, check_record, record_name

#: Records per transaction (see the module's doc).
BATCH = 2000
CHUNK_CHARS = 1 << 20
#: The longest one record may be in an export file, in characters (raw samples included).
MAX_ITEM_CHARS = 16 * 1024 * 1024
_FIELDS = tuple(RunRecord.__dataclass_fields__)
_HINT = "give a file written by: aiot results export --format json -o FILE, or another results.db"


@dataclass
class ImportSummary:
    """What an import did, per record: stored, skipped as the same, in conflict, refused."""

    imported: int = 0
    present: int = 0
    conflicts: list[str] = field(default_factory=list)  # ids whose stored record differs
    refused: list[str] = field(default_factory=list)  # one line each: the record and why

    def line(self) -> str:
        """The one-line summary the CLI prints."""
        return (f"{self.imported} imported, {self.present} already present, "
                f"{len(self.conflicts)} conflicts, {len(self.refused)} refused")

    def to_dict(self) -> dict:
        return {"imported": self.imported, "already_present": self.present,
                "conflicts": self.conflicts, "refused": self.refused}


@dataclass
class _Item:
    """One record read from the source, before its checks: its fields, how long its JSON is,
    whether the decoder met NaN or ±Infinity in it, and its JSON as text to store: the whole
    record (``text``, from an export) or its JSON columns (``texts``, from another store).
    ``parts_decoded`` is false where spec, result and provenance stand as ``{}`` (an object
    msgspec checked but did not build): they are decoded from ``text`` if ever compared."""

    data: object
    chars: int
    nonfinite: bool
    text: str | None = None
    texts: dict | None = None
    parts_decoded: bool = True


class _Columns(msgspec.Struct, forbid_unknown_fields=True):
    """A record as msgspec reads it: its columns as any JSON value (the checks judge their
    types), its JSON parts kept as their text. A field it lacks stays ``UNSET``."""

    id: Any = msgspec.UNSET
    kind: Any = msgspec.UNSET
    status: Any = msgspec.UNSET
    created_at: Any = msgspec.UNSET
    sweep_id: Any = msgspec.UNSET
    reason: Any = msgspec.UNSET
    finished_at: Any = msgspec.UNSET
    device: Any = msgspec.UNSET
    model: Any = msgspec.UNSET
    format: Any = msgspec.UNSET
    threads: Any = msgspec.UNSET
    artifact_sha256: Any = msgspec.UNSET
    size_bytes: Any = msgspec.UNSET
    median_ms: Any = msgspec.UNSET
    p90_ms: Any = msgspec.UNSET
    load_ms: Any = msgspec.UNSET
    accuracy: Any = msgspec.UNSET
    validity: Any = msgspec.UNSET
    spec: msgspec.Raw = msgspec.UNSET
    result: msgspec.Raw = msgspec.UNSET
    provenance: msgspec.Raw = msgspec.UNSET


_COLUMNS = msgspec.json.Decoder(_Columns)
_PART_NAMES = {name for name, _required in PARTS}


def _fast_fields(text: str) -> dict | None:
    """``text`` (one whole JSON object) as a record's fields, its parts ``{}`` or None; None
    where msgspec does not take it whole or a part is neither an object nor null (the
    standard library's reading then says why)."""
    try:
        got = _COLUMNS.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return None
    unset = msgspec.UNSET
    data = {k: v for k, v in msgspec.structs.asdict(got).items() if v is not unset}
    for name in _PART_NAMES.intersection(data):
        raw = bytes(data[name])
        if raw.startswith(b"{"):
            data[name] = {}
        elif raw == b"null":
            data[name] = None
        else:
            return None
    return data


# -- reading an export file as a stream --------------------------------------------------------

class _ArrayReader:
    """The items of one JSON array read from ``stream`` one at a time (bounded memory)."""

    def __init__(self, stream: TextIO, name: str) -> None:
        self.stream, self.name = stream, name
        self.buf, self.pos, self.eof, self.items = "", 0, False, 0
        self.nonfinite = False
        self.decoder = json.JSONDecoder(parse_constant=self._constant)
        self.fast, self.missed = 0, 0

    def _constant(self, text: str) -> float:
        self.nonfinite = True  # NaN, Infinity: Python reads them, JSON has none
        return float(text)

    def _fill(self) -> bool:
        if self.eof:
            return False
        chunk = self.stream.read(CHUNK_CHARS)
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
        self.eof = not chunk
        return bool(chunk)

    def _next_char(self) -> str:
        """The next character that is not white space ("" at the end of the file)."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill():
                return ""

    def _broken(self, what: str) -> UsageError:
        return UsageError(f"{self.name} is not a whole results export: {what} "
                          f"(after {self.items} records)",
                          "records read before this point were imported in whole batches; "
                          "fix or re-export the file and import it again (stored records are "
                          "skipped)")

    def _candidate_end(self) -> int:
        """Where the record at ``pos`` ends if the file is laid out as aiot writes it (its
        closing brace on a line of its own, as indented as its opening one) or one record a
        line (the line's last brace); -1 where the buffer holds no such end."""
        buf, start = self.buf, self.pos
        if buf[start] != "{":
            return -1
        if buf.startswith("{\n", start):
            indent = buf[buf.rfind("\n", 0, start) + 1:start]
            end = buf.find(f"\n{indent}}}", start)
            return -1 if end < 0 else end + len(indent) + 2
        line_end = buf.find("\n", start)
        return -1 if line_end < 0 else buf.rfind("}", start, line_end) + 1

    def _fast_item(self) -> _Item | None:
        """The record at ``pos`` read by msgspec, or None (then the standard library reads
        it). A text that decodes whole as one object is the record the standard library
        would read (an object's end is where its braces close), so a wrong guess of its end
        only costs a try; after many misses (a file of another layout) it is not tried."""
        if self.missed > 32 + self.fast:
            return None
        end = self._candidate_end()
        text = self.buf[self.pos:end] if end > self.pos else ""
        data = _fast_fields(text) if text else None
        if data is None:
            self.missed += 1
            return None
        self.fast += 1
        self.pos = end
        self.items += 1
        return _Item(data, len(text), False, text=text, parts_decoded=False)

    def _item(self) -> _Item:
        if not self._next_char():
            raise self._broken("it ends early")
        fast = self._fast_item()
        if fast is not None:
            return fast
        while True:
            self.nonfinite = False
            try:
                item, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if len(self.buf) - self.pos > MAX_ITEM_CHARS:
                    raise self._broken(f"record {self.items + 1} is longer than "
                                       f"{MAX_ITEM_CHARS} characters") from None
                if self._fill():
                    continue
                what = "it ends in the middle of a record" if exc.pos >= len(self.buf) - 1 \
                    else f"bad JSON in record {self.items + 1} ({exc.msg})"
                raise self._broken(what) from None
            text, self.pos = self.buf[self.pos:end], end
            self.items += 1
            return _Item(item, len(text), self.nonfinite, text=text)

    def __iter__(self) -> Iterator:
        first = self._next_char()
        if first != "[":
            raise UsageError(f"{self.name} is not an aiot results export (a JSON list of records)",
                             _HINT)
        self.pos += 1
        if self._next_char() == "]":
            self.pos += 1
        else:
            while True:
                yield self._item()
                sep = self._next_char()
                self.pos += 1
                if sep == "]":
                    break
                if sep != ",":
                    raise self._broken("it ends early" if not sep else f"{sep!r} after a record")
        if self._next_char():
            raise self._broken("data after the list of records")


def read_export(path: Path) -> Iterator:
    """The items of an export file one at a time (each still to be checked)."""
    try:
        with path.open(encoding="utf-8") as stream:
            yield from _ArrayReader(stream, str(path))
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not an aiot results export: not UTF-8 text ({exc.reason})",
                         _HINT) from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}", _HINT) from None


# -- reading another store ---------------------------------------------------------------------

def _refuse_foreign(path: Path) -> None:
    """A SQLite file that is not an aiot store is named so (opening it as a store would say
    it needs migrating, which is not the case)."""
    from urllib.parse import quote

    try:
        conn = sqlite3.connect(f"file:{quote(str(path.absolute()))}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise UsageError(f"cannot read {path} as an aiot result store ({exc})", _HINT) from None
    if not {"meta", "runs"} <= tables:
        raise UsageError(f"{path} is a SQLite file but not an aiot result store", _HINT)


def read_store(path: Path) -> Iterator:
    """The records of another aiot store, each as an export item (still to be checked)."""
    _refuse_foreign(path)
    other = Store(path, readonly=True)
    try:
        with other._errors():  # damage or a lock found while reading: one line
            cursor = other._conn.execute("SELECT * FROM runs")
            for row in cursor:
                yield _row_item(dict(row))
    finally:
        other.close()


def _row_item(row: dict) -> _Item:
    """A stored row as an item: its JSON columns decoded for the checks, kept as text to
    store; one that does not decode stays text (and is refused)."""
    for name in BOOKKEEPING:  # the other store's, not the record's
        row.pop(name, None)
    texts, nonfinite = {}, []
    for name, _required in PARTS:
        text = texts[f"{name}_json"] = row.pop(f"{name}_json")
        try:
            row[name] = json.loads(text, parse_constant=lambda c: nonfinite.append(c) or 0.0) \
                if isinstance(text, str) else text
        except (ValueError, RecursionError):
            row[name] = text
    chars = sum(len(t) for t in texts.values() if isinstance(t, str))
    return _Item(row, chars, bool(nonfinite), texts=texts)


# -- writing -----------------------------------------------------------------------------------

def _insert_sql() -> str:
    """One record's INSERT: its checked columns, and its JSON columns either as given (from
    another store) or cut by SQLite from the record's JSON text (from an export: never
    decoded and encoded again in Python). SQLite inserts nothing where its own reading of
    the text finds parts of other types than the checks saw (a field given twice)."""
    columns = [c for c in _FIELDS if c not in ("spec", "result", "provenance")]
    parts = [f"CASE WHEN :item IS NULL THEN :{name}_json ELSE json_extract(:item, '$.{name}') END"
             for name, _required in PARTS]
    same = ("json_type(:item, '$.spec') = 'object' AND json_type(:item, '$.provenance') = "
            "'object' AND coalesce(json_type(:item, '$.result'), 'null') IN ('object', 'null')")
    return (f"INSERT INTO runs ({', '.join(columns)}, {', '.join(f'{n}_json' for n, _ in PARTS)}, "
            "imported_at) "
            f"SELECT {', '.join(':' + c for c in columns)}, {', '.join(parts)}, :imported_at "
            f"WHERE :item IS NULL OR ({same})")


def _content(row: dict) -> dict:
    """What makes two records the same: their columns, with the JSON ones decoded."""
    if "parts" in row:  # an item of this import
        parts = row["parts"]
        if parts is None:  # read by msgspec: its parts were checked, not built
            whole = json.loads(row["item"])
            parts = {name: whole.get(name) for name, _required in PARTS}
        return {**{k: v for k, v in row.items() if k not in ("parts", "item", *BOOKKEEPING)
                   and not k.endswith("_json")}, **parts}
    data = {k: v for k, v in row.items() if k not in BOOKKEEPING and not k.endswith("_json")}
    for name, _required in PARTS:
        text = row[f"{name}_json"]
        data[name] = json.loads(text) if text else None
    return data


class _Importer:
    def __init__(self, store: Store, summary: ImportSummary) -> None:
        self.store, self.summary, self.batch = store, summary, {}
        self.sql = _insert_sql()
        self.imported_at = utc_now()

    def add(self, item: _Item) -> None:
        try:
            row = check_record(item.data, item.chars, item.nonfinite)
        except BadRecord as exc:
            self.summary.refused.append(f"record {record_name(item.data)} {exc}")
            return
        row["parts"] = {name: item.data.get(name) for name, _required in PARTS} \
            if item.parts_decoded else None
        row["item"] = item.text
        row["imported_at"] = self.imported_at
        row.update(item.texts or {f"{name}_json": None for name, _required in PARTS})
        earlier = self.batch.get(row["id"])
        if earlier is not None:  # the same id twice in one file
            self._judge(earlier, row)
            return
        self.batch[row["id"]] = row
        if len(self.batch) >= BATCH:
            self.flush()

    def _judge(self, stored: dict, row: dict) -> None:
        if _content(stored) == _content(row):
            self.summary.present += 1
        else:
            self.summary.conflicts.append(row["id"])

    def _stored(self, conn, ids: list[str], columns: str = "*") -> dict[str, dict]:
        found = {}
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            found.update((r["id"], dict(r)) for r in conn.execute(
                f"SELECT {columns} FROM runs WHERE id IN ({', '.join('?' * len(part))})", part))
        return found

    def flush(self) -> None:
        if not self.batch:
            return
        rows, self.batch = self.batch, {}
        with self.store._transaction() as conn:
            stored = self._stored(conn, list(rows))
            new = [row for rid, row in rows.items() if rid not in stored]
            conn.executemany(self.sql, new)
            taken = self._stored(conn, [row["id"] for row in new], "id")
        for rid, row in rows.items():  # counted once the batch is committed
            if rid in stored:
                self._judge(stored[rid], row)
        for row in new:
            if row["id"] not in taken:
                self.summary.refused.append(f"record {row['id']} has a field given twice, "
                                            "with values of other types")
        self.summary.imported += len(taken)


def import_records(store: Store, source: Path, summary: ImportSummary | None = None) -> ImportSummary:
    """Import every record of ``source`` (an export file or another store) into ``store``.

    Args:
        summary: filled as the import goes (what was done stays counted if it stops).

    Raises:
        UsageError: ``source`` is missing, the store itself, not an export or store, or (an
            export) ends early or holds broken JSON: whole batches before that stay stored.
        StoreError: ``source`` is a store newer than this aiot, damaged, or one side's disk
            fails.
    """
    summary = summary if summary is not None else ImportSummary()
    if not source.is_file():
        raise UsageError(f"no file {source} to import", _HINT)
    if source.resolve() == store.path.resolve():
        raise UsageError(f"{source} is the result store itself", "import another host's store")
    items = read_store(source) if is_sqlite(source) else read_export(source)
    importer = _Importer(store, summary)
    try:
        for item in items:
            importer.add(item)
    except UsageError:
        importer.flush()  # what was read and checked before a broken end is stored whole
        raise
    importer.flush()
    return summary
