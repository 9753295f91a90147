"""Result sets: what a name given to ``aiot results compare`` (or the lab view) stands for.

A set is named by one string, tried in this order (:func:`resolve_set`):

1. an existing file written by ``aiot results export --format json``;
2. a sweep id, or a unique prefix of one (an exact id wins over the longer ids it prefixes);
3. a comma list of record ids, each a prefix of at least 4 characters.

Only ``latency`` records count; pending ones are ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from aiot.core.errors import UsageError
from aiot.host.store.store import RunRecord, Store

_SET_HINT = ("give an export file (aiot results export --format json -o FILE), a sweep id or "
             "record ids; see: aiot results list")


@dataclass(frozen=True)
class ResultSet:
    """The latency records a set's name resolved to, and how (file, sweep or records)."""

    name: str
    source: str
    records: list[RunRecord]

    def to_dict(self) -> dict:
        return {"name": self.name, "source": self.source, "records": len(self.records)}


def load_export(path: Path) -> list[RunRecord]:
    """The records of a file written by ``aiot results export --format json``."""
    hint = "write one with: aiot results export --format json -o FILE"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read {path} as a results export: {exc}", hint) from None
    required = ("id", "kind", "status", "created_at", "spec", "provenance")
    if not isinstance(data, list) or not all(
            isinstance(d, dict) and all(k in d for k in required) for d in data):
        raise UsageError(f"{path} is not an aiot results export (a JSON list of records)", hint)
    fields = RunRecord.__dataclass_fields__
    return [RunRecord(**{k: v for k, v in d.items() if k in fields}) for d in data]


def find_sweep(name: str, store: Store) -> str | None:
    """The sweep ``name`` names: itself, else the one sweep id it prefixes."""
    matches = store.sweep_ids(name)
    if name in matches:
        return name
    if len(matches) > 1:
        raise UsageError(f"sweep id '{name}' is ambiguous: {', '.join(matches[:4])}",
                         "give more characters")
    return matches[0] if matches else None


def _by_ids(name: str, store: Store) -> list[RunRecord]:
    parts = [p.strip() for p in name.split(",")]
    found = []
    for part in parts:
        matches = store.with_prefix(part, kind="latency") if len(part) >= 4 else []
        if len(matches) > 1:
            raise UsageError(f"record id '{part}' is ambiguous", "give more characters")
        if not matches:
            what = "a file, a sweep id or a record id" if len(parts) == 1 else "a latency record id"
            raise UsageError(f"'{part}' is not {what}", _SET_HINT)
        found.append(matches[0])
    return found


def resolve_set(name: str, store: Store | None, files: bool = True) -> ResultSet:
    """The result set ``name`` names: an export file, else a sweep id, else record ids.

    Only the set's own records are read from the store (by its sweep or ids' index).

    Args:
        store: where sweeps and records are looked up (unused, may be None, for a file).
        files: whether ``name`` may be a file (False where a remote user names the set: the
            lab view never opens a path a request gives).

    Raises:
        UsageError: nothing matches, an id is ambiguous, or the set has no latency records.
    """
    path = Path(name)
    if files and path.is_file():
        records = [r for r in load_export(path) if r.kind == "latency"]
        chosen = ResultSet(name, "file", records)
    else:
        sweep = find_sweep(name, store) if name else None
        records = store.query(kind="latency", sweep_id=sweep) if sweep is not None else []
        if records:
            chosen = ResultSet(sweep, "sweep", records)
        else:
            chosen = ResultSet(name, "records", _by_ids(name, store))
    if not any(r.status != "pending" for r in chosen.records):
        raise UsageError(f"result set '{name}' has no finished latency records", _SET_HINT)
    return chosen
