"""Versioned JSON-lines protocol between the device agent and the host.

Every machine-readable line the agent prints is ``@@AIOT `` followed by one JSON object
with ``v`` (protocol version) and ``event``. Anything else on stdout is human log text that
the host keeps for ``--verbose`` but never parses.

Events (protocol v1):
    hello     agent_version, python, platform, machine, runtimes {name: version | null}
    progress  phase ("load" | "warmup" | "measure" | "accuracy"), done, total
    result    the run's measurements (see ``agent.run``)
    predicted n, output_shape, runtime_version: outputs of a ``predict`` spec were written
              (see ``agent.predict``; added with agent 0.2.0 as a new event, so
              protocol v1 still holds for everything older hosts ask)
    memory    backend, runtime_version, threads, runs, rss_before_load_kb, rss_after_load_kb,
              peak_rss_kb: answer to a ``memory`` spec (see ``agent.memory``; added with agent
              0.3.0 as a new event, protocol v1 unchanged, like ``predicted``)
    ready     backend, runtime_version, agent_version, threads, input_shape, input_dtype: a
              ``serve`` session loaded its model and reads requests (agent 0.4.0, new event)
    predictions id, shape, dtype ("float32"), data (base64 of the little-endian outputs, one
              row per input row), compute_ms: a ``serve`` session's answer to one request
              (agent 0.4.0, new event)
    error     type, message; in a ``serve`` session also id, the request it answers (null when
              the request had none)

Agent 0.3.0 also added fields to ``result`` (``stability``; ``stats_ms`` gained ``mad``,
``robust_cv``, ``trimmed_mean``, ``median_ci`` and ``outliers``) and optional run-spec keys
(``target_cv``, ``max_runs``). Only additions, so neither the protocol version nor the run
spec version changed; the host deploys the agent by content hash, so it always talks to the
agent it ships. Agent 0.3.1: ``hello``'s ``runtimes`` come from package metadata (installed
versions, nothing imported), so a hello no longer costs the runtimes' import time.

Agent 0.4.0 added the ``serve`` command: the agent loads the model once, emits ``ready`` and
then reads requests on stdin, one JSON object per line (no prefix: only the host writes
there)::

    {"op": "predict", "id": 7, "shape": [N, ...], "dtype": "float32", "data": "<base64>"}
    {"op": "close"}

``data`` is the raw little-endian array, batch first; each row has the model's input shape
without its batch dimension. Every ``predict`` gets a ``predictions`` or an ``error`` line with
its ``id``, and the session keeps serving after an error; ``close`` or the end of stdin ends
the process with exit code 0. Two new events and an optional ``id`` on ``error``: additions
only, so protocol v1 still holds.

Agent 0.5.0 added the ``session`` command (see ``session.py``): one agent per device that
answers ``hello``, ``telemetry`` and, each in a forked child, ``run``, ``memory`` and
``predict`` requests, forwarding their events with the request's ``id``. One new event:

    telemetry id, text (the host's telemetry script's sections, read from sysfs), unix_s

``ready`` of a session carries agent_version, pid and isolation ("fork"). Additions only:
protocol v1 still holds.

Agent 0.6.0 reads any input signature (see ``signature.py``): the ``inspect`` command (also
a session op) answers with one new event,

    signature backend, runtime_version, inputs, outputs: each a list of {name, shape (-1 for
              a dynamic dim), dtype (NumPy name), quantization ({scale, zero_point} or null)}

and the run spec gained optional keys ``input_shapes`` ({name: dims} fixing dynamic dims)
and ``inputs`` (a pushed .npz, one array per input name); ``result`` gained ``inputs`` (the
arrays fed: name, shape, dtype, quantization, sha256, source "generated" | "npz") and
``outputs`` (name, shape, dtype, quantization, fingerprint per output). A ``predict`` spec
may name an ``inputs`` .npz (a batch per input name): its ``outputs`` file is then a .npz
too, and ``predicted`` gains ``outputs`` (name, shape, dtype of each stacked output).
Additions only: protocol v1 still holds, and a single float input is generated as before.

Agent 0.7.0 added the ``profile`` command (also a session op, run in a forked child like
``memory``): per-operator time from the runtime's own profiler, in a process of its own so
the profiler never touches a timed run. One new event,

    profile   backend, runtime_version, threads, available; with a profiler: tool, runs,
              warmup, unit ("ms per inference"), total_ms, ops [{name, type, ms, calls, pct}],
              ops_left_out, ms_left_out, by_type [{type, ms, count, pct}]; without one:
              reason (see ``profiling.py``)

and ``progress`` gained the phase "profile". The run spec may carry ``profile_runs`` and
``profile_warmup`` (integers). Additions only: protocol v1 still holds.

Agent 0.8.0 added ``placement`` to ``result``: where the model's operators ran, from the
runtime's own account, read after the timed loop (``SessionBase.placement``): ``engine`` (what
was to take every operator: "xnnpack", "CPUExecutionProvider", ...), ``source`` (the
runtime's account it comes from), ``total_nodes``, ``delegated_nodes``, ``outside_nodes``,
``partitions``, ``outside`` ({operator type: count} left outside the engine), ``by_engine``
({executor: count}), ``complete`` (every operator taken; null: the runtime does not say) and
``note``. An addition: protocol v1 still holds.

Agent 0.9.0 added ``speed`` to ``result``: a fixed reference kernel's time just before and
just after the timed loop (``speedref``: ``kernel``, ``before_ms``, ``after_ms``; null where
NumPy could not run it), the CPU's own speed, which the load counters do not see. An addition:
protocol v1 still holds.
"""

from __future__ import annotations

import json

PROTOCOL_VERSION = 1
PREFIX = "@@AIOT "
EVENTS = ("hello", "progress", "result", "predicted", "memory", "ready", "predictions",
          "telemetry", "signature", "profile", "error")


def encode(event: str, **fields) -> str:
    """One protocol line for ``event`` (no trailing newline)."""
    if event not in EVENTS:
        raise ValueError(f"unknown event {event!r}")
    payload = {"v": PROTOCOL_VERSION, "event": event}
    payload.update(fields)
    return PREFIX + json.dumps(payload, separators=(",", ":"), allow_nan=False)


class ProtocolError(ValueError):
    """A line carried the prefix but was not a valid message of a known version.

    Attributes:
        version_mismatch: the message was well formed but of another protocol version (the
            host and the agent it talks to differ); False for bytes that are no message at all.
    """

    def __init__(self, message: str, version_mismatch: bool = False) -> None:
        super().__init__(message)
        self.version_mismatch = version_mismatch


#: How much of a malformed line an error quotes.
EXCERPT_CHARS = 80


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` shortened to ``limit`` characters for a one-line message (repr-escaped)."""
    shown = repr(text[:limit])
    return shown + (f" … ({len(text)} characters)" if len(text) > limit else "")


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def decode(line: str, nonfinite: bool = False) -> dict | None:
    """The message on ``line``, or None for human log text.

    ``NaN`` and ``Infinity`` are refused (Python's ``json`` accepts them; JSON and ``encode``
    do not), as is nesting too deep for the parser. ``nonfinite=True`` reads them as floats
    instead, for a caller that checks every number itself and names the field that held one.

    Raises:
        ProtocolError: the line has the prefix but bad JSON, an unknown version or event.
    """
    line = line.rstrip("\r\n")
    if not line.startswith(PREFIX):
        return None
    body = line[len(PREFIX):]
    try:
        msg = json.loads(body, parse_constant=float if nonfinite else _no_constant)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise ProtocolError(f"the device sent a malformed protocol line ({_first(exc)}): "
                            f"{excerpt(body)}") from None
    if not isinstance(msg, dict):
        raise ProtocolError(f"the device sent a malformed protocol line (not a JSON object): "
                            f"{excerpt(body)}")
    version = msg.get("v")
    if version != PROTOCOL_VERSION:
        shown = excerpt(version, 20) if isinstance(version, str) else repr(version)[:20]
        raise ProtocolError(f"agent speaks protocol {shown}, host expects {PROTOCOL_VERSION}",
                            version_mismatch=True)
    if msg.get("event") not in EVENTS:
        raise ProtocolError(f"the device sent an unknown event {excerpt(str(msg.get('event')), 40)}")
    return msg


def _first(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:120]


# -- what each event carries -------------------------------------------------------------------
#
# The host checks every message it reads against this (``aiot.host.devices.agent_messages``):
# a device is untrusted, and a number it makes up must never become a stored measurement.
# ``FIELDS[event]`` maps a field to its kind; a field whose name ends in ``?`` may be missing
# or null, and fields not named here are allowed (later agents add fields) but capped like any
# other string or list; ``*`` names the kind of every field not named (a map's values). A kind
# is one of the names below, a dict (a nested object with its own fields) or a one-element
# list (a list whose items are all of that kind).
#
#   str    text, at most STR_CAP characters kept (longer text is cut, and says so)
#   blob   text bounded only by the line limit (base64 data, telemetry sections)
#   int    an integer (not a bool);  count  an integer >= 0;  pos  an integer > 0
#   num    a finite number;  ms  a finite number > 0 (a latency);  ms0  a finite number >= 0
#   frac   a finite number in [0, 1];  bool;  dict  any object;  list  any list;  any

#: Characters of a ``str`` field kept; longer text is cut with a note saying so.
STR_CAP = 2048
#: Items of a list kept before a message is refused (a run's samples included).
LIST_CAP = 20_000_000
#: Nesting depth of a message (objects and lists in each other).
DEPTH_CAP = 32

_QUANT = {"scale": "num", "zero_point": "int"}
#: One input or output of a model, as ``signature.entry`` writes it.
_TENSOR = {"name": "str", "shape": ["int"], "dtype": "str", "quantization?": _QUANT}
_FINGERPRINT = {"size": "count", "l2": "ms0", "head": "list",
                "nonfinite?": {"nan": "count", "inf": "count", "-inf": "count"}}
_STATS_MS = {
    "count": "pos", "min": "ms", "max": "ms", "mean": "ms", "median": "ms", "p90": "ms",
    "std?": "ms0", "q1?": "ms", "q3?": "ms", "iqr?": "ms0", "p99?": "ms", "cv?": "ms0",
    "mad?": "ms0", "robust_cv?": "ms0", "trimmed_mean?": "ms",
    "outliers?": {"count": "count", "low?": "count", "high?": "count", "fences?": ["num"],
                  "indices?": ["count"]},
    "median_ci?": {"level": "frac", "low": "ms", "high": "ms", "ranks?": ["pos"]},
}
#: Where a run's operators ran (``result.placement``; ``backends.base.placement_entry``).
PLACEMENT = {"engine": "str", "source": "str", "total_nodes?": "count",
             "delegated_nodes?": "count", "outside_nodes?": "count", "partitions?": "count",
             "outside?": {"*?": "count"}, "by_engine?": {"*?": "count"}, "complete?": "bool",
             "note?": "str"}
FIELDS = {
    "hello": {"agent_version": "str", "python": "str", "platform": "str", "machine": "str",
              "runtimes": {"*?": "str"}, "runtime?": "str", "sigsys_skipped?": "count"},
    "progress": {"phase": "str", "done": "count", "total": "count"},
    "result": {
        "backend": "str", "runtime_version?": "str", "api?": "str", "threads?": "pos",
        "cpus?": ["count"], "input_shape?": ["int"], "load_ms": "ms0",
        "first_inference_ms?": "ms0", "output?": _FINGERPRINT,
        "inputs?": [{**_TENSOR, "sha256?": "str", "source?": "str", "value?": "num",
                     "range?": ["int"]}],
        "outputs?": [{**_TENSOR, "fingerprint?": _FINGERPRINT}],
        "warmup?": {"count": "count", "seconds": "ms0"}, "samples_ns?": ["pos"],
        "stats_ms": _STATS_MS,
        "stability?": {"target_cv?": "ms0", "cv?": "ms0", "cv_metric?": "str", "stable?": "bool",
                       "stopped_by?": "str"},
        "load?": {"online_cpus?": "pos", "seconds?": "ms0", "busy_cpus?": "ms0",
                  "own_cpus?": "ms0", "other_cpus?": "num", "loadavg?": ["ms0"],
                  "top?": [{"pid": "count", "name": "str", "cpus": "ms0"}]},
        "speed?": {"kernel": "str", "before_ms": "ms", "after_ms": "ms"},
        "measure_start_unix_s?": "num", "measure_end_unix_s?": "num",
        "accuracy?": {"correct": "count", "total": "count", "top1": "frac"},
        "peak_rss_kb?": "count", "sigsys_skipped?": "count",
        "placement?": PLACEMENT,
    },
    "predicted": {"n": "count", "output_shape": ["count"], "runtime_version?": "str",
                  "outputs?": [{"name": "str", "shape": ["count"], "dtype": "str"}]},
    "memory": {"backend": "str", "runtime_version?": "str", "threads?": "pos", "runs": "pos",
               "rss_before_load_kb?": "count", "rss_after_load_kb?": "count",
               "peak_rss_kb": "count"},
    "ready": {"agent_version?": "str", "backend?": "str", "runtime_version?": "str",
              "input_shape?": ["int"], "input_dtype?": "str",
              "threads?": "pos", "pid?": "count", "isolation?": "str"},
    "predictions": {"id?": "int", "shape": ["count"], "dtype": "str", "data": "blob",
                    "compute_ms?": "ms0"},
    "telemetry": {"id?": "int", "text": "blob", "unix_s?": "num"},
    "signature": {"backend": "str", "runtime_version?": "str", "inputs": [_TENSOR],
                  "outputs": [_TENSOR]},
    "profile": {"backend": "str", "runtime_version?": "str", "threads?": "pos",
                "available": "bool", "total_ms?": "ms0", "reason?": "str",
                "ops?": [{"name": "str", "type?": "str", "ms": "ms0", "calls?": "ms0",
                          "pct?": "ms0"}],
                "by_type?": [{"type": "str", "ms": "ms0", "count?": "count", "pct?": "ms0"}]},
    "error": {"type": "str", "message": "str", "id?": "int"},
}
#: The event that answers each command: exactly one per request.
ANSWERS = {"run": "result", "predict": "predicted", "memory": "memory", "inspect": "signature",
           "profile": "profile", "hello": "hello", "telemetry": "telemetry"}
