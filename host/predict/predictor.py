"""A fitted predictor for one (device, format, threads): fitting it, storing it, asking it.

The stored file (``<results>/predict/<device>-<format>-<threads>t.json``, beside the store it
learned from) holds what was learned from (every kernel sample with its record ids, the ids of
the models the composition was fitted on, what was left out and why) and the fitted numbers
(the composition's coefficients, each kind's cross-validated error). Loading fits the kernel
regressors again from those samples, deterministically (fixed seeds): a predictor is plain
JSON that anyone can read, and no pickle from a results folder is ever loaded.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import aiot
from aiot.core.errors import UsageError
from aiot.core.fileio import write_text_atomic
from aiot.host.predict import features, fitting
from aiot.host.predict.decompose import Decomposition, Kernel
from aiot.host.predict.training import TrainingSet
from aiot.host.store.provenance import host_info
from aiot.host.store.store import utc_now

VERSION = 1
#: The interval's half-width in standard deviations (about 95 % for normal log errors).
Z = 1.96
#: Kernels named one by one in a prediction's warnings; the rest are counted.
SHOWN_WARNINGS = 5


@dataclass
class KernelLine:
    """One kernel of a prediction: its predicted latency alone, and whether it is covered."""

    kernel: Kernel
    ms: float
    own: bool  # its kind's own regressor (else the pooled one)
    outside: str | None  # why it lies outside what was collected, or None
    path: str = ""  # the runtime's code path the predictor expects it on, where kinds are split

    def to_dict(self) -> dict:
        return {"label": self.kernel.label, "kernel": self.kernel.describe(), "kind": self.kernel.kind,
                "ms": self.ms, "regressor": "own" if self.own else "pooled", "path": self.path or None,
                "outside": self.outside}


@dataclass
class Prediction:
    """A model's predicted median latency on a target, with its interval and its kernels."""

    model: str
    device: str
    format: str
    threads: int
    ms: float
    low_ms: float
    high_ms: float
    kernels: list[KernelLine]
    warnings: list[str]
    predictor: dict  # which predictor: file, fitted_at, runs learned from

    def to_dict(self) -> dict:
        return {"model": self.model, "device": self.device, "format": self.format,
                "threads": self.threads, "predicted_ms": self.ms, "low_ms": self.low_ms,
                "high_ms": self.high_ms, "interval": "95 %", "kernels": [k.to_dict() for k in self.kernels],
                "warnings": self.warnings, "predictor": self.predictor}


@dataclass
class Predictor:
    """Kernel regressors and their composition for one target (see the module docstring)."""

    device: str
    format: str
    threads: int
    samples: list[fitting.KernelSample]
    regressors: fitting.KernelRegressors
    composition: fitting.Composition
    coverage: dict
    fusion: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    seed: int = 0

    # -- asking it ---------------------------------------------------------------------------

    def predict(self, model: str, decomposition: Decomposition) -> Prediction:
        """The predicted median of ``model`` (its kernels: ``decomposition``) on this target."""
        lines, by_kind = [], Counter()
        sigma_ms: dict[str, float] = {}
        for kernel in decomposition.kernels:
            key = self.regressors.key(kernel)  # the path rule's tree, asked once per kernel
            ms, sigma, own = self.regressors.predict(kernel, key)
            lines.append(KernelLine(kernel, ms, own, features.outside(kernel, self.coverage),
                                    key.partition("@")[2]))
            by_kind[kernel.kind] += 1
            # one kind's errors move together (one regressor), kinds apart independently
            sigma_ms[kernel.kind] = sigma_ms.get(kernel.kind, 0.0) + ms * sigma
        total = sum(line.ms for line in lines)
        comp = self.composition
        value = comp.apply(total, len(lines), sum(k.io_elems for k in decomposition.kernels),
                           decomposition.io_elems, tuple(k.params for k in decomposition.kernels))
        warnings = self._warnings(lines, by_kind)
        floor = fitting.FLOOR * comp.scale * total
        if value < floor:
            warnings.append(f"the fitted overheads leave less than {fitting.FLOOR:.0%} of the "
                            "kernels' sum: the prediction is floored there (collect whole models "
                            "more like this one)")
            value = floor
        spread = math.sqrt(sum(s * s for s in sigma_ms.values())) / total if total else 0.0
        spread = math.sqrt(spread ** 2 + (comp.sigma or 0.0) ** 2)
        return Prediction(model, self.device, self.format, self.threads, value,
                          value * math.exp(-Z * spread), value * math.exp(Z * spread), lines,
                          warnings, self.identity())

    def _warnings(self, lines: list[KernelLine], by_kind: Counter) -> list[str]:
        out = []
        never = sorted(kind for kind in by_kind if kind not in self.coverage)
        if never:
            out.append("never collected, predicted by the pooled regressor: " + ", ".join(
                f"{kind} ({by_kind[kind]} kernel(s))" for kind in never))
        outside = [line for line in lines if line.outside and line.kernel.kind in self.coverage]
        for line in outside[:SHOWN_WARNINGS]:
            out.append(f"outside what was collected: {line.kernel.label} "
                       f"({line.kernel.describe()}): {line.outside}")
        if len(outside) > SHOWN_WARNINGS:
            out.append(f"and {len(outside) - SHOWN_WARNINGS} more kernel(s) outside what was collected")
        if self.composition.models < 2:
            out.append("no whole models were measured: the runtime's per-call overhead is not "
                       "taken out of the kernels' sum (collect some models)")
        if self.provenance.get("emulated"):
            out.append(f"learned from {self.provenance['emulated']} run(s) on an emulated device: "
                       "its times are this host's, not timings of a phone or a board")
        return out

    def identity(self) -> dict:
        """What a prediction record keeps about the predictor that made it."""
        return {"file": predictor_path_name(self.device, self.format, self.threads),
                "fitted_at": self.provenance.get("fitted_at"), "runs": self.provenance.get("runs"),
                "kernel_samples": len(self.samples), "models": self.composition.models}

    # -- storing it --------------------------------------------------------------------------

    def to_dict(self) -> dict:
        regs = self.regressors
        return {"version": VERSION, "device": self.device, "format": self.format,
                "threads": self.threads, "seed": self.seed, "provenance": self.provenance,
                "composition": self.composition.to_dict(),
                "cross_validation": {"sigma": regs.sigma, "mape": regs.mape, "counts": regs.counts,
                                     "path_agreement": {k: r.agreement for k, r in regs.paths.items()}},
                "coverage": self.coverage, "fusion": self.fusion,
                "samples": [{"kernel": s.kernel.to_dict(), "ms": s.ms, "path": s.path}
                            for s in self.samples]}

    @classmethod
    def from_dict(cls, data: dict) -> Predictor:
        """A stored predictor, its regressors fitted again from its samples."""
        if data.get("version") != VERSION:
            raise UsageError(f"the predictor file is of version {data.get('version')}, this aiot "
                             f"reads {VERSION}", "fit it again: aiot predict fit")
        samples = [fitting.KernelSample(Kernel.from_dict(s["kernel"]), float(s["ms"]),
                                        str(s.get("path") or "")) for s in data["samples"]]
        regs = fitting.fit_kernels(samples, data.get("seed", 0), cross_validate=False)
        stored = data.get("cross_validation") or {}
        regs.sigma, regs.mape = dict(stored.get("sigma") or {}), dict(stored.get("mape") or {})
        for kind, agreement in (stored.get("path_agreement") or {}).items():
            if kind in regs.paths:
                regs.paths[kind].agreement = agreement
        comp = data.get("composition") or {}
        return cls(data["device"], data["format"], int(data["threads"]), samples, regs,
                   fitting.Composition(**comp), data.get("coverage") or {}, data.get("fusion") or {},
                   data.get("provenance") or {}, data.get("seed", 0))

    def save(self, results_dir: Path) -> Path:
        path = predictor_path(results_dir, self.device, self.format, self.threads)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(self.to_dict(), indent=1) + "\n")
        return path


def fit_predictor(training: TrainingSet, seed: int = 0, cross_validate: bool = True,
                  regressors: fitting.KernelRegressors | None = None) -> Predictor:
    """A predictor of ``training`` (``regressors``: kernel regressors fitted already on the
    same kernel samples, which held-out evaluation reuses).

    Raises:
        UsageError: no kernel among the samples (nothing collected yet).
    """
    kernels = training.kernels
    if not kernels:
        raise UsageError(f"no VALID kernel runs for {training.device} · {training.format} · "
                         f"{training.threads} thread(s) in the store",
                         f"collect them: aiot predict collect -d {training.device} -f "
                         f"{training.format} --threads {training.threads}")
    samples = kernel_samples(training)
    regs = regressors or fitting.fit_kernels(samples, seed, cross_validate)
    rows = [fitting.ModelRow(regs.total(s.decomposition), len(s.decomposition.kernels),
                             sum(k.io_elems for k in s.decomposition.kernels),
                             s.decomposition.io_elems, s.ms,
                             tuple(k.params for k in s.decomposition.kernels)) for s in training.models]
    return Predictor(training.device, training.format, training.threads, samples, regs,
                     fitting.fit_composition(rows), features.coverage([s.kernel for s in samples]),
                     _fusion(training), _provenance(training, seed), seed)


def kernel_samples(training: TrainingSet) -> list[fitting.KernelSample]:
    """The kernels ``training`` measured alone, as the regressors learn them."""
    return [fitting.KernelSample(s.decomposition.kernels[0], s.ms, s.path) for s in training.kernels]


def _fusion(training: TrainingSet) -> dict:
    """Per kernel pattern (``conv+bn+relu``, ``gconv@plain+bn+relu`` where profiles showed a
    code path), the operators its artifact holds and those its profile timed, as the runtime
    showed them for the collected kernels (the commonest)."""
    seen: dict[str, Counter] = {}
    for sample in training.kernels:
        kernel = sample.decomposition.kernels[0]
        head = f"{kernel.kind}@{sample.path}" if sample.path else kernel.kind
        pattern = "+".join([head, *(["bn"] if kernel.bn and kernel.kind != "bn" else []),
                            *([kernel.act] if kernel.act != "none" else [])])
        seen.setdefault(pattern, Counter())[(tuple(sample.graph_ops), tuple(sample.runtime_ops))] += 1
    return {pattern: {"graph": list(top[0]), "runtime": list(top[1])}
            for pattern, counts in sorted(seen.items()) for top in [counts.most_common(1)[0][0]]}


def _provenance(training: TrainingSet, seed: int) -> dict:
    import sklearn

    return {"fitted_at": utc_now(), "aiot_version": aiot.__version__,
            "sklearn_version": sklearn.__version__, "host": host_info(), "seed": seed,
            "runs": training.runs, "kernel_samples": len(training.kernels),
            "model_samples": [{"model": s.model, "family": s.family, "ms": s.ms, "records": s.records}
                              for s in training.models],
            "kernel_records": [r for s in training.kernels for r in s.records],
            "left_out": dict(training.left_out), "relaxed": dict(training.relaxed),
            "emulated": training.emulated}


def predictor_path_name(device: str, fmt: str, threads: int) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", device)
    return f"{safe}-{fmt}-{threads}t.json"


def predictor_path(results_dir: Path, device: str, fmt: str, threads: int) -> Path:
    """Where the predictor of a target is kept: beside the store it learned from."""
    return Path(results_dir) / "predict" / predictor_path_name(device, fmt, threads)


def load_predictor(results_dir: Path, device: str, fmt: str, threads: int) -> Predictor:
    """The stored predictor of a target.

    Raises:
        UsageError: none fitted yet, or a file that does not read.
    """
    path = predictor_path(results_dir, device, fmt, threads)
    if not path.is_file():
        raise UsageError(f"no predictor for {device} · {fmt} · {threads} thread(s) yet",
                         f"fit one: aiot predict fit -d {device} -f {fmt} --threads {threads} "
                         "(after aiot predict collect with the same options)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Predictor.from_dict(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"the predictor file {path.name} does not read ({type(exc).__name__})",
                         "fit it again: aiot predict fit") from None
