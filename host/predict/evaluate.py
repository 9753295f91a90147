"""How well a target's predictor predicts models it never saw: whole families held out.

For each family of measured models (``resnet``, ``mobilenet``, ...: :func:`aiot.host.predict.
graphs.family`), a predictor is fitted on everything else (the collected kernels and the other
families' models) and predicts that family's models; their errors are pooled over all families.
The kernels themselves are never held out: they are what a predictor is built from, not
models to predict. Beside it, a FLOPs baseline (latency proportional to MACs plus a constant,
fitted on the same other families) shows what the kernels add: nn-Meter's FLOPs baseline reached
22 % within ±10 % where its kernels reached 99 %.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from aiot.host.predict import fitting
from aiot.host.predict.predictor import fit_predictor, kernel_samples
from aiot.host.predict.training import TrainingSet


@dataclass
class Outcome:
    """One held-out model: measured and predicted medians (ms)."""

    model: str
    family: str
    measured_ms: float
    predicted_ms: float
    low_ms: float
    high_ms: float
    baseline_ms: float | None
    warnings: int

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted_ms - self.measured_ms) / self.measured_ms

    def to_dict(self) -> dict:
        return {"model": self.model, "family": self.family, "measured_ms": self.measured_ms,
                "predicted_ms": self.predicted_ms, "low_ms": self.low_ms, "high_ms": self.high_ms,
                "error_pct": self.error_pct, "baseline_ms": self.baseline_ms, "warnings": self.warnings}


def metrics(pairs: list[tuple[float, float]]) -> dict:
    """RMSE (ms), MAPE (%) and the shares (%) within ±5 % and ±10 % of ``(predicted, measured)``."""
    if not pairs:
        return {"n": 0, "rmse_ms": None, "mape": None, "within_5": None, "within_10": None}
    errors = [abs(p - m) / m for p, m in pairs]
    return {"n": len(pairs), "rmse_ms": math.sqrt(statistics.fmean((p - m) ** 2 for p, m in pairs)),
            "mape": 100 * statistics.fmean(errors),
            "within_5": 100 * sum(e <= 0.05 for e in errors) / len(errors),
            "within_10": 100 * sum(e <= 0.10 for e in errors) / len(errors)}


@dataclass
class Evaluation:
    """Held-out outcomes of a target, by family and pooled."""

    device: str
    format: str
    threads: int
    outcomes: list[Outcome] = field(default_factory=list)
    kernels: int = 0  # kernel samples every fold learned from
    skipped: list[str] = field(default_factory=list)  # families not evaluated, and why

    def families(self) -> list[str]:
        return list(dict.fromkeys(o.family for o in self.outcomes))

    def of(self, family: str | None = None) -> dict:
        chosen = [o for o in self.outcomes if family is None or o.family == family]
        return metrics([(o.predicted_ms, o.measured_ms) for o in chosen])

    def baseline(self) -> dict:
        return metrics([(o.baseline_ms, o.measured_ms) for o in self.outcomes if o.baseline_ms])

    def to_dict(self) -> dict:
        return {"device": self.device, "format": self.format, "threads": self.threads,
                "kernels": self.kernels, "overall": self.of(), "baseline_flops": self.baseline(),
                "families": {f: self.of(f) for f in self.families()},
                "outcomes": [o.to_dict() for o in self.outcomes], "skipped": self.skipped}


def evaluate(training: TrainingSet, seed: int = 0) -> Evaluation:
    """Hold out each family of ``training``'s measured models in turn (see the module docstring).

    Raises:
        UsageError: no kernels collected for the target.
    """
    found = Evaluation(training.device, training.format, training.threads, kernels=len(training.kernels))
    families = sorted({s.family for s in training.models if s.family != "kernels"})
    if not families:
        found.skipped.append("no whole models measured on this target: collect some (aiot predict "
                             "collect --models ...)")
        return found
    shared = None  # the kernel regressors, fitted once: no family holds kernel samples of its own
    for name in families:
        train = training.without({name})
        same_kernels = len(train.kernels) == len(training.kernels)
        if same_kernels and shared is None:
            shared = fitting.fit_kernels(kernel_samples(training), seed)
        predictor = fit_predictor(train, seed, regressors=shared if same_kernels else None)
        baseline = _flops_baseline(train)
        for sample in (s for s in training.models if s.family == name):
            guess = predictor.predict(sample.model, sample.decomposition)
            found.outcomes.append(Outcome(sample.model, name, sample.ms, guess.ms, guess.low_ms,
                                          guess.high_ms, baseline(sample.decomposition.macs),
                                          len(guess.warnings)))
    return found


def _flops_baseline(train: TrainingSet):
    """``ms ≈ a + b·MACs`` (a, b ≥ 0, relative error) over ``train``'s models; None-giving when
    fewer than two were measured."""
    rows = [(s.decomposition.macs, s.ms) for s in train.models]
    if len(rows) < 2:
        return lambda macs: None
    from scipy.optimize import nnls

    import numpy

    matrix = numpy.asarray([[1.0 / ms, macs / ms] for macs, ms in rows])
    (a, b), _ = nnls(matrix, numpy.ones(len(rows)))
    return lambda macs: float(a + b * macs) or None
