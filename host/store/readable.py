"""The fields of a record that aiot's readers read, and the type each must have: one schema.

``aiot report``, ``results list``/``show``/``export`` and the lab view read a record's spec,
provenance and result by field (``provenance.device.cores``, ``result.stats_ms.median``, …)
and format what they find. A field of another type than aiot writes (a ``device`` that is
text, a frequency ``"fast"``) came from a damaged store, a store written before imports were
checked, or a forged file; this module is the one place that knows what each field must be:

* :func:`problems` names the fields of one part that are not of their type (an import
  refuses such a record: :mod:`aiot.host.store.validate`);
* :func:`repaired` is the part with each such field read as missing (None): what every reader
  is given (:func:`aiot.host.store.store.Store` reads records through it), so a view shows
  ``—`` where it cannot read a field, and never fails on one;
* :func:`unreadable_sql` is SQL that is true of a stored record with such a field, so
  ``aiot results check`` counts them without decoding every record in Python.

A field the schema does not name is not a reader's, and is left as it is (a newer aiot's
fields pass through); a missing or null field is always fine (older records lack many).
"""

from __future__ import annotations

import json
import math

#: Kinds of a value: JSON types a field may have (None, a missing field, always fits).
TEXT, NUM, INT, SCALAR, OBJ, LIST = "text", "num", "int", "scalar", "obj", "list"
_WHAT = {TEXT: "text", NUM: "a number", INT: "an integer", SCALAR: "a plain value",
         OBJ: "an object", LIST: "a list"}
#: SQLite's ``json_type`` names of each kind.
_SQL_TYPES = {TEXT: ("text",), NUM: ("integer", "real"), INT: ("integer",),
              SCALAR: ("text", "integer", "real", "true", "false"), OBJ: ("object",),
              LIST: ("array",)}


class Map(tuple):
    """An object whose every value is of ``kind`` (keys are any text): ``Map(NUM)``."""

    def __new__(cls, kind):
        return super().__new__(cls, ("map", kind))


class Of(tuple):
    """A list whose every item is of ``kind``: ``Of(INT)``, ``Of({"name!": TEXT})``."""

    def __new__(cls, kind):
        return super().__new__(cls, ("of", kind))


#: One telemetry reading (``provenance.device_state.before`` and ``after``).
_READING = {"cpu_freq_khz": Map(NUM), "cpu_cap_khz": Map(NUM), "cpu_temps_c": Map(NUM),
            "cpu_temp_max_c": NUM, "timestamp": NUM, "battery_pct": NUM, "battery_temp_c": NUM,
            "battery_status": SCALAR}
_SHOWN = {name: SCALAR for name in (
    "cpu_model", "soc", "soc_name", "model", "manufacturer", "android_version", "distribution",
    "os", "kernel", "transport", "abi", "hardware", "processors")}
_STATS = {**{name: NUM for name in ("min", "max", "mean", "median", "p90", "p99", "q1", "q3",
                                    "std", "iqr", "cv", "mad", "robust_cv", "trimmed_mean")},
          "count": INT, "outliers": OBJ,
          "median_ci": {"low": NUM, "high": NUM, "level": NUM, "ranks": Of(INT)}}
#: A name a record's key is made of: hashed, compared and sorted, so text (or absent).
_KEY_TEXT = {name: TEXT for name in ("device", "model", "format", "binarize", "native",
                                     "delegate", "cluster", "via", "weights")}

#: What readers read of each part of a record. ``name!``: the field must be there (an item of
#: a list that readers index by it).
SCHEMA = {
    "spec": {**_KEY_TEXT, "threads": INT, "input_shapes": Map(Of(INT)), "options": Map(SCALAR),
             "params": {"min_runs": INT}, "input_values": OBJ},
    "provenance": {
        "host": {"id": TEXT, "hostname": TEXT, "platform": SCALAR},
        "device": {**_SHOWN, "name": TEXT, "cores": INT, "online_cores": INT, "labels": OBJ,
                   "android_props": OBJ, "agent": {"runtimes": (OBJ, LIST),
                                                    "backends": (OBJ, LIST),
                                                    "agent_version": SCALAR}},
        "runtime": {"backend": SCALAR, "version": SCALAR},
        "git": {"id": TEXT, "dirty": SCALAR},
        "artifact": {"parity": {"verdict": SCALAR, "max_abs": NUM, "top1_agreement": NUM,
                                "nonfinite": OBJ, "inconclusive": {"reason!": SCALAR,
                                                                   "fix!": SCALAR}}},
        "converter": {"quant": SCALAR, "options": Map(SCALAR)},
        "weights": (OBJ, TEXT),
        "toolchain": Map(SCALAR),
        "device_state": {"before": _READING, "after": _READING, "throttling": Of(TEXT),
                         "changes": Of(TEXT)},
        "affinity": {"cpus": Of(INT)},
        "input_shapes_defaulted": Of(TEXT),
        "aiot_version": SCALAR, "agent_process": SCALAR,
    },
    "result": {
        "stats_ms": _STATS,
        "samples_ns": LIST,
        "validity": {"verdict": TEXT, "reasons": Of(TEXT), "limits": Map((NUM, "bool"))},
        "inputs": Of({"name!": TEXT, "shape!": Of(INT), "dtype": SCALAR, "source": SCALAR,
                      "value": SCALAR, "range": Of(NUM)}),
        "input_shape": Of(INT),
        "outputs": Of(OBJ),
        "load": {"other_cpus": NUM, "busy_cpus": NUM, "online_cpus": INT, "loadavg": Of(NUM),
                 "top": Of({"pid": SCALAR, "name": SCALAR, "cpus": NUM})},
        "speed": {"kernel": TEXT, "before_ms": NUM, "after_ms": NUM},
        "stability": {"cv": NUM, "target_cv": NUM, "stable": SCALAR},
        "error": {"type": SCALAR, "transient": SCALAR},
        "threads": INT, "load_ms": NUM, "first_inference_ms": NUM, "profile": OBJ,
        "placement": {"engine!": TEXT, "source": TEXT, "total_nodes": INT,
                      "delegated_nodes": INT, "outside_nodes": INT, "partitions": INT,
                      "outside": Map(INT), "by_engine": Map(INT), "complete": "bool",
                      "note": TEXT},
    },
}
_SQL_TYPES["bool"] = ("true", "false")
_WHAT["bool"] = "true or false"


#: The Python types of each plain kind's values (a number must also be finite).
_TYPES = {TEXT: {str}, NUM: {int, float}, INT: {int}, SCALAR: {str, int, float, bool},
          OBJ: {dict}, LIST: {list}, "bool": {bool}}


def _fits(value, kind) -> bool:
    """Whether one value (not None) is of a plain kind (or of one of a tuple of them)."""
    if isinstance(kind, tuple) and not isinstance(kind, (Map, Of)):
        return any(_fits(value, k) for k in kind)
    if kind == TEXT:
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind in (NUM, INT):
        number = int if kind == INT else (int, float)
        return (not isinstance(value, bool) and isinstance(value, number)
                and (not isinstance(value, float) or math.isfinite(value))
                and (not isinstance(value, int) or -_BIG <= value < _BIG))
    if kind == SCALAR:
        return isinstance(value, (str, int, float, bool))
    return isinstance(value, dict if kind == OBJ else list)


def _what(kind) -> str:
    if isinstance(kind, (dict, Map)):
        return "an object"
    if isinstance(kind, Of):
        return "a list"
    if isinstance(kind, tuple):
        return " or ".join(_what(k) for k in kind)
    return _WHAT[kind]


def _shown(value) -> str:
    return "null" if value is None else type(value).__name__


def _walk(value, kind, path: str, bad: list[str]):
    """``value`` with every field not of its kind read as None; each such field's path (and
    what it is) added to ``bad``. Copies only what it changes."""
    if value is None:
        return None
    if isinstance(kind, dict):
        if not isinstance(value, dict):
            bad.append(f"{path} is {_shown(value)}, not an object")
            return None
        out = value
        for name, sub in kind.items():
            field = name.rstrip("!")
            if field not in value or value[field] is None:
                if name.endswith("!"):
                    bad.append(f"{path}.{field} is missing")
                    return None
                continue
            got = _walk(value[field], sub, f"{path}.{field}", bad)
            if got is not value[field]:
                if name.endswith("!"):
                    return None
                out = dict(out) if out is value else out
                out[field] = got
        return out
    if isinstance(kind, (Map, Of)):
        container = dict if isinstance(kind, Map) else list
        if not isinstance(value, container):
            bad.append(f"{path} is {_shown(value)}, not {_what(kind)}")
            return None
        if _ok(value, _plan(kind)):
            return value
        items = value.items() if isinstance(kind, Map) else enumerate(value)
        for key, item in items:
            where = f"{path}.{key}" if isinstance(kind, Map) else f"{path}[{key}]"
            if item is None:
                if isinstance(kind, Of):  # a list's items are indexed and formatted
                    bad.append(f"{where} is null")
                    return None
            elif _walk(item, kind[1], where, bad) is not item:
                return None  # one bad item: the whole list (or map) is unreadable
        return value
    if not _fits(value, kind):
        if isinstance(value, float) and not math.isfinite(value):
            bad.append(f"{path} is {value}, not a finite number")
        elif type(value) is int and not -_BIG <= value < _BIG:
            bad.append(f"{path} is an integer past 64 bits")
        else:
            bad.append(f"{path} is {_shown(value)}, not {_what(kind)}")
        return None
    return value


# -- the quick check: is every field readable? (most records: yes, and nothing else is done)

def _plan(kind) -> tuple:
    """``kind`` as the quick check walks it: ``("plain", types, finite)``, ``("obj", fields)``
    (each ``(name, required, plan)``), ``("map", plan)`` or ``("of", plan)``."""
    if isinstance(kind, dict):
        return ("obj", tuple((name.rstrip("!"), name.endswith("!"), _plan(sub))
                             for name, sub in kind.items()))
    if isinstance(kind, (Map, Of)):
        return (kind[0], _plan(kind[1]))
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return ("plain", frozenset().union(*(_TYPES[k] for k in kinds)), NUM in kinds or INT in kinds)


#: Numbers past 64 bits (a forged 10^400) no reader formats: not numbers here.
_BIG = 2 ** 63


def _plain_fit(value, plan: tuple) -> bool:
    kind = type(value)
    if kind not in plan[1]:
        return False
    if not plan[2] or kind not in (int, float):
        return True
    return math.isfinite(value) if kind is float else -_BIG <= value < _BIG


def _ok(value, plan: tuple) -> bool:
    """Whether ``value`` (not None) is readable as ``plan`` says, without saying where not."""
    tag = plan[0]
    if tag == "plain":
        return _plain_fit(value, plan)
    if tag == "obj":
        if type(value) is not dict:
            return False
        for name, required, sub in plan[1]:
            item = value.get(name)
            if item is None:
                if required:
                    return False
            elif not (_plain_fit(item, sub) if sub[0] == "plain" else _ok(item, sub)):
                return False
        return True
    if type(value) is not (dict if tag == "map" else list):
        return False
    sub = plan[1]
    items = value.values() if tag == "map" else value
    if sub[0] == "plain":
        return _all_fit(items, sub, none=tag == "map")
    return all((item is None and tag == "map") or (item is not None and _ok(item, sub))
               for item in items)


def _all_fit(items, plan: tuple, none: bool) -> bool:
    """Whether every one of ``items`` fits the plain ``plan`` (``none``: or is None), at C
    speed (a list of a thousand numbers costs microseconds)."""
    found = set(map(type, items))
    if none:
        found.discard(type(None))
    if not found <= plan[1]:
        return False
    if not plan[2]:
        return True
    return ((float not in found or all(map(math.isfinite, (v for v in items if type(v) is float))))
            and (int not in found or all(-_BIG <= v < _BIG for v in items if type(v) is int)))


_PLANS = {part: _plan(kind) for part, kind in SCHEMA.items()}


def problems(part: str, value) -> list[str]:
    """The fields of ``part`` (``spec``, ``provenance``, ``result``) that readers cannot
    read: ``["provenance.device is str, not an object"]``; empty when there are none."""
    if value is None or _ok(value, _PLANS[part]):
        return []
    bad: list[str] = []
    _walk(value, SCHEMA[part], part, bad)
    return bad


def repaired(part: str, value):
    """``value`` (one part of a record) with every field readers cannot read as None (the
    same object when there is none)."""
    if not isinstance(value, dict):
        return value if value is None else {}
    if _ok(value, _PLANS[part]):
        return value
    return _walk(value, SCHEMA[part], part, []) or {}


# -- the same in SQL, over a stored record ------------------------------------------------------

def _types(kind) -> tuple[str, ...]:
    if isinstance(kind, dict):
        return ("object",)
    if isinstance(kind, Map):
        return ("object",)
    if isinstance(kind, Of):
        return ("array",)
    if isinstance(kind, tuple):
        return tuple(t for k in kind for t in _types(k))
    return _SQL_TYPES[kind]


def _bad_sql(kind, doc: str, path: str, type_sql: str, depth: int = 0) -> list[str]:
    """SQL conditions, each true when the value at ``path`` of the JSON ``doc`` (whose JSON
    type ``type_sql`` gives) is not of ``kind``; a missing or null value never is."""
    types = ", ".join(f"'{t}'" for t in (*_types(kind), "null"))
    found = [f"coalesce({type_sql}, 'null') NOT IN ({types})"]
    inner: list[str] = []
    if isinstance(kind, dict):
        for name, sub in kind.items():
            field = name.rstrip("!")
            sub_type = f"json_type({doc}, '{path}.{field}')"
            if name.endswith("!"):
                inner.append(f"{sub_type} IS NULL OR {sub_type} = 'null'")
            inner += _bad_sql(sub, doc, f"{path}.{field}", sub_type, depth)
        found.append(f"(CASE WHEN {type_sql} = 'object' THEN {' OR '.join(inner)} END)")
    elif isinstance(kind, (Map, Of)):
        each = f"e{depth}"
        # An item that is an object or a list is JSON text; any other is a plain SQL value.
        item = " OR ".join(_bad_sql(kind[1], f"{each}.value", "$", f"{each}.type", depth + 1))
        null = f"{each}.type = 'null' OR " if isinstance(kind, Of) else ""
        found.append(f"(CASE WHEN {type_sql} IN ('object', 'array') THEN EXISTS (SELECT 1 "
                     f"FROM json_each({doc}, '{path}') AS {each} WHERE {null}{item}) END)")
    return found


def unreadable_sql(row: str = "") -> str:
    """SQL true of a ``runs`` row (``row``: its name and a dot, or nothing) holding a field
    readers cannot read; a part that is not JSON SQLite reads (NaN) is not judged here."""
    parts = []
    for part in SCHEMA:
        doc = f"{row}{part}_json"
        checks = " OR ".join(_bad_sql(SCHEMA[part], doc, "$", f"json_type({doc})"))
        parts.append(f"(CASE WHEN json_valid({doc}) THEN {checks} END)")
    return " OR ".join(parts)


def unreadable(conn, shown: int = 5) -> tuple[int, list[str]]:
    """How many records of the store on ``conn`` hold a field readers cannot read, and the
    first ``shown`` of them as ``<id> <what is wrong>`` lines (``aiot results check``)."""
    where = unreadable_sql()
    count = conn.execute(f"SELECT COUNT(*) FROM runs WHERE {where}").fetchone()[0]
    lines = []
    for rid, *texts in conn.execute(f"SELECT id, spec_json, provenance_json, result_json "
                                    f"FROM runs WHERE {where} LIMIT ?", (shown,)):
        found = [p for part, text in zip(SCHEMA, texts) if text
                 for p in problems(part, json.loads(text))]
        lines.append(f"{rid} {found[0] if found else 'holds a field of another type'}")
    return count, lines
