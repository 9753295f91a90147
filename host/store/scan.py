"""What a summary of a large store reads of records: how many there are (an index count),
and the few records it shows, slim (only the parts it reads, cut out by SQLite, so a
record's raw samples are never decoded in Python). Every record's facts come from
:mod:`aiot.host.store.facts`."""

from __future__ import annotations

import json
import msgspec

from aiot.host.store import readable
from aiot.host.store.facts import SLIM_PROVENANCE, SLIM_STATE, STATE_PATHS, json_paths
from aiot.host.store.queries import Filters
from aiot.host.store.store import RunRecord, Store

_DECODER = msgspec.json.Decoder()


def _loads(text: str):
    """``json.loads(text)``, by msgspec (2-3x faster on a record's small parts); a text it
    does not take (NaN, an integer past 64 bits, both of which Python writes) by json."""
    try:
        return _DECODER.decode(text)
    except msgspec.DecodeError:
        return json.loads(text)


def count(store: Store, sweep_id: str | None = None, host: str | None = None) -> int:
    """How many records the store holds (of one sweep, of one host): an index count, no row
    read."""
    where, args = Filters(sweep_id=sweep_id, host=host).where()
    return store._read(f"SELECT COUNT(*) FROM runs{where}", args)[0][0]


#: What a summary reads of a latency record's result (:mod:`aiot.host.report`, the scores):
#: its mean, verdict, profile and input shapes, cut out by SQLite, so the raw samples (most
#: of a record) are never decoded in Python. Other kinds' results are read whole.
SLIM_RESULT = ("stats_ms.mean", "validity", "profile", "inputs", "input_shape")
# What a summary reads of the provenance (SLIM_PROVENANCE: the facts it names, versions,
# device, runtime) and the telemetry readings around the run (STATE_PATHS) are the store's
# facts' (aiot.host.store.facts), which keep the same.
_FIELDS = ("id", "sweep_id", "kind", "status", "reason", "created_at", "finished_at", "device",
           "model", "format", "threads", "artifact_sha256", "size_bytes", "median_ms", "p90_ms",
           "load_ms", "accuracy", "validity")


# One json_extract per column with several paths: SQLite parses each JSON text once.
_SLIM = (f"{', '.join(_FIELDS)}, kind = 'latency', spec_json, "
         f"CASE WHEN kind = 'latency' AND json_valid(result_json) "
         f"THEN json_extract(result_json, {json_paths(SLIM_RESULT)}) "
         f"WHEN kind = 'latency' THEN NULL ELSE result_json END, "
         f"json_extract(provenance_json, {json_paths(SLIM_PROVENANCE)}), "
         f"json_extract(provenance_json, {json_paths(STATE_PATHS)})")


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
    return RunRecord(**dict(zip(_FIELDS, row[:n])), spec=readable.repaired("spec", decoded[spec]),
                     provenance=readable.repaired("provenance", provenance),
                     result=readable.repaired("result", result))


def slim_records(store: Store, ids) -> dict[str, RunRecord]:
    """The records of ``ids``, slim (only what summaries read: latency results cut to
    :data:`SLIM_RESULT`, the provenance to ``SLIM_PROVENANCE`` and the telemetry; records
    with the same spec or provenance facts share those objects: read them, never change
    them), each read by its primary key (a summary's few shown runs)."""
    ids, found, decoded = list(dict.fromkeys(ids)), {}, {}
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        with store._errors():
            cursor = store._conn.cursor()
            cursor.row_factory = None
            rows = cursor.execute(f"SELECT {_SLIM} FROM runs WHERE id IN "
                                  f"({', '.join('?' * len(part))})", part).fetchall()
        found.update((row[0], _slim_record(row, decoded)) for row in rows)
    return found
