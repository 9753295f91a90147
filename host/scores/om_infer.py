"""BiBench's hardware-inference score OM_infer, from stored latency runs.

BiBench (Sec. 3.2 (6), Appendix B.1) deploys each architecture in FP32 and binarized
(BNN, ReActNet, ... through Larq Compute Engine or daBNN) on ARM CPUs and compares, per
device, thread count and architecture, the inference time T and the storage S of the
deployed model::

    speedup     = T_fp32 / T_bin
    compression = S_fp32 / S_bin
    OM_infer    = sqrt( (E(speedup)² + E(compression)²) / 2 )

with E the mean over the measured (device, threads, architecture) pairs. The paper's
Table 3 reports BNN 5.45x / 15.62x / 11.70 and ReActNet 4.89x / 15.52x / 11.51.

Here a *binarized run* is the newest ok ``latency`` record of a key
(:func:`aiot.host.store.identity.key`, the key every view groups by) whose spec names a
BiBench algorithm (``spec["binarize"]``, any format); its *baseline* is the newest ok record
of the same device, model, thread count, delegate, cluster, ``via`` and input shapes with no
``binarize``, the baseline format (``tflite`` by default) and full precision (no converter
option, or only ones set to ``fp32``: an ``--opt quant=int8`` run is no FP32 baseline). Which
tool timed the baseline (the agent or a native benchmark) does not matter; a binarized model
timed by both is two binarized runs, two pairs. T is the record's latency
(:func:`aiot.host.store.identity.latency`: its median, or the mean of ``result["stats_ms"]``
when the runner printed a mean only, as most native benchmark tools do); S is the artifact's
size in bytes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from aiot.host.store import identity

#: The FP32 format binarized runs are compared with unless told otherwise.
DEFAULT_BASELINE = "tflite"


@dataclass(frozen=True)
class Pair:
    """One binarized run and its FP32 baseline on the same device, model and thread count.

    ``stat`` says which latency statistic the ratio compares: ``median`` or ``mean`` when
    both runs have it, else ``median/mean`` style (baseline's / binarized run's).
    """

    device: str
    model: str
    threads: int | None
    algorithm: str  # the BiBench algorithm, e.g. "bnn", "reactnet"
    format: str  # the binarized run's format, e.g. "lce", "dabnn"
    baseline: str  # the baseline run's format
    stat: str
    fp_ms: float
    bin_ms: float
    fp_bytes: int
    bin_bytes: int
    speedup: float  # fp_ms / bin_ms
    compression: float  # fp_bytes / bin_bytes
    fp_id: str
    bin_id: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Unpaired:
    """A binarized run with no FP32 baseline of the same device, model and threads."""

    device: str
    model: str
    threads: int | None
    algorithm: str
    format: str
    baseline: str  # the format of the baseline it lacks
    record_id: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Aggregate:
    """OM_infer of one (algorithm, format): means over its pairs.

    ``devices``, ``models`` and ``threads`` list what the means cover, so scores over
    different sets of devices are not mistaken for comparable ones.
    """

    algorithm: str
    format: str
    baseline: str
    pairs: int
    speedup: float  # mean of the pairs' speedups
    compression: float  # mean of the pairs' compressions
    om_infer: float
    devices: tuple[str, ...]
    models: tuple[str, ...]
    threads: tuple[int, ...]
    stats: tuple[str, ...]  # the pairs' latency statistics (see Pair.stat)

    def to_dict(self) -> dict:
        data = asdict(self)
        for key in ("devices", "models", "threads", "stats"):
            data[key] = list(data[key])
        return data


@dataclass(frozen=True)
class Matching:
    """What :func:`match_runs` found: the pairs and the binarized runs left without one."""

    pairs: list[Pair]
    unpaired: list[Unpaired]

    def to_dict(self) -> dict:
        return {"pairs": [p.to_dict() for p in self.pairs],
                "unpaired": [u.to_dict() for u in self.unpaired]}


def mean_ms(record) -> float | None:
    """The mean latency of ``record``'s stored statistics, if it has one."""
    stats = (record.result or {}).get("stats_ms") or {}
    value = stats.get("mean")
    return float(value) if value is not None else None


def _positive(value) -> bool:
    return value is not None and value > 0


def _usable(record) -> bool:
    """An ok latency run with a positive size and a positive latency (a ratio needs both)."""
    return (record.kind == "latency" and _positive(record.size_bytes)
            and _positive(identity.latency_ms(record)))


def _latencies(fp, binarized) -> tuple[float, float, str]:
    """(baseline ms, binarized ms, stat): the same statistic on both sides where possible.

    Each side's latency is :func:`aiot.host.store.identity.latency` (a median, preferred: it
    is robust to the odd slow iteration). When one side has a median and the other a mean
    only (a native tool), both sides use their means, since a median over a mean would bias
    the ratio; only when that is impossible either are mixed.
    """
    fp_latency, bin_latency = identity.latency(fp), identity.latency(binarized)
    if fp_latency.stat == bin_latency.stat:
        return fp_latency.ms, bin_latency.ms, fp_latency.stat
    fp_mean, bin_mean = mean_ms(fp), mean_ms(binarized)
    if _positive(fp_mean) and _positive(bin_mean):
        return fp_mean, bin_mean, "mean"
    return fp_latency.ms, bin_latency.ms, f"{fp_latency.stat}/{bin_latency.stat}"


def _time(record) -> tuple:
    return (record.created_at or "", record.finished_at or "")


def _newest(records) -> dict[tuple, object]:
    """The newest usable record per key (:func:`aiot.host.store.identity.key`)."""
    newest: dict[tuple, object] = {}
    # A stable sort keeps the store's insertion order among records of the same second.
    for record in sorted(records, key=_time):
        if _usable(record):
            newest[identity.key(record)] = record
    return newest


def _place(key: identity.Key) -> tuple:
    """What a binarized run shares with its baseline: its key less the format, algorithm,
    converter options and the tool that timed it."""
    c = key.configuration
    return (c.device, c.model, key.threads, c.delegate, c.cluster, c.via, c.input_shapes)


def full_precision(configuration: identity.Configuration) -> bool:
    """No binarization and no converter option but ``fp32`` ones (``quant=fp32``,
    daBNN's ``precision=fp32``): an FP32 model."""
    return configuration.binarize is None and all(v == "fp32" for _, v in configuration.options or ())


def match_runs(records, baseline: str = DEFAULT_BASELINE) -> Matching:
    """Pair every binarized run with its FP32 baseline run.

    Args:
        records: run records in any order; only ok ``latency`` records with a size and a
            latency are considered, and of several with the same key only the newest (by
            ``created_at``, then ``finished_at``).
        baseline: the format of the full-precision runs to compare with.

    Returns:
        the pairs, sorted by algorithm, format, model, device and threads, and the binarized
        runs that have no baseline, in the same order.
    """
    newest = _newest(records)
    baselines = {}
    for key, record in sorted(newest.items(), key=lambda item: _time(item[1])):
        if key.configuration.format == baseline and full_precision(key.configuration):
            baselines[_place(key)] = record  # the newest of an agent's and a tool's run
    pairs, unpaired = [], []
    for key, record in newest.items():
        algorithm, fmt = key.configuration.binarize, key.configuration.format
        if algorithm is None:
            continue
        device, model, threads = key.configuration.device, key.configuration.model, key.threads
        fp = baselines.get(_place(key))
        if fp is None:
            unpaired.append(Unpaired(device, model, threads, algorithm, fmt, baseline, record.id))
            continue
        fp_ms, bin_ms, stat = _latencies(fp, record)
        pairs.append(Pair(
            device=device, model=model, threads=threads, algorithm=algorithm, format=fmt,
            baseline=baseline, stat=stat, fp_ms=fp_ms, bin_ms=bin_ms, fp_bytes=fp.size_bytes,
            bin_bytes=record.size_bytes, speedup=fp_ms / bin_ms,
            compression=fp.size_bytes / record.size_bytes, fp_id=fp.id, bin_id=record.id,
        ))

    def order(item):
        return (item.algorithm, item.format, item.model or "", item.device or "", item.threads or 0)

    return Matching(sorted(pairs, key=order), sorted(unpaired, key=order))


def pair_runs(records, baseline: str = DEFAULT_BASELINE) -> list[Pair]:
    """The pairs of :func:`match_runs` (binarized runs without a baseline left out)."""
    return match_runs(records, baseline).pairs


def om_infer_value(speedup: float, compression: float) -> float:
    """``sqrt((speedup² + compression²) / 2)``, the quadratic mean of the two mean ratios."""
    return math.sqrt((speedup ** 2 + compression ** 2) / 2)


def om_infer(pairs: list[Pair]) -> list[Aggregate]:
    """OM_infer per (algorithm, format), sorted by those two.

    E is the arithmetic mean over the group's pairs, i.e. over every measured (device,
    threads, model); a device measured at more thread counts weighs more, as in BiBench.
    """
    groups: dict[tuple[str, str], list[Pair]] = {}
    for pair in pairs:
        groups.setdefault((pair.algorithm, pair.format), []).append(pair)
    scores = []
    for (algorithm, fmt), group in sorted(groups.items()):
        speedup = sum(p.speedup for p in group) / len(group)
        compression = sum(p.compression for p in group) / len(group)
        scores.append(Aggregate(
            algorithm=algorithm, format=fmt, baseline=group[0].baseline, pairs=len(group),
            speedup=speedup, compression=compression,
            om_infer=om_infer_value(speedup, compression),
            devices=tuple(sorted({p.device for p in group})),
            models=tuple(sorted({p.model for p in group})),
            threads=tuple(sorted({p.threads for p in group if p.threads is not None})),
            stats=tuple(sorted({p.stat for p in group})),
        ))
    return scores
