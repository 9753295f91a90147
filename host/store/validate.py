"""Is a record from elsewhere (an export file, another host's store) one aiot could have written?

``aiot results import`` takes files from other hosts and CI jobs: untrusted input. Each record
is checked here before it is stored: its fields and their types, a known status, finite
non-negative latencies, bounded sizes and text lengths, a well-formed id and times. A record
that fails is refused with one line naming it and saying why; nothing of it is stored.

Bounds are generous for what aiot writes (a record's spec, result and provenance are a few
KiB; a reason is a line or a device's error text) and small for what a hostile file could
push into every later reader (``results list``, the report).
"""

from __future__ import annotations

import math
import re
from datetime import datetime

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


def _time(name: str, value, required: bool = False) -> None:
    _text(name, value, required)
    if value is not None:
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise BadRecord(f"{name} {value[:40]!r} is not an ISO 8601 time") from None


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


def check_record(data, json_chars: int, nonfinite: bool = False) -> dict:
    """``data`` (one record as ``results export --format json`` writes it) checked; returns
    its columns but the JSON ones (the caller stores the JSON text it read, never re-encoded).

    Args:
        json_chars: how long the record's JSON is (capped at :data:`MAX_JSON_CHARS`).
        nonfinite: the decoder met NaN or ±Infinity somewhere in it (JSON has neither).

    Raises:
        BadRecord: the first thing wrong with it.
    """
    if not isinstance(data, dict):
        raise BadRecord(f"is {type(data).__name__}, not a record (an object)")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise BadRecord(f"has unknown fields {', '.join(map(str, unknown))[:120]} "
                        "(written by a newer aiot?)")
    missing = [name for name in _REQUIRED if name not in data]
    if missing:
        raise BadRecord(f"lacks {', '.join(missing)}")
    if not isinstance(data["id"], str) or not ID_RE.fullmatch(data["id"]):
        raise BadRecord("has no well-formed id (32 lowercase hex digits)")
    if not isinstance(data["kind"], str) or not KIND_RE.fullmatch(data["kind"]):
        raise BadRecord(f"has an unknown kind {str(data['kind'])[:40]!r}")
    if data["status"] not in STATUSES:
        raise BadRecord(f"has an unknown status {str(data['status'])[:40]!r}")
    if data["status"] == "pending":
        raise BadRecord("is pending (still being measured where it was written): "
                        "import it once it has finished")
    if data.get("validity") not in VALIDITIES:
        raise BadRecord(f"has an unknown validity {str(data.get('validity'))[:40]!r}")
    _time("created_at", data["created_at"], required=True)
    _time("finished_at", data.get("finished_at"))
    for name in ("sweep_id", "device", "model", "format", "artifact_sha256", "reason"):
        _text(name, data.get(name))
    # A 0.0 median is a value the validity check judges (see identity.latency), not a lie.
    for name in ("median_ms", "p90_ms", "load_ms"):
        _number(name, data.get(name), 0.0)
    _number("accuracy", data.get("accuracy"), 0.0, 1.0)
    _integer("threads", data.get("threads"), 1, MAX_THREADS)
    _integer("size_bytes", data.get("size_bytes"), 0, MAX_SIZE_BYTES)
    _json_parts(data, json_chars, nonfinite)
    return {k: data.get(k) for k in _FIELDS if k not in ("spec", "result", "provenance")}
