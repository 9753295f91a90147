"""``aiot results import``: records from an export file or another host's store, gathered here.

A lab with several hosts or CI jobs gathers its results in one store. The source is either
the JSON that ``aiot results export --format json`` writes (a list of records), read as a
stream (a 500 MB file is never held in memory), or another aiot result store (SQLite),
opened read-only through :class:`~aiot.host.store.store.Store`.

**Idempotent by record id.** A record whose id is already stored is skipped when it is the
same record (counted as already present) and reported as a conflict when it differs; the
stored one is never overwritten. Importing a file twice adds nothing.

**Untrusted input.** An import is as untrusted as a device. Every record is checked
(:mod:`aiot.host.store.validate`: its numbers as a device's are, its parts against the
readers' schema, no time in the future); a bad one is refused with one line naming it (one
nested past the decoder's depth or holding a 5000-digit integer too), and the others are
imported. A field this aiot does not know (a newer aiot's) is left out and counted, not
refused. A file that is not an export (or starts with a UTF-8 byte order mark: accepted) and
another store that is not whole are refused before anything is written
(:mod:`aiot.host.store.foreign`, which also never fetches a row longer than a record may be).

**The verdict is judged here, never taken.** A record's ``validity`` (VALID / INVALID) says
whether its numbers are defensible; a file could say VALID of anything. The engine's judge
(:func:`aiot.host.engine.validity.judge_record`) is above the store, so the importing command
(:mod:`aiot.host.cli.results_gather`) hands it in as ``judge``: every record's verdict is
judged again from its own numbers, under the limits it was judged by (its stored ``limits``),
and stored (column and ``result.validity``); one that differs from the file's is named. Called
without a judge (a script), the store's layer cannot judge: the verdict is stored as unjudged
(``validity`` NULL, no ``result.validity``) and counted, never taken from the file.

**Decoded once, by msgspec.** A record of an export laid out as aiot writes it (or one record
a line) is read by msgspec, its spec, result and provenance included (the checks read them).
A batch keeps each record's text, not its decoded parts (its raw samples are most of it): a
record whose id is already stored is decoded again to be compared. Any record msgspec does
not take whole (NaN, a lone surrogate, another layout) is read again by the standard
library's decoder, as before, which says why it is refused.

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
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import msgspec

from aiot.core.errors import UsageError
from aiot.host.store import foreign
from aiot.host.store.damage import is_sqlite
from aiot.host.store.store import BOOKKEEPING, RunRecord, Store, utc_now
from aiot.host.store.validate import (
    PARTS,
    BadRecord,
    check_record,
    record_name,
    unknown_fields,
)

#: Records per transaction (see the module's doc).
BATCH = 2000
CHUNK_CHARS = 1 << 20
#: The longest one record may be in an export file, in characters (raw samples included).
MAX_ITEM_CHARS = 16 * 1024 * 1024
_FIELDS = tuple(RunRecord.__dataclass_fields__)
_HINT = foreign.HINT
#: What judges an imported record's verdict from its own numbers: its verdict (``{"verdict",
#: "reasons", "limits"}``) or None for a record that has none (not an ok latency run).
Judge = Callable[[dict], dict | None]


@dataclass
class ImportSummary:
    """What an import did, per record: stored, skipped as the same, in conflict, refused."""

    imported: int = 0
    present: int = 0
    conflicts: list[str] = field(default_factory=list)  # ids whose stored record differs
    refused: list[str] = field(default_factory=list)  # one line each: the record and why
    rejudged: list[str] = field(default_factory=list)  # one line each: the file's verdict, ours
    unjudged: int = 0  # records stored without a verdict (imported without a judge)
    ignored: dict[str, int] = field(default_factory=dict)  # unknown field -> records with it

    def line(self) -> str:
        """The one-line summary the CLI prints."""
        text = (f"{self.imported} imported, {self.present} already present, "
                f"{len(self.conflicts)} conflicts, {len(self.refused)} refused")
        if self.rejudged:
            text += f", {len(self.rejudged)} verdicts judged again"
        if self.unjudged:
            text += f", {self.unjudged} unjudged"
        if self.ignored:
            names = sorted(self.ignored)
            text += (f"; ignored fields this aiot does not know: {', '.join(names[:5])}"
                     f"{' …' if len(names) > 5 else ''} (in {max(self.ignored.values())} records)")
        return text

    def to_dict(self) -> dict:
        return {"imported": self.imported, "already_present": self.present,
                "conflicts": self.conflicts, "refused": self.refused,
                "judged_again": self.rejudged, "unjudged": self.unjudged,
                "ignored_fields": self.ignored}


@dataclass
class _Item:
    """One record read from the source, before its checks: its fields, how long its JSON is,
    whether the decoder met NaN or ±Infinity in it, and its JSON as text to store: the whole
    record (``text``, from an export) or its JSON columns (``texts``, from another store).
    ``by_msgspec``: read by msgspec (the standard library's decoder reads the rest)."""

    data: object
    chars: int
    nonfinite: bool
    text: str | None = None
    texts: dict | None = None
    by_msgspec: bool = False
    unknown: tuple = ()  # fields this aiot does not know (a newer aiot's)
    refusal: str | None = None  # why it is refused before any check (it could not be read)


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


class _Lenient(_Columns, forbid_unknown_fields=False):
    """The same, leaving out fields this aiot does not know (a newer aiot's)."""


_COLUMNS = msgspec.json.Decoder(_Columns)
_LENIENT = msgspec.json.Decoder(_Lenient)
_NAMES = msgspec.json.Decoder(dict[str, msgspec.Raw])  # a record's field names, values unread
_PARTS_DECODER = msgspec.json.Decoder()
_PART_NAMES = {name for name, _required in PARTS}


def _fast_fields(text: str) -> tuple[dict, tuple] | None:
    """``text`` (one whole JSON object) as a record's fields (its parts decoded) and the
    fields it has that this aiot does not know, or None where msgspec does not take it whole
    or a part is neither an object nor null (the standard library's reading then says why)."""
    unknown: tuple = ()
    try:
        try:
            got = _COLUMNS.decode(text)
        except msgspec.ValidationError as exc:
            if "unknown field" not in str(exc):
                return None
            got = _LENIENT.decode(text)
            unknown = tuple(unknown_fields(_NAMES.decode(text)))
        unset = msgspec.UNSET
        data = {k: v for k, v in msgspec.structs.asdict(got).items() if v is not unset}
        for name in _PART_NAMES.intersection(data):
            raw = bytes(data[name])
            if not raw.startswith(b"{") and raw != b"null":
                return None
            data[name] = _PARTS_DECODER.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
    return data, unknown


# -- reading an export file as a stream --------------------------------------------------------

#: A JSON string, a bracket, or a run of what neither is (a number, ``true``): where a value
#: ends, found without decoding it (a record too deep or too big an integer to decode).
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]|[^"\[\]{},\s]+')
#: A record's id in its text, to name a record that cannot be decoded.
_ID = re.compile(r'"id"\s*:\s*"([0-9a-f]{32})"')


def _value_end(buf: str, pos: int) -> int:
    """Where the JSON value at ``pos`` of ``buf`` ends, or -1 when it does not end in it."""
    depth = 0
    for token in _TOKEN.finditer(buf, pos):
        first = token.group()[0]
        if first in "[{":
            depth += 1
            continue
        depth -= first in "]}"
        if depth < 0:
            return -1
        # a number may go on past the buffer's end: then it has not ended yet
        if depth == 0 and (first in '"]}' or token.end() < len(buf)):
            return token.end()
    return -1


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
        got = _fast_fields(text) if text else None
        if got is None:
            self.missed += 1
            return None
        self.fast += 1
        self.pos = end
        self.items += 1
        return _Item(got[0], len(text), False, text=text, by_msgspec=True, unknown=got[1])

    def _unread(self, why: str) -> _Item:
        """The record at ``pos`` that the decoder gave up on (nested past its depth, an
        integer of thousands of digits), skipped to its end and refused; the file's reading
        goes on after it. A record whose end is not found within MAX_ITEM_CHARS breaks it."""
        while (end := _value_end(self.buf, self.pos)) < 0:
            if len(self.buf) - self.pos > MAX_ITEM_CHARS or not self._fill():
                raise self._broken(f"record {self.items + 1} cannot be read ({why})")
        text, self.pos = self.buf[self.pos:end], end
        self.items += 1
        found = _ID.search(text)
        return _Item({"id": found.group(1)} if found else None, len(text), False, text=text,
                     refusal=f"(record {self.items} of the file) cannot be read: {why}")

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
            except RecursionError:
                return self._unread("it is nested deeper than any record aiot writes")
            except ValueError as exc:
                if not isinstance(exc, json.JSONDecodeError):  # Python's int() limit
                    return self._unread(f"it holds an integer of more than "
                                        f"{sys.get_int_max_str_digits()} digits")
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
            return _Item(item, len(text), self.nonfinite, text=text,
                         unknown=tuple(unknown_fields(item)) if isinstance(item, dict) else ())

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
    """The items of an export file one at a time (each still to be checked); a UTF-8 byte
    order mark at its start (an editor's) is read past."""
    try:
        with path.open(encoding="utf-8-sig") as stream:
            yield from _ArrayReader(stream, str(path))
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not an aiot results export: not UTF-8 text ({exc.reason})",
                         _HINT) from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}", _HINT) from None


# -- reading another store ---------------------------------------------------------------------

def read_store(path: Path) -> Iterator:
    """The records of another aiot store, each as an export item (still to be checked); the
    store is refused whole first where it is not one (:func:`foreign.refuse_foreign`)."""
    foreign.refuse_foreign(path)
    other = Store(path, readonly=True)
    try:
        with other._errors():  # damage or a lock found while reading: one line
            for row in foreign.rows(other._conn):
                yield _row_item(row) if isinstance(row, dict) else _Item(
                    {"id": row[0]}, row[1], False, texts={},
                    refusal=f"is {row[1]} characters long (at most {foreign.MAX_ROW_CHARS}): "
                            "not read")
    finally:
        other.close()


def _part(text: str, nonfinite: list):
    """One JSON column of another store decoded: by msgspec, else (NaN, ±Infinity, a number
    msgspec does not take) by the standard library, noting the non-finite constants."""
    try:
        return _PARTS_DECODER.decode(text)
    except msgspec.DecodeError:
        return json.loads(text, parse_constant=lambda c: nonfinite.append(c) or 0.0)


def _row_item(row: dict) -> _Item:
    """A stored row as an item: its JSON columns decoded for the checks, kept as text to
    store; one that does not decode stays text (and is refused)."""
    for name in BOOKKEEPING:  # the other store's, not the record's
        row.pop(name, None)
    texts, nonfinite, refusal = {}, [], None
    for name, _required in PARTS:
        text = texts[f"{name}_json"] = row.pop(f"{name}_json", None)
        try:
            row[name] = _part(text, nonfinite) if isinstance(text, str) else text
        except RecursionError:
            refusal, row[name] = f"{name} is nested deeper than any record aiot writes", None
        except ValueError as exc:
            row[name] = text
            if not isinstance(exc, json.JSONDecodeError):  # Python's int() limit
                refusal = (f"{name} holds an integer of more than "
                           f"{sys.get_int_max_str_digits()} digits")
    chars = sum(len(t) for t in texts.values() if isinstance(t, str))
    return _Item(row, chars, bool(nonfinite), texts=texts, unknown=tuple(unknown_fields(row)),
                 refusal=refusal)


# -- writing -----------------------------------------------------------------------------------

def _insert_sql() -> str:
    """One record's INSERT: its checked columns, and its JSON columns either as given (from
    another store) or cut by SQLite from the record's JSON text (from an export: never
    decoded and encoded again in Python), its result's verdict set to the one judged here
    (``:verdict``, JSON; NULL: none) where ``:set_verdict``. SQLite inserts nothing where its
    own reading of the text finds parts of other types than the checks saw (a field given
    twice)."""
    columns = [c for c in _FIELDS if c not in ("spec", "result", "provenance")]
    parts = [f"CASE WHEN :item IS NULL THEN :{name}_json ELSE json_extract(:item, '$.{name}') END"
             for name, _required in PARTS]
    result = parts[[name for name, _ in PARTS].index("result")]
    parts[[name for name, _ in PARTS].index("result")] = (
        f"CASE WHEN :set_verdict THEN CASE WHEN :verdict IS NULL "
        f"THEN json_remove({result}, '$.validity') ELSE json_set({result}, '$.validity', "
        f"json(:verdict)) END ELSE {result} END")
    same = ("json_type(:item, '$.spec') = 'object' AND json_type(:item, '$.provenance') = "
            "'object' AND coalesce(json_type(:item, '$.result'), 'null') IN ('object', 'null')")
    return (f"INSERT INTO runs ({', '.join(columns)}, {', '.join(f'{n}_json' for n, _ in PARTS)}, "
            "imported_at) "
            f"SELECT {', '.join(':' + c for c in columns)}, {', '.join(parts)}, :imported_at "
            f"WHERE :item IS NULL OR ({same})")


def _content(row: dict) -> dict:
    """What makes two records the same: their columns, with the JSON ones decoded (an item
    of this import: its parts decoded again from its text, its verdict the one judged here;
    a batch keeps no decoded parts, whose raw samples are most of a record)."""
    if "set_verdict" in row:  # an item of this import
        if row["item"] is not None:
            whole = json.loads(row["item"])
            parts = {name: whole.get(name) for name, _required in PARTS}
        else:
            parts = {name: json.loads(row[f"{name}_json"]) if row[f"{name}_json"] else None
                     for name, _required in PARTS}
        if row["set_verdict"] and isinstance(parts["result"], dict):
            parts["result"] = {k: v for k, v in parts["result"].items() if k != "validity"}
            if row["verdict"] is not None:
                parts["result"]["validity"] = json.loads(row["verdict"])
        return {**{k: v for k, v in row.items() if k not in ("item", "set_verdict", "verdict",
                                                             *BOOKKEEPING)
                   and not k.endswith("_json")}, **parts}
    data = {k: v for k, v in row.items() if k not in BOOKKEEPING and not k.endswith("_json")}
    for name, _required in PARTS:
        text = row[f"{name}_json"]
        data[name] = json.loads(text) if text else None
    return data


class _Importer:
    def __init__(self, store: Store, summary: ImportSummary, judge: Judge | None) -> None:
        self.store, self.summary, self.batch, self.judge = store, summary, {}, judge
        self.sql = _insert_sql()
        self.imported_at = utc_now()
        self.now = datetime.fromisoformat(self.imported_at)

    def add(self, item: _Item) -> None:
        try:
            if item.refusal is not None:
                raise BadRecord(item.refusal)
            row = check_record(item.data, item.chars, item.nonfinite, now=self.now)
            self._verdict(row, {name: item.data.get(name) for name, _required in PARTS})
        except BadRecord as exc:
            self.summary.refused.append(f"record {record_name(item.data)} {exc}")
            return
        for name in item.unknown:
            self.summary.ignored[name] = self.summary.ignored.get(name, 0) + 1
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

    def _verdict(self, row: dict, parts: dict) -> None:
        """The record's verdict judged again here (see the module's doc) from its ``parts``,
        set in ``row`` (its column, and what the INSERT sets in its result); a verdict that
        differs from the file's is named.

        Raises:
            BadRecord: the judge cannot judge the record's numbers.
        """
        result = parts.get("result")
        said = result.get("validity") if isinstance(result, dict) else None
        if self.judge is None:
            verdict = None
            self.summary.unjudged += row["validity"] is not None or said is not None
        else:
            try:
                verdict = self.judge({**row, **parts})
            except (TypeError, ValueError, KeyError, AttributeError) as exc:
                raise BadRecord(f"has numbers its verdict cannot be judged from ({exc})") from None
            judged, before = (verdict or {}).get("verdict"), row["validity"]
            if judged != before:
                why = "; ".join(r.partition(":")[0] for r in (verdict or {}).get("reasons") or ())
                self.summary.rejudged.append(
                    f"record {row['id']} says {before or 'no verdict'}, judged here "
                    f"{judged or 'no verdict (not an ok latency run)'}{f' ({why})' if why else ''}")
        row["validity"] = (verdict or {}).get("verdict")
        row["set_verdict"] = int(verdict != said and isinstance(result, dict))
        row["verdict"] = json.dumps(verdict) if verdict is not None else None

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


def import_records(store: Store, source: Path, summary: ImportSummary | None = None,
                   judge: Judge | None = None) -> ImportSummary:
    """Import every record of ``source`` (an export file or another store) into ``store``.

    Args:
        summary: filled as the import goes (what was done stays counted if it stops).
        judge: judges each record's verdict from its own numbers (the CLI gives the engine's,
            :func:`aiot.host.engine.validity.judge_record`); None: verdicts are stored as
            unjudged (see the module's doc).

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
    importer = _Importer(store, summary, judge)
    try:
        for item in items:
            importer.add(item)
    except UsageError:
        importer.flush()  # what was read and checked before a broken end is stored whole
        raise
    importer.flush()
    return summary
