"""What a predictor learns from: every run in the store for one device, format and thread
count whose model aiot can read again, collected or not, and only the runs judged VALID.

A run is left out, and counted by why, when it failed or was skipped, was judged INVALID
(a busy host, a noisy sample: the collection's own verdicts decide what is learned from),
was timed another way (a native tool, a pinned cluster, converter options, another input
shape), or measured a model whose graph cannot be had here (an artifact file; a user's file
that ``aiot predict -m`` has not read yet). Runs of the same model are one sample, their
medians' median.

A profiled kernel also tells which of its runtime's code paths ran it (:func:`code_path`): ONNX
Runtime runs a convolution or a pool in its own blocked layout (NCHWc), reordering tensors in
and out, only where the channels fill its SIMD block, and otherwise on a plain path several
times slower per MAC. Each path gets a regressor of its own (:mod:`aiot.host.predict.fitting`).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from aiot.host.engine.validity import VALID, relaxed_limits
from aiot.host.predict import graphs
from aiot.host.predict.decompose import Decomposition
from aiot.host.transports.probe import emulated


#: Per format, the operators its runtime inserts to run a kernel in a blocked layout of its own
#: (ONNX Runtime's NCHWc transformer: ``ReorderInput`` and ``ReorderOutput`` around the
#: convolutions and pools it converts). A profile showing one ran the kernel on that path.
LAYOUT_OPS = {"onnx": frozenset({"ReorderInput", "ReorderOutput"})}
BLOCKED, PLAIN = "blocked", "plain"


def code_path(fmt: str, runtime_ops: list[str]) -> str:
    """``blocked`` or ``plain``: the code path a profile with ``runtime_ops`` shows for a kernel
    of ``fmt``; ``""`` where it cannot tell (no profile, or a runtime with one path)."""
    layout = LAYOUT_OPS.get(fmt)
    if not layout or not runtime_ops:
        return ""
    return BLOCKED if layout & set(runtime_ops) else PLAIN


@dataclass
class Sample:
    """One model's VALID runs on the target.

    Attributes:
        model: the records' model name; family: its family (:func:`aiot.host.predict.grid.family`).
        ms: the median of its runs' medians; records: their ids.
        decomposition: its kernels.
        graph_ops: the operators its artifact holds, as the converter wrote them (TFLite's
            ``CONV_2D``, ONNX's ``Conv``); runtime_ops: the operator types its profile timed
            (ONNX Runtime's fused ``Conv`` with ``ReorderInput``), where it was profiled.
        path: the code path that profile shows (:func:`code_path`).
    """

    model: str
    family: str
    ms: float
    records: list[str]
    decomposition: Decomposition
    graph_ops: list[str] = field(default_factory=list)
    runtime_ops: list[str] = field(default_factory=list)
    path: str = ""

    @property
    def single(self) -> bool:
        """Whether the model is one kernel (a kernel sample; the others teach the composition)."""
        return len(self.decomposition.kernels) == 1


@dataclass
class TrainingSet:
    """The samples of one (device, format, threads), and what was left out and why."""

    device: str
    format: str
    threads: int
    samples: list[Sample] = field(default_factory=list)
    left_out: Counter = field(default_factory=Counter)
    relaxed: Counter = field(default_factory=Counter)  # VALID under looser limits: which
    emulated: int = 0  # runs learned from that an emulated device timed

    @property
    def kernels(self) -> list[Sample]:
        return [s for s in self.samples if s.single]

    @property
    def models(self) -> list[Sample]:
        return [s for s in self.samples if not s.single]

    @property
    def runs(self) -> int:
        return sum(len(s.records) for s in self.samples)

    def without(self, families: set[str]) -> TrainingSet:
        """This set with the samples of ``families`` held out."""
        kept = [s for s in self.samples if s.family not in families]
        return TrainingSet(self.device, self.format, self.threads, kept, self.left_out,
                           self.relaxed, self.emulated)

    def left_out_line(self) -> str | None:
        """``left out 12 runs: INVALID (device busy) 9, failed 3``, or None."""
        if not self.left_out:
            return None
        parts = [f"{why} {n}" for why, n in self.left_out.most_common()]
        return f"left out {sum(self.left_out.values())} run(s): " + ", ".join(parts)


def training_set(store, device: str, fmt: str, threads: int) -> TrainingSet:
    """Every latency record of ``device``, ``fmt`` and ``threads`` in ``store``, sorted into
    samples and what was left out (see the module docstring)."""
    found = TrainingSet(device, fmt, threads)
    grouped: dict[tuple, list] = {}
    for record in store.query(kind="latency", device=device, fmt=fmt):
        if record.threads != threads:
            continue
        why = _left_out(record)
        if why is not None:
            found.left_out[why] += 1
            continue
        grouped.setdefault((record.model, (record.spec or {}).get("model_sha256")), []).append(record)
    for (model, _sha), records in grouped.items():
        decomposition = graphs.of_record(records[-1])
        if isinstance(decomposition, str):
            found.left_out[decomposition] += len(records)
            continue
        for record in records:
            validity = (record.result or {}).get("validity") or {}
            for limit in relaxed_limits(validity.get("limits")):
                found.relaxed[limit] += 1
            found.emulated += emulated(((record.provenance or {}).get("device")) or {})
        runtime_ops = _runtime_ops(records)
        found.samples.append(Sample(
            model, graphs.family(model), statistics.median(r.median_ms for r in records),
            [r.id for r in records], decomposition, _graph_ops(records[-1]), runtime_ops,
            code_path(fmt, runtime_ops)))
    return found


def _left_out(record) -> str | None:
    """Why a record teaches nothing about this runtime's latency, or None."""
    spec = record.spec or {}
    if record.status != "ok":
        return record.status
    if record.validity != VALID:
        reasons = ((record.result or {}).get("validity") or {}).get("reasons") or []
        first = reasons[0].split(":", 1)[0] if reasons else None
        return f"INVALID ({first})" if first else ("INVALID" if record.validity else "no validity verdict")
    if record.median_ms is None or record.median_ms <= 0:
        return "no median"
    if spec.get("native"):
        return "timed by a native tool"
    if spec.get("cluster"):
        return "pinned to a CPU cluster"
    if spec.get("binarize") or ((record.provenance or {}).get("source") or {}).get("quantize"):
        return "binarized or quantized"
    if spec.get("options"):
        return "converter options"
    if spec.get("input_shapes"):
        return "another input shape"
    return None


def _graph_ops(record) -> list[str]:
    ops = ((record.provenance or {}).get("converter") or {}).get("ops") or []
    return [str(op) for op in ops]


def _runtime_ops(records) -> list[str]:
    for record in reversed(records):
        profile = (record.result or {}).get("profile") or {}
        if profile.get("available"):
            return sorted({str(op.get("type")) for op in profile.get("ops") or []})
    return []
