"""Everything a device agent sends, checked before the host believes it.

A device is untrusted: its agent (or whatever answers in its place) can send any bytes. Each
protocol line is decoded (:func:`aiot.device_agent.protocol.decode`) and checked against the
protocol's own definition of its event (``protocol.FIELDS``: types, finite and positive
latencies, fractions in [0, 1], capped strings and lists); a ``result``'s statistics are
checked against the raw samples it carries; an answer must name the backend and threads it
was asked for (:func:`check_answer`). A message that fails raises :class:`DeviceMessageError`,
one line saying what the device sent, and the run is recorded failed; a ``progress`` event is
cosmetic, so a bad one is dropped (logged) and never fails a run.
"""

from __future__ import annotations

import logging
import math

from aiot.core.errors import AgentError
from aiot.device_agent import protocol
from aiot.device_agent.stats import percentile

log = logging.getLogger(__name__)

#: Relative difference allowed between a statistic the agent sent and the same statistic
#: recomputed here from its samples (float sums in another order, on another CPU).
STATS_RTOL = 1e-6


class DeviceMessageError(AgentError):
    """The device sent a message that is not what the protocol allows (or not what was
    asked): the run fails, and retrying on the same device would not help."""

    transient = False


class _Invalid(Exception):
    """One problem found in a message (its text names the field)."""


def read_message(line: str, device: str) -> dict | None:
    """The checked message on one stdout ``line`` of the agent on ``device``; None for human
    log text and for a ``progress`` event that fails its check (logged, never fatal).

    Strings longer than ``protocol.STR_CAP`` are cut in the returned message (with a note).

    Raises:
        AgentError: the line has the protocol prefix but is no message (malformed, or another
            protocol version: the hint says which).
        DeviceMessageError: a message that breaks its event's definition.
    """
    try:
        msg = protocol.decode(line, nonfinite=True)
    except protocol.ProtocolError as exc:
        hint = ("host and agent versions differ; re-run to redeploy" if exc.version_mismatch
                else f"something on {device} printed this where aiot's agent speaks; "
                     f"run aiot devices doctor {device}")
        raise AgentError(f"{device}: {exc}" if exc.version_mismatch else str(exc), hint) from None
    if msg is None:
        return None
    event = msg["event"]
    try:
        envelope = {"v": "int", "event": "str", "id?": "int"}  # id: the request answered
        checked = _fields(msg, {**envelope, **protocol.FIELDS[event]}, "", 0)
        if event == "result":
            check_stats(checked)
    except _Invalid as exc:
        if event == "progress":
            log.debug("agent on %s: progress event ignored: %s", device, exc)
            return None
        raise invalid(device, event, str(exc)) from None
    return checked


def invalid(device: str, event: str, what: str) -> DeviceMessageError:
    """The error for a ``event`` message from ``device`` that broke the protocol (``what``)."""
    return DeviceMessageError(f"the device sent an invalid {event}: {what}", _hint(device))


def answered_twice(device: str, event: str, request_id: int) -> DeviceMessageError:
    """The error for a second ``event`` answering a request that had its answer."""
    return DeviceMessageError(f"the device sent two {event} events for request {request_id}; "
                              f"neither is believed", _hint(device))


def _hint(device: str) -> str:
    return f"the agent on {device} or its runtime misbehaves; run aiot devices doctor {device}"


def check_answer(event: str, fields: dict, spec: dict, device: str) -> None:
    """An answer must be about what was asked: the request's backend (which is its format's
    runtime), thread count and pinned CPUs; a result's placement must add up
    (:func:`placement_problem`).

    Raises:
        DeviceMessageError: the answer names another backend, thread count or CPUs, or
            states a placement whose counts contradict each other.
    """
    if event == "result" and isinstance(fields.get("placement"), dict):
        if (wrong := placement_problem(fields["placement"])) is not None:
            raise invalid(device, event, f"placement: {wrong}")
    schema = protocol.FIELDS.get(event, {})
    for key in ("backend", "threads", "cpus"):
        if key not in schema and f"{key}?" not in schema:
            continue
        asked, said = spec.get(key), fields.get(key)
        if key == "cpus":  # the kernel may narrow a pinning (a cpuset), never widen or invent it
            wrong = said is not None and (asked is None or not set(said) <= set(asked))
        else:
            wrong = asked is not None and said is not None and said != asked
        if wrong:
            raise invalid(device, event, f"{key} is {_shown(said)}, the request asked for "
                                         f"{_shown(asked) if asked is not None else 'none'}")


def placement_problem(placement: dict) -> str | None:
    """What contradicts itself in a placement (``protocol.PLACEMENT``, its kinds already
    checked), or None: more nodes taken or outside than the graph has, an ``outside`` that
    is not ``outside_nodes``, taken and outside that are not the whole, a ``complete`` that
    its own counts deny. A device that says "every operator delegated" beside an operator
    left outside is believed in neither."""
    total, taken = placement.get("total_nodes"), placement.get("delegated_nodes")
    left, outside = placement.get("outside_nodes"), placement.get("outside")
    for name, value in (("delegated_nodes", taken), ("outside_nodes", left)):
        if total is not None and value is not None and value > total:
            return f"{name} {value} is more than total_nodes {total}"
    if isinstance(outside, dict) and left is not None and sum(outside.values()) != left:
        return f"outside lists {sum(outside.values())} node(s) but outside_nodes is {left}"
    if None not in (total, taken, left) and taken + left != total:
        return f"delegated_nodes {taken} and outside_nodes {left} are not total_nodes {total}"
    complete = placement.get("complete")
    if complete is not None and left is not None and complete != (left == 0):
        return f"complete is {str(complete).lower()} with {left} node(s) outside"
    return None


def check_stats(result: dict) -> None:
    """``stats_ms`` must be ordered (min ≤ median ≤ p90 ≤ max, min ≤ mean ≤ max, the
    median inside its confidence interval) and, where the result carries ``samples_ns``,
    agree with them: their count, and min, max, mean, median, percentiles and the interval's
    bounds recomputed from them."""
    stats, samples = result["stats_ms"], result.get("samples_ns")
    ci = stats.get("median_ci") or {}
    known = {**stats, **{f"median_ci.{k}": v for k, v in ci.items()}}
    order = [("min", "median"), ("median", "p90"), ("p90", "max"), ("min", "mean"),
             ("mean", "max"), ("median_ci.low", "median"), ("median", "median_ci.high")]
    for low, high in order:
        if low in known and high in known and known[low] > known[high] * (1 + STATS_RTOL):
            raise _Invalid(f"stats_ms.{low} ({known[low]:g}) is above stats_ms.{high} "
                           f"({known[high]:g})")
    if samples is None:
        return
    if stats["count"] != len(samples):
        raise _Invalid(f"stats_ms.count is {stats['count']} but samples_ns holds {len(samples)}")
    for key, value in _from_samples(samples, ci.get("ranks") or ()).items():
        sent = known.get(key)
        if sent is not None and not math.isclose(sent, value, rel_tol=STATS_RTOL, abs_tol=1e-9):
            raise _Invalid(f"stats_ms.{key} is {sent:g} but its samples_ns give {value:g}")


#: A stored record's ``stats_ms`` as the agent's ``result`` defines it, each statistic optional
#: (a native tool's record may carry its mean alone).
_STORED_STATS = {"stats_ms": {key if key.endswith("?") else f"{key}?": kind
                              for key, kind in protocol.FIELDS["result"]["stats_ms"].items()}}


def stored_stats_problem(result: dict, samples: bool = False) -> str | None:
    """What is wrong with the statistics of a stored result (a record imported from another
    host or a file, as untrusted as a device), or None: the agent's own checks of a
    ``result``'s ``stats_ms`` (kinds: finite, latencies > 0; ordered: :func:`check_stats`).

    Args:
        samples: also check the raw ``samples_ns`` and the statistics against them (~0.3 ms
            per 1000 samples; no view reads them).
    """
    stats = result.get("stats_ms")
    if stats is None:
        return None
    part = {"stats_ms": stats}
    if samples and result.get("samples_ns") is not None:
        part["samples_ns"] = result["samples_ns"]
    try:
        if not isinstance(stats, dict):
            raise _Invalid(f"result.stats_ms is {_shown(stats)}, not an object")
        for key, kind in _STORED_STATS["stats_ms"].items():  # each one there, by its kind
            name = key.rstrip("?")
            if stats.get(name) is not None:
                _check(stats[name], kind, f"result.stats_ms.{name}", 1)
        if "samples_ns" in part:
            _check(part["samples_ns"], ["pos"], "result.samples_ns", 1)
        if "samples_ns" in part and "count" not in stats:
            raise _Invalid("result.stats_ms.count is missing beside its samples_ns")
        check_stats(part)
    except _Invalid as exc:
        return str(exc)
    return None


def _from_samples(samples: list[int], ranks) -> dict:
    """The statistics the agent derives from ``samples`` (ns), in ms, as ``stats.summarize_ms``
    does; ``median_ci.low``/``high`` at the 1-based ``ranks`` the agent sent. Sorted with
    NumPy: a long run's million samples take ~0.1 s here, not seconds."""
    import numpy as np

    try:
        values = (np.sort(np.asarray(samples, dtype=np.int64)) / 1e6).tolist()
    except OverflowError:
        raise _Invalid("samples_ns holds a sample above 2^63 ns") from None
    found = {"min": values[0], "max": values[-1], "mean": math.fsum(values) / len(values)}
    for key, q in (("median", 50), ("p90", 90), ("p99", 99), ("q1", 25), ("q3", 75)):
        found[key] = percentile(values, q)
    for key, rank in zip(("low", "high"), ranks):
        if rank <= len(values):
            found[f"median_ci.{key}"] = values[rank - 1]
    return found


def check_columns(columns: dict) -> str | None:
    """What is wrong with a run's numbers before they are stored (every source, a native
    tool's parsed output included), or None: latencies finite and > 0, load time finite and
    >= 0, accuracy in [0, 1]."""
    kinds = {"median_ms": "ms", "p90_ms": "ms", "load_ms": "ms0", "accuracy": "frac"}
    for key, kind in kinds.items():
        if columns.get(key) is not None:
            try:
                _value(columns[key], kind, key)
            except _Invalid as exc:
                return f"the device's numbers are not a measurement: {exc}"
    return None


# -- the walk over a message -------------------------------------------------------------------


def _fields(msg: dict, schema: dict, path: str, depth: int) -> dict:
    """``msg`` checked against ``schema`` (field → kind); fields it does not name are checked
    only for caps and finite numbers. Returns the message with long strings cut."""
    named = {}
    for key, kind in schema.items():
        optional = key.endswith("?")
        named[key.rstrip("?")] = (kind, optional)
    for key, (kind, optional) in named.items():
        if key != "*" and msg.get(key) is None and not optional:
            raise _Invalid(f"{path}{key} is {'missing' if key not in msg else 'null'}")
    out = {}
    other = named.pop("*", ("any", True))  # the kind of every field not named (a map's values)
    for key, value in msg.items():
        if not isinstance(key, str) or len(key) > 100:
            raise _Invalid(f"{path or 'the message'} has a field named {_shown(key)}")
        kind, optional = named.get(key, other)
        if value is None and not optional:
            raise _Invalid(f"{path}{key} is null")
        out[key] = None if value is None else _check(value, kind, f"{path}{key}", depth + 1)
    return out


def _check(value, kind, path: str, depth: int):
    if depth > protocol.DEPTH_CAP:
        raise _Invalid(f"{path} is nested more than {protocol.DEPTH_CAP} deep")
    if isinstance(kind, dict):
        if not isinstance(value, dict):
            raise _Invalid(f"{path} is {_shown(value)}, not an object")
        return _fields(value, kind, path + ".", depth)
    if isinstance(kind, list):
        if not isinstance(value, list):
            raise _Invalid(f"{path} is {_shown(value)}, not a list")
        return _items(value, kind[0], path, depth)
    if kind in ("any", "dict", "list"):
        return _any(value, kind, path, depth)
    return _value(value, kind, path)


def _any(value, kind: str, path: str, depth: int):
    """A value the schema leaves open (of type ``kind``), walked only for caps and numbers."""
    if kind == "dict" and not isinstance(value, dict) or kind == "list" and not isinstance(value, list):
        raise _Invalid(f"{path} is {_shown(value)}, not {'an object' if kind == 'dict' else 'a list'}")
    if isinstance(value, dict):
        return _fields(value, {}, path + ".", depth)
    if isinstance(value, list):
        return _items(value, "any", path, depth)
    if isinstance(value, str):
        return _value(value, "str", path)
    if isinstance(value, float) and not math.isfinite(value):
        raise _Invalid(f"{path} is {_shown(value)}")
    return value


def _items(value: list, kind, path: str, depth: int) -> list:
    """A list's items, each of ``kind``; the path of a bad one is built only when it fails
    (a run's samples are many)."""
    if len(value) > protocol.LIST_CAP:
        raise _Invalid(f"{path} holds {len(value)} items, more than {protocol.LIST_CAP}")
    if kind in ("pos", "count") and set(map(type, value)) <= {int} and \
            (not value or min(value) >= (1 if kind == "pos" else 0)):
        return value  # the common case, checked at C speed
    out = []
    for i, item in enumerate(value):
        try:
            out.append(_check(item, kind, path, depth + 1))
        except _Invalid as exc:
            raise _Invalid(str(exc).replace(path, f"{path}[{i}]", 1)) from None
    return out


_NUMBER_KINDS = {
    "num": (None, None, ""), "ms": (0, None, ", not > 0"), "ms0": (0, None, ", not >= 0"),
    "frac": (0, 1, ", not in [0, 1]"),
}


def _value(value, kind: str, path: str):
    """One scalar of ``kind`` (see ``protocol.FIELDS``); a cut string for a long ``str``."""
    if kind in ("str", "blob"):
        if not isinstance(value, str):
            raise _Invalid(f"{path} is {_shown(value)}, not text")
        if kind == "str" and len(value) > protocol.STR_CAP:
            return (value[:protocol.STR_CAP]
                    + f" … [cut by aiot: {len(value)} characters in all]")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise _Invalid(f"{path} is {_shown(value)}, not true or false")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Invalid(f"{path} is {_shown(value)}, not a number")
    if kind in ("int", "count", "pos"):
        if not isinstance(value, int):
            raise _Invalid(f"{path} is {_shown(value)}, not an integer")
        if kind == "count" and value < 0 or kind == "pos" and value <= 0:
            raise _Invalid(f"{path} is {value}, not {'>= 0' if kind == 'count' else '> 0'}")
        return value
    if isinstance(value, int) and abs(value) > 2 ** 63:  # math.isfinite would overflow
        raise _Invalid(f"{path} is an integer of {len(str(abs(value)))} digits")
    if not math.isfinite(value):
        raise _Invalid(f"{path} is {_shown(value)}")
    low, high, says = _NUMBER_KINDS[kind]
    if (low is not None and (value < low or value == low and kind == "ms")
            or high is not None and value > high):
        raise _Invalid(f"{path} is {value:g}{says}")
    return value


def _shown(value) -> str:
    """A device's value for a one-line message: short, escaped, its type named if odd."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, (dict, list)):
        text = repr(value) if len(value) <= 8 else ""
        return text if 0 < len(text) <= 40 else \
            f"a{'n object' if isinstance(value, dict) else ' list'} of {len(value)}"
    return protocol.excerpt(value, 40) if isinstance(value, str) else repr(value)[:40]
