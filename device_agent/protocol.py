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
    """A line carried the prefix but was not a valid message of a known version."""


def decode(line: str) -> dict | None:
    """The message on ``line``, or None for human log text.

    Raises:
        ProtocolError: the line has the prefix but bad JSON, an unknown version or event.
    """
    line = line.rstrip("\r\n")
    if not line.startswith(PREFIX):
        return None
    try:
        msg = json.loads(line[len(PREFIX):])
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"malformed agent message: {exc}") from None
    if not isinstance(msg, dict) or msg.get("v") != PROTOCOL_VERSION:
        raise ProtocolError(f"agent speaks protocol {msg.get('v') if isinstance(msg, dict) else '?'}, "
                            f"host expects {PROTOCOL_VERSION}")
    if msg.get("event") not in EVENTS:
        raise ProtocolError(f"unknown agent event {msg.get('event')!r}")
    return msg
