"""Reading a whole store one record at a time, in bounded memory (for readers of every record:
the report of a large store). ``Store.query`` returns a list, which at 100k records is
gigabytes of decoded JSON; this yields each record and lets it go."""

from __future__ import annotations

import json
from collections.abc import Iterator

import msgspec

from aiot.host.store.store import RunRecord, Store, _row_to_record

_DECODER = msgspec.json.Decoder()


def _loads(text: str):
    """``json.loads(text)``, by msgspec (2-3x faster on a record's small parts); a text it
    does not take (NaN, an integer past 64 bits, both of which Python writes) by json."""
    try:
        return _DECODER.decode(text)
    except msgspec.DecodeError:
        return json.loads(text)


def count(store: Store, sweep_id: str | None = None) -> int:
    """How many records the store holds (of one sweep): an index count, no row read."""
    where, args = ("WHERE sweep_id = ?", (sweep_id,)) if sweep_id else ("", ())
    return store._read(f"SELECT COUNT(*) FROM runs {where}", args)[0][0]


#: What a summary reads of a latency record's result (:mod:`aiot.host.report`, the scores):
#: its mean, verdict, profile and input shapes, cut out by SQLite, so the raw samples (most
#: of a record) are never decoded in Python. Other kinds' results are read whole.
SLIM_RESULT = ("stats_ms.mean", "validity", "profile", "inputs", "input_shape")
#: What a summary reads of the provenance: the facts it names (versions, device, runtime), as
#: a lab's 100k records repeat them (decoded once per distinct value), and the telemetry
#: readings of the device's state around the run, its own in every record.
SLIM_PROVENANCE = ("aiot_version", "git", "host", "runtime", "device", "toolchain")
#: The telemetry readings of ``provenance.device_state`` (its ``before`` and ``after``).
SLIM_STATE = ("timestamp", "cpu_temp_max_c", "cpu_freq_khz")
_STATE_PATHS = [f"device_state.{phase}.{name}" for phase in ("before", "after") for name in SLIM_STATE]
_FIELDS = ("id", "sweep_id", "kind", "status", "reason", "created_at", "finished_at", "device",
           "model", "format", "threads", "artifact_sha256", "size_bytes", "median_ms", "p90_ms",
           "load_ms", "accuracy", "validity")


def _paths(names) -> str:
    return ", ".join(f"'$.{name}'" for name in names)


# One json_extract per column with several paths: SQLite parses each JSON text once.
_SLIM = (f"{', '.join(_FIELDS)}, kind = 'latency', spec_json, "
         f"CASE WHEN kind = 'latency' AND json_valid(result_json) "
         f"THEN json_extract(result_json, {_paths(SLIM_RESULT)}) "
         f"WHEN kind = 'latency' THEN NULL ELSE result_json END, "
         f"json_extract(provenance_json, {_paths(SLIM_PROVENANCE)}), "
         f"json_extract(provenance_json, {_paths(_STATE_PATHS)})")


def _slim_record(row: tuple, decoded: dict) -> RunRecord:
    n = len(_FIELDS)
    latency, spec, result, facts, state = row[n:]
    if spec not in decoded:
        decoded[spec] = json.loads(spec)
    if facts not in decoded:
        decoded[facts] = {k: v for k, v in zip(SLIM_PROVENANCE, json.loads(facts) if facts else ())
                          if v is not None}
    provenance = dict(decoded[facts])
    values = _loads(state) if state else ()
    if any(v is not None for v in values):
        half = len(SLIM_STATE)
        provenance["device_state"] = {"before": dict(zip(SLIM_STATE, values[:half])),
                                      "after": dict(zip(SLIM_STATE, values[half:]))}
    if latency and result is not None:
        mean, *rest = _loads(result)
        result = dict(zip(SLIM_RESULT[1:], rest), stats_ms={"mean": mean})
    elif result is not None:
        result = json.loads(result)
    return RunRecord(**dict(zip(_FIELDS, row[:n])), spec=decoded[spec], provenance=provenance,
                     result=result)


def iter_records(store: Store, sweep_id: str | None = None,
                 slim: bool = False) -> Iterator[RunRecord]:
    """Every record (of one sweep) in the order they were stored, one at a time.

    Args:
        slim: only what summaries read: latency results cut to :data:`SLIM_RESULT`, the
            provenance to :data:`SLIM_PROVENANCE` and :data:`SLIM_STATE`; records with the
            same spec or provenance facts share those objects (read them, never change them).
    """
    where, args = ("WHERE sweep_id = ?", (sweep_id,)) if sweep_id else ("", ())
    decoded: dict = {}  # JSON text → its value, shared by the records that repeat it
    with store._errors():  # damage found while reading: one line
        cursor = store._conn.cursor()
        if slim:
            cursor.row_factory = None  # plain tuples
        cursor.execute(f"SELECT {_SLIM if slim else '*'} FROM runs {where} ORDER BY rowid", args)
        for row in cursor:
            if slim and len(decoded) > 4096:  # bounded: a store of all-different specs
                decoded.clear()
            yield _slim_record(row, decoded) if slim else _row_to_record(row)
