"""Is a record from elsewhere (an export file, another host's store) one aiot could have written?

``aiot results import`` takes files from other hosts and CI jobs: input as untrusted as a
device's answer, and checked the same way. Each record is checked here before it is stored:
its fields and their types, a known status, well-formed id and times (none later than the
import by more than :data:`CLOCK_SKEW_S`), bounded sizes and text lengths, and its numbers as
the device agent's are checked (:mod:`aiot.host.devices.agent_messages`): latencies finite,
above 0 and at most :data:`MAX_MS`, ``stats_ms`` ordered (min ≤ median ≤ p90 ≤ max), the
``median_ms``/``p90_ms`` columns those of its own ``stats_ms``, a placement whose counts
add up (:func:`~aiot.host.devices.agent_messages.placement_problem`). Its spec, provenance and
result must hold every field a reader reads in the type readers read it
(:mod:`aiot.host.store.readable`, the one schema), nest at most :data:`MAX_DEPTH` levels and
hold no integer past 64 bits nor a non-finite number. A record that fails is refused with one
line naming it and saying why; nothing of it is stored. A field this aiot does not know (a
newer aiot's) is not refused: it is left out of what is stored, and counted.

The verdict (``validity``) is not checked here but judged again from the record's own numbers
by the importer (:mod:`aiot.host.store.importing`): a file's verdict is never taken.

Bounds are generous for what aiot writes (a record's spec, result and provenance are a few
KiB; a reason is a line or a device's error text) and small for what a hostile file could
push into every later reader (``results list``, the report).
"""

from __future__ import annotations

import math
import re
from array import array
from datetime import UTC, datetime, timedelta

from aiot.host.devices.agent_messages import STATS_RTOL, placement_problem, stored_stats_problem
from aiot.host.store import readable
from aiot.host.store.store import STATUSES, RunRecord

#: A record id as :meth:`Store.begin` makes it (``uuid4().hex``).
ID_RE = re.compile(r"[0-9a-f]{32}")
KIND_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")
#: Text columns and their longest accepted value, in characters.
TEXT_CAPS = {"sweep_id": 256, "device": 256, "model": 1024, "format": 64,
             "artifact_sha256": 128, "reason": 8192, "created_at": 64, "finished_at": 64}
VALIDITIES = (None, "VALID", "INVALID")
#: A record as JSON (its raw samples included).
MAX_JSON_CHARS = 4 * 1024 * 1024
MAX_THREADS = 4096
MAX_SIZE_BYTES = 1 << 40
#: The longest latency (and load time) a record may state: 10^7 ms, 2.8 hours for one run.
MAX_MS = 1e7
#: How much later than the import a record's times may be: hosts' clocks differ a little.
CLOCK_SKEW_S = 600
#: How deep a record's spec, provenance and result may nest (aiot's nest 5 levels or so).
MAX_DEPTH = 32
#: The largest integer a record may hold anywhere (SQLite's and a sample's 64 bits).
MAX_INT = 2 ** 63 - 1
_FIELDS = tuple(RunRecord.__dataclass_fields__)
_REQUIRED = ("id", "kind", "status", "created_at", "spec", "provenance")


class BadRecord(ValueError):
    """Why one record is refused (its text is the reason, without the record's name)."""


def record_name(data) -> str:
    """How a refusal names a record: its id when it has a printable one."""
    rid = data.get("id") if isinstance(data, dict) else None
    if isinstance(rid, str) and ID_RE.fullmatch(rid):
        return rid
    return "without a well-formed id" if rid is None else f"{str(rid)[:40]!r}"


def _number(name: str, value, low: float, high: float | None = None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadRecord(f"{name} is {type(value).__name__}, not a number")
    if isinstance(value, int) and abs(value) > MAX_INT:  # math.isfinite would overflow
        raise BadRecord(f"{name} is an integer of {len(str(abs(value)))} digits")
    if not math.isfinite(value):
        raise BadRecord(f"{name} is {value}, not a finite number")
    if value < low or (high is not None and value > high):
        raise BadRecord(f"{name} {value} is outside {low}..{high if high is not None else '∞'}")


def _integer(name: str, value, low: int, high: int) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise BadRecord(f"{name} is {type(value).__name__}, not an integer")
    _number(name, value, low, high)


def _text(name: str, value, required: bool = False) -> None:
    if value is None and not required:
        return
    if not isinstance(value, str):
        raise BadRecord(f"{name} is {type(value).__name__}, not text")
    if len(value) > TEXT_CAPS[name]:
        raise BadRecord(f"{name} is {len(value)} characters long (at most {TEXT_CAPS[name]})")


def _latency(name: str, value, ok: bool) -> None:
    """A latency column: finite, above 0 in an ok run (≥ 0 for a load time), at most MAX_MS."""
    _number(name, value, 0.0)
    if value is None:
        return
    if value == 0 and ok and name != "load_ms":
        raise BadRecord(f"{name} is 0, not a latency (an ok run's is above 0 ms)")
    if value > MAX_MS:
        raise BadRecord(f"{name} is {value:g} ms, above the {MAX_MS:g} ms a run may take")


def _time(name: str, value, required: bool = False, latest: datetime | None = None) -> None:
    _text(name, value, required)
    if value is None:
        return
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise BadRecord(f"{name} {value[:40]!r} is not an ISO 8601 time") from None
    when = when if when.tzinfo else when.replace(tzinfo=UTC)  # aiot writes UTC
    if latest is not None and when > latest:
        raise BadRecord(f"{name} {value[:40]} is in the future (more than "
                        f"{CLOCK_SKEW_S // 60} minutes past this host's clock)")


def _same(name: str, column, stats: dict, stat: str) -> None:
    """A summary column must be its own result's statistic (when both are there)."""
    value = stats.get(stat)
    if column is None or value is None:
        return
    if not math.isclose(column, value, rel_tol=STATS_RTOL, abs_tol=1e-9):
        raise BadRecord(f"{name} {column:g} differs from its result's stats_ms.{stat} {value:g}")


def _columns(data: dict) -> None:
    """The run's summary columns as a device's numbers are checked."""
    ok = data["status"] == "ok"
    for name in ("median_ms", "p90_ms", "load_ms"):
        _latency(name, data.get(name), ok)
    median, p90 = data.get("median_ms"), data.get("p90_ms")
    if median is not None and p90 is not None and median > p90 * (1 + STATS_RTOL):
        raise BadRecord(f"p90_ms {p90:g} is below median_ms {median:g}")


def _stats(data: dict) -> None:
    """The run's ``stats_ms`` as the agent's are checked, and its columns must be them."""
    ok = data["status"] == "ok"
    median, p90 = data.get("median_ms"), data.get("p90_ms")
    result = data.get("result")
    stats = result.get("stats_ms") if isinstance(result, dict) else None
    if not isinstance(stats, dict):
        return
    if (why := stored_stats_problem(result)) is not None:
        raise BadRecord(why if why.startswith("result.") else f"result.{why}")
    for stat in ("median", "p90", "mean", "max"):
        _latency(f"result.stats_ms.{stat}", stats.get(stat), ok)
    _same("median_ms", median, stats, "median")
    _same("p90_ms", p90, stats, "p90")


def _plain(value, depth: int = 0) -> bool:
    """Whether ``value`` nests at most MAX_DEPTH deep and holds no integer past 64 bits and
    no non-finite number (a decoder reads ``1e999`` as infinity); a list of numbers is
    checked at C speed (a record's raw samples are most of it)."""
    if depth > MAX_DEPTH:
        return False
    items = value.values() if type(value) is dict else value
    if type(value) is list and len(items) > 16:  # raw samples: 64-bit integers, at C speed
        try:
            array("q", items)
            return True
        except (TypeError, OverflowError):
            pass
    for item in items:
        kind = type(item)
        if kind is str or item is None or kind is bool:
            continue
        if kind is int:
            if not -MAX_INT <= item <= MAX_INT:
                return False
        elif kind is float:
            if not math.isfinite(item):
                return False
        elif not _plain(item, depth + 1):
            return False
    return True


def _plain_json(value, path: str, depth: int = 0) -> None:
    """:func:`_plain` of one part, saying where it fails (looked for only when it does)."""
    if type(value) not in (dict, list) or _plain(value, depth):
        return
    if depth > MAX_DEPTH:
        shown = path if len(path) <= 60 else f"{path[:60]}…"
        raise BadRecord(f"{shown} is nested more than {MAX_DEPTH} levels deep")
    pairs = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in pairs:
        where = f"{path}.{key}" if isinstance(value, dict) else f"{path}[{key}]"
        if isinstance(item, (dict, list)):
            _plain_json(item, where, depth + 1)
        elif isinstance(item, int) and not isinstance(item, bool) and abs(item) > MAX_INT:
            raise BadRecord(f"{where} is an integer of {len(str(abs(item)))} digits")
        elif isinstance(item, float) and not math.isfinite(item):
            raise BadRecord(f"{where} is {item}, not a finite number")


#: The record's parts kept as JSON, and whether each must be there.
PARTS = (("spec", True), ("provenance", True), ("result", False))


def _json_parts(data: dict, json_chars: int, nonfinite: bool) -> None:
    for name, required in PARTS:
        value = data.get(name)
        if (value is not None or required) and not isinstance(value, dict):
            raise BadRecord(f"{name} is {type(value).__name__}, not an object")
    if nonfinite:
        raise BadRecord("holds a NaN or infinite number (not JSON)")
    if json_chars > MAX_JSON_CHARS:
        raise BadRecord(f"is {json_chars} characters of JSON (at most {MAX_JSON_CHARS})")
    for name, _required in PARTS:
        _plain_json(data.get(name), name)
        if bad := readable.problems(name, data.get(name)):
            raise BadRecord(f"{bad[0]} (aiot writes no such record)")
    placement = (data.get("result") or {}).get("placement")
    if isinstance(placement, dict) and (wrong := placement_problem(placement)) is not None:
        raise BadRecord(f"result.placement: {wrong} (as a device's, not believed)")


def unknown_fields(data: dict) -> list[str]:
    """The fields of a record this aiot does not know (a newer aiot's): left out, counted."""
    return sorted(str(name)[:40] for name in set(data) - set(_FIELDS))


def check_record(data, json_chars: int, nonfinite: bool = False,
                 now: datetime | None = None) -> dict:
    """``data`` (one record as ``results export --format json`` writes it) checked; returns
    its columns but the JSON ones (the caller stores the JSON text it read, never re-encoded).
    Fields it does not know are not refused (:func:`unknown_fields`).

    Args:
        json_chars: how long the record's JSON is (capped at :data:`MAX_JSON_CHARS`).
        nonfinite: the decoder met NaN or ±Infinity somewhere in it (JSON has neither).
        now: the import's time (default: now); a record's time later than it by more than
            :data:`CLOCK_SKEW_S` is refused.

    Raises:
        BadRecord: the first thing wrong with it.
    """
    if not isinstance(data, dict):
        raise BadRecord(f"is {type(data).__name__}, not a record (an object)")
    missing = [name for name in _REQUIRED if name not in data]
    if missing:
        raise BadRecord(f"lacks {', '.join(missing)}")
    if not isinstance(data["id"], str) or not ID_RE.fullmatch(data["id"]):
        raise BadRecord("has no well-formed id (32 lowercase hex digits)")
    if not isinstance(data["kind"], str) or not KIND_RE.fullmatch(data["kind"]):
        raise BadRecord(f"has an unknown kind {str(data['kind'])[:40]!r}")
    if not isinstance(data["status"], str) or data["status"] not in STATUSES:
        raise BadRecord(f"has an unknown status {str(data['status'])[:40]!r}")
    if data["status"] == "pending":
        raise BadRecord("is pending (still being measured where it was written): "
                        "import it once it has finished")
    validity = data.get("validity")
    if not isinstance(validity, (str, type(None))) or validity not in VALIDITIES:
        raise BadRecord(f"has an unknown validity {str(data.get('validity'))[:40]!r}")
    latest = (now or datetime.now(UTC)) + timedelta(seconds=CLOCK_SKEW_S)
    _time("created_at", data["created_at"], required=True, latest=latest)
    _time("finished_at", data.get("finished_at"), latest=latest)
    for name in ("sweep_id", "device", "model", "format", "artifact_sha256", "reason"):
        _text(name, data.get(name))
    _columns(data)
    _number("accuracy", data.get("accuracy"), 0.0, 1.0)
    _integer("threads", data.get("threads"), 1, MAX_THREADS)
    _integer("size_bytes", data.get("size_bytes"), 0, MAX_SIZE_BYTES)
    _json_parts(data, json_chars, nonfinite)
    _stats(data)
    return {k: data.get(k) for k in _FIELDS if k not in ("spec", "result", "provenance")}
