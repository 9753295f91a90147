"""The regressors: one per kernel kind (log latency of a kernel measured alone), and how a
model's kernels add up to the model's latency.

A kind's regressor is a non-negative linear cost in its counts (a constant, MACs, elements
read and written, weights: compute and memory traffic, roofline-like), which carries the trend
beyond the collected range, corrected in log space by gradient boosted trees on every feature
(channels, kernel size, stride, resolution, activation) once the kind has :data:`MIN_TREES`
samples (nn-Meter uses random forests alone; trees do not extrapolate). A kind with fewer than
:data:`MIN_KIND` samples, or one never collected, is predicted by the same pipeline fitted on
every kernel with the kind as a feature.

A kernel measured alone pays the runtime's per-call cost and the copies of its own input and
output; inside a model those are paid once. So a model's latency is
``scale · Σ kernel − per_call · (n − 1) − per_element · (Σ kernel I/O − model I/O)``, the three
coefficients (≥ 0) fitted by non-negative least squares on relative error over the measured
models made of several kernels (blocks and whole models).

scikit-learn and SciPy are imported only here, inside the functions that fit.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from aiot.core.errors import MissingDependency
from aiot.host.predict import features
from aiot.host.predict.decompose import Decomposition, Kernel

MIN_KIND = 3  #: samples before a kind has its own regressor
MIN_TREES = 12  #: samples before trees correct the linear part
FOLDS = 5
#: A prediction below this share of its kernels' sum is floored there (and warned about).
FLOOR = 0.25


def require_sklearn():
    """scikit-learn, or the one-line error naming the extra that brings it."""
    try:
        import sklearn
    except ImportError:
        raise MissingDependency("scikit-learn", "predict") from None
    return sklearn


class KindModel:
    """A kind's latency (or every kind's, ``pooled``: the kind a feature too): a non-negative
    linear cost in the counts (a constant, MACs, elements read and written, weights), which is
    how a kernel's time grows and how far the trend is carried beyond the collected range,
    times a correction in log space by boosted trees over every feature (from
    :data:`MIN_TREES` samples)."""

    def __init__(self, seed: int = 0, pooled: bool = False):
        self.seed, self.pooled = seed, pooled
        self.cost: list[float] = []
        self.trees = None

    def fit(self, kernels: list[Kernel], ms: list[float]) -> KindModel:
        from scipy.optimize import nnls
        from sklearn.ensemble import GradientBoostingRegressor

        columns = [self._columns(k) for k in kernels]
        scale = [max(max(abs(c[j]) for c in columns), 1e-12) for j in range(len(columns[0]))]
        # Each row over its own latency: every kernel's relative error counts alike.
        matrix = _array([[c[j] / scale[j] / y for j in range(len(c))] for c, y in zip(columns, ms)])
        solution, _ = nnls(matrix, _array([1.0] * len(ms)))
        self.cost = [float(v) / scale[j] for j, v in enumerate(solution)]
        if len(kernels) >= MIN_TREES:
            left = [math.log(y) - b for y, b in zip(ms, self._base(kernels))]
            self.trees = GradientBoostingRegressor(
                n_estimators=200, max_depth=3, learning_rate=0.05, subsample=0.8,
                min_samples_leaf=2, random_state=self.seed).fit(self._rows(kernels), left)
        return self

    def _columns(self, kernel: Kernel) -> list[float]:
        counts = [1.0, *features.counts(kernel)]
        if not self.pooled:
            return counts
        return [float(kernel.kind == kind) for kind in features.COLLECTED_KINDS] + counts

    def _rows(self, kernels: list[Kernel]) -> list[list[float]]:
        return [features.pooled_vector(k) if self.pooled else features.vector(k) for k in kernels]

    def _base(self, kernels: list[Kernel]) -> list[float]:
        """log ms of the linear cost (a floor of 1 ns where every coefficient is zero)."""
        return [math.log(max(sum(w * c for w, c in zip(self.cost, self._columns(k))), 1e-6))
                for k in kernels]

    def predict(self, kernels: list[Kernel]) -> list[float]:
        """log ms of each kernel."""
        base = self._base(kernels)
        if self.trees is None:
            return base
        return [b + float(t) for b, t in zip(base, self.trees.predict(self._rows(kernels)))]


def out_of_fold(kernels: list[Kernel], ms: list[float], seed: int = 0, pooled: bool = False) -> list[float]:
    """Each sample's log error (predicted − measured) by a :class:`KindModel` fitted without it
    (``FOLDS``-fold, shuffled with ``seed``); empty under 3 samples."""
    from sklearn.model_selection import KFold

    if len(kernels) < 3:
        return []
    errors = [0.0] * len(kernels)
    for train, test in KFold(min(FOLDS, len(kernels)), shuffle=True, random_state=seed).split(kernels):
        model = KindModel(seed, pooled).fit([kernels[i] for i in train], [ms[i] for i in train])
        for i, p in zip(test, model.predict([kernels[i] for i in test])):
            errors[i] = p - math.log(ms[i])
    return errors


@dataclass
class KernelSample:
    """One kernel measured alone: its configuration and median latency (ms)."""

    kernel: Kernel
    ms: float


@dataclass
class KernelRegressors:
    """Every kind's regressor, the pooled one, and their cross-validated errors.

    Attributes:
        sigma: per kind (and ``*`` for the pooled regressor), the root mean square of the
            out-of-fold log errors: a kernel's relative uncertainty.
        mape: per kind, the out-of-fold mean absolute percentage error (what ``fit`` prints).
        counts: samples per kind.
    """

    own: dict[str, KindModel] = field(default_factory=dict)
    pooled: KindModel | None = None
    sigma: dict[str, float] = field(default_factory=dict)
    mape: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def predict(self, kernel: Kernel) -> tuple[float, float, bool]:
        """``(ms, sigma, own)``: a kernel's predicted latency alone, its log uncertainty, and
        whether its kind's own regressor gave it (else the pooled one)."""
        model = self.own.get(kernel.kind)
        if model is not None:
            sigma = self.sigma.get(kernel.kind, self.sigma.get("*", 0.0))
            return math.exp(model.predict([kernel])[0]), sigma, True
        return math.exp(self.pooled.predict([kernel])[0]), self.sigma.get("*", 0.0), False

    def total(self, decomposition: Decomposition) -> float:
        return sum(self.predict(k)[0] for k in decomposition.kernels)


def fit_kernels(samples: list[KernelSample], seed: int = 0, cross_validate: bool = True) -> KernelRegressors:
    """The regressors of ``samples`` (see the module docstring); ``cross_validate`` also
    measures their out-of-fold errors (the interval's width).

    Raises:
        MissingDependency: scikit-learn is not installed.
        ValueError: no samples.
    """
    require_sklearn()
    if not samples:
        raise ValueError("no kernel was measured")
    found = KernelRegressors()
    by_kind: dict[str, list[KernelSample]] = {}
    for s in samples:
        by_kind.setdefault(s.kernel.kind, []).append(s)
    for kind, group in sorted(by_kind.items()):
        found.counts[kind] = len(group)
        if len(group) < MIN_KIND:
            continue
        kernels, ms = [s.kernel for s in group], [s.ms for s in group]
        found.own[kind] = KindModel(seed).fit(kernels, ms)
        if cross_validate:
            _errors(found, kind, out_of_fold(kernels, ms, seed))
    kernels, ms = [s.kernel for s in samples], [s.ms for s in samples]
    found.pooled = KindModel(seed, pooled=True).fit(kernels, ms)
    if cross_validate:
        errors = out_of_fold(kernels, ms, seed, pooled=True)
        _errors(found, "*", errors)
        for kind in by_kind:  # a kind on the pooled regressor: its own share of the errors
            if kind not in found.own and errors:
                _errors(found, kind, [e for e, s in zip(errors, samples) if s.kernel.kind == kind])
    return found


def _errors(found: KernelRegressors, kind: str, errors: list[float]) -> None:
    if errors:
        found.sigma[kind] = math.sqrt(statistics.fmean(e * e for e in errors))
        found.mape[kind] = 100 * statistics.fmean(abs(math.exp(e) - 1) for e in errors)


@dataclass
class Composition:
    """How kernels measured alone add up to a model (see the module docstring).

    Attributes:
        scale, per_call_ms, per_element_ms: the three coefficients.
        sigma: the relative error of a model's prediction (leave-one-out over the models the
            coefficients were fitted on), or None when fewer than 2 were measured.
        models: how many measured models they were fitted on.
    """

    scale: float = 1.0
    per_call_ms: float = 0.0
    per_element_ms: float = 0.0
    sigma: float | None = None
    models: int = 0

    def apply(self, total_ms: float, kernels: int, kernel_io: int, model_io: int) -> float:
        """A model's latency from its kernels' predicted sum (before any floor)."""
        return (self.scale * total_ms - self.per_call_ms * (kernels - 1)
                - self.per_element_ms * (kernel_io - model_io))

    def to_dict(self) -> dict:
        return {"scale": self.scale, "per_call_ms": self.per_call_ms,
                "per_element_ms": self.per_element_ms, "sigma": self.sigma, "models": self.models}


@dataclass
class ModelRow:
    """A measured model of several kernels, as the composition reads it."""

    total_ms: float  # its kernels' predicted latencies alone, summed
    kernels: int
    kernel_io: int
    model_io: int
    ms: float  # measured median


def fit_composition(rows: list[ModelRow]) -> Composition:
    """The coefficients of :class:`Composition` from ``rows`` (weighted by 1/measured, so every
    model's relative error counts alike): all three from 3 models on, the per-call and
    per-element costs alone (scale 1) from 2, none under 2."""
    if len(rows) < 2:
        return Composition(models=len(rows))
    coefficients = _solve(rows, with_scale=len(rows) >= 3)
    errors = []
    if len(rows) >= 3:
        for i in range(len(rows)):  # leave one out: the error a model unseen by the fit gets
            left = rows[:i] + rows[i + 1:]
            fitted = _solve(left, with_scale=len(left) >= 3)
            errors.append(_predicted(fitted, rows[i]) / rows[i].ms - 1)
    else:
        errors = [_predicted(coefficients, r) / r.ms - 1 for r in rows]
    sigma = math.sqrt(statistics.fmean(e * e for e in errors))
    return Composition(*coefficients, sigma=sigma, models=len(rows))


def _solve(rows: list[ModelRow], with_scale: bool) -> tuple[float, float, float]:
    from scipy.optimize import nnls

    if with_scale:
        matrix = [[r.total_ms / r.ms, -(r.kernels - 1) / r.ms, -(r.kernel_io - r.model_io) / r.ms]
                  for r in rows]
        target = [1.0] * len(rows)
    else:  # scale fixed at 1: what is left of each model is the overheads' to explain
        matrix = [[-(r.kernels - 1) / r.ms, -(r.kernel_io - r.model_io) / r.ms] for r in rows]
        target = [1.0 - r.total_ms / r.ms for r in rows]
    solution, _residual = nnls(_array(matrix), _array(target))
    values = [float(v) for v in solution]
    return (values[0], values[1], values[2]) if with_scale else (1.0, values[0], values[1])


def _array(values):
    import numpy

    return numpy.asarray(values, dtype=float)


def _predicted(coefficients: tuple[float, float, float], row: ModelRow) -> float:
    composition = Composition(*coefficients)
    value = composition.apply(row.total_ms, row.kernels, row.kernel_io, row.model_io)
    return max(value, FLOOR * composition.scale * row.total_ms)
