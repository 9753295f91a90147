"""A hostile device's agent: the real agent's stdout, rewritten on its way to the transport.

Run as ``real_agent ... | python _agent_rewriter.py MODE`` by the wrapper that the local
device starts in place of its Python (see ``test_r3_hostile_agent.py``): every line the real
agent prints passes through, except what MODE changes (its ``result`` event, mostly).
Standard library only; writes NaN and Infinity as Python's ``json`` does.
"""

from __future__ import annotations

import json
import sys

PREFIX = b"@@AIOT "
MB = 1024 * 1024


def _set(path: str, value):
    def change(msg: dict) -> list[dict]:
        *parents, leaf = path.split(".")
        target = msg
        for key in parents:
            target = target[key]
        target[leaf] = value
        return [msg]
    return change


def _forged_backend(msg: dict) -> list[dict]:
    """Five results for one request, the first with another backend's name."""
    return [{**msg, "backend": "tensorrt"}] + [msg] * 4


def _second_result(msg: dict) -> list[dict]:
    """The real result, then a forged one for the same request (another backend's name)."""
    return [msg, {**msg, "backend": "tensorrt"}]


def _error_10mb(msg: dict) -> list[dict]:
    return [{"v": 1, "event": "error", "id": msg.get("id"), "type": "RuntimeError",
             "message": "E" * (10 * MB)}]


def _odd_progress(msg: dict) -> list[dict]:
    base = {"v": 1, "event": "progress", "id": msg.get("id")}
    odd = [{"phase": 5, "done": "x", "total": -1}, {"phase": "measure", "done": float("nan"),
           "total": 3}, {"phase": "measure"}, {"phase": ["a"] * 10_000, "done": 1e308, "total": 0},
           {"phase": "warmup", "done": -4, "total": float("inf")}, {"phase": "p" * MB}]
    return [{**base, **fields} for fields in odd] + [msg]


def _raw(text: bytes):
    """The result, after ``text`` written as it is (no newline added)."""
    def change(msg: dict) -> list:
        return [text, msg]
    return change


def _long(unit: bytes, total: int, end: bytes = b"\n"):
    """A line of ``total`` bytes made of ``unit``, written in 1 MiB chunks, then the result."""
    def change(msg: dict) -> list:
        block = unit * (MB // len(unit))
        return [_Stream(block, total // len(block), end), msg]
    return change


def _scaled_times(factor: float):
    """Every invoke time multiplied by ``factor``, the statistics recomputed from them (so the
    host's check that they agree passes), the loop's wall times left as measured: times that
    do not add up to the loop they came from (x100: more than its wall; /100: a time taken
    before the work finished, as LiteRT #9453 reported 274 us for a 16 ms run)."""
    from aiot.device_agent.stats import summarize_ms

    def change(msg: dict) -> list[dict]:
        samples = [max(1, int(t * factor)) for t in msg["samples_ns"]]
        return [{**msg, "samples_ns": samples, "stats_ms": summarize_ms(samples)}]
    return change


class _Stream:
    def __init__(self, block: bytes, count: int, end: bytes) -> None:
        self.block, self.count, self.end = block, count, end


MODES = {
    "median-negative": _set("stats_ms.median", -1.5),
    "median-zero": _set("stats_ms.median", 0),
    "median-nan": _set("stats_ms.median", float("nan")),
    "median-inf": _set("stats_ms.median", float("inf")),
    "load-negative": _set("load_ms", -12.0),
    "accuracy-750": _set("accuracy", {"correct": 75, "total": 10, "top1": 7.5}),
    "forged-backend": _forged_backend,
    "second-result": _second_result,
    "error-10mb": _error_10mb,
    "wrong-types": _set("stats_ms.median", "12"),
    "wrong-types-stats": _set("stats_ms", ["fast"]),
    "odd-progress": _odd_progress,
    "version-2": _set("v", 2),
    "malformed": _raw(b'@@AIOT {"v": 1, "event": "result", "stats_ms": {oops\n'),
    "line-80mb": _long(b"x", 80 * MB),
    "cr-only": _long(b"measuring 42%\r", 80 * MB, end=b""),
    "times-over-wall": _scaled_times(100.0),
    "times-before-work": _scaled_times(0.01),
}


def main() -> None:
    change = MODES[sys.argv[1]]
    out = sys.stdout.buffer
    for raw in sys.stdin.buffer:
        parts = [raw]
        if raw.startswith(PREFIX):
            msg = json.loads(raw[len(PREFIX):])
            if msg.get("event") == "result":
                parts = [p if isinstance(p, (bytes, _Stream)) else
                         PREFIX + json.dumps(p).encode() + b"\n" for p in change(msg)]
        for part in parts:
            if isinstance(part, _Stream):
                for _ in range(part.count):
                    out.write(part.block)
                out.write(part.end)
            else:
                out.write(part)
        out.flush()


if __name__ == "__main__":
    main()
