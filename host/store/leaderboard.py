"""Leaderboards over stored runs: the fastest VALID run per key (``aiot results top``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from aiot.host.store import identity
from aiot.host.store.store import RunRecord


@dataclass(frozen=True)
class Standing:
    """One place of the latency leaderboard: the best run of its key."""

    rank: int
    record_id: str
    device: str | None
    model: str | None
    binarize: str | None
    format: str | None
    threads: int | None
    native: str | None
    stat: str  # median, or mean for a native tool that prints a mean only
    latency_ms: float
    p90_ms: float | None
    size_bytes: int | None
    variant: str = ""  # how it ran: tflite[quant=int8]+nnapi (benchmark_model) @big via app
    label: str = ""  # the run's one label (aiot.host.store.identity.label)

    def to_dict(self) -> dict:
        return asdict(self)


def latency_board(records: list[RunRecord]) -> list[Standing]:
    """The fastest ok VALID run per key (:func:`aiot.host.store.identity.key`), fastest first.

    A key is the configuration every view groups by: an int8 run, a ``--via app`` run and a
    native tool's run of the same model are places of their own, never hidden behind a
    faster configuration's.
    """
    best: dict[tuple, tuple[float, str, RunRecord]] = {}
    for r in records:
        latency = identity.latency(r) if r.kind == "latency" else None
        if latency is None or r.validity != "VALID":
            continue
        key = identity.key(r)
        if key not in best or latency.ms < best[key][0]:
            best[key] = (latency.ms, latency.stat, r)
    ranked = sorted(best.values(), key=lambda item: item[0])
    return [Standing(rank, r.id, r.device, r.model, (r.spec or {}).get("binarize"), r.format,
                     r.threads, (r.spec or {}).get("native"), stat, ms, r.p90_ms, r.size_bytes,
                     identity.variant(r), identity.label(r))
            for rank, (ms, stat, r) in enumerate(ranked, start=1)]
