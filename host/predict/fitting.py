"""The regressors: one per kernel kind (log latency of a kernel measured alone), and how a
model's kernels add up to the model's latency.

A kind's regressor is a non-negative linear cost in its counts (a constant, MACs, also with
channels padded to register tiles, elements read and written, weights: compute and memory
traffic, roofline-like), which carries the trend beyond the collected range, corrected in log
space by gradient boosted trees on every feature (channels, kernel size, stride, resolution,
activation) once the kind has :data:`MIN_TREES` samples (nn-Meter uses random forests alone;
trees do not extrapolate). A kind with fewer than :data:`MIN_KIND` samples, or one never
collected, is predicted by the same pipeline fitted on every kernel with the kind as a
feature.

Where a kind's profiled kernels ran on more than one of the runtime's code paths (each with
:data:`MIN_PATH` samples: ONNX Runtime's blocked NCHWc convolutions and its plain ones), each
path gets a regressor of its own, and a :class:`PathRule` learned from the same kernels (a
shallow decision tree over their features and their channels' alignment) says which path a
kernel never measured takes.

A kernel measured alone pays the runtime's per-call cost and the copies of its own input and
output; inside a model those are paid once. So a model's latency is
``scale · Σ kernel − per_call · (n − 1) − per_element · (Σ kernel I/O − model I/O)``, the three
coefficients (≥ 0) fitted by non-negative least squares on relative error over the measured
models made of several kernels (blocks and whole models). A kernel measured alone also finds
its weights in a cache at every inference; in a model whose weights outgrow the caches a
large kernel reads them from memory (ResNet-18's 512-channel 3x3 convolutions at 4x4 take
twice their time alone in a 44 MB model), so a fourth term adds a cost per such weight, with
the cache sizes chosen out of sample (:func:`fit_composition`); the collection's stacks of
large convolutions (:mod:`aiot.host.predict.blocks`) are what it learns from on any device.

scikit-learn and SciPy are imported only here, inside the functions that fit.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace

from aiot.core.errors import MissingDependency
from aiot.host.predict import features
from aiot.host.predict.decompose import Decomposition, Kernel

MIN_KIND = 3  #: samples before a kind has its own regressor
#: samples of each of two code paths before a kind is split by path: a path's own regressor
#: of fewer did worse than the kind's (3 and 4 plain pools: 57-66 % out of fold)
MIN_PATH = 6
MIN_TREES = 12  #: samples before trees correct the linear part
PATH_DEPTH = 4  #: the depth of a :class:`PathRule`'s tree
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
    linear cost in a constant and :func:`~aiot.host.predict.features.counts`, which is
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
    """One kernel measured alone: its configuration, median latency (ms), and the runtime's
    code path its profile showed (``""`` where none did)."""

    kernel: Kernel
    ms: float
    path: str = ""


class PathRule:
    """Which code path the runtime takes for a kernel of one kind: a decision tree (depth
    :data:`PATH_DEPTH`) over :func:`features.path_vector`, fitted on the kind's profiled kernels.

    Attributes:
        paths: the paths it chooses among; agreement: the share of the kernels it was fitted
            on whose path it gives out of fold (None when not cross-validated).
    """

    def __init__(self, seed: int = 0):
        self.seed, self.tree, self.paths, self.agreement = seed, None, [], None

    def fit(self, kernels: list[Kernel], paths: list[str], cross_validate: bool = False) -> PathRule:
        from sklearn.tree import DecisionTreeClassifier

        self.paths = sorted(set(paths))
        rows = [features.path_vector(k) for k in kernels]
        self.tree = DecisionTreeClassifier(max_depth=PATH_DEPTH, min_samples_leaf=2,
                                           random_state=self.seed).fit(rows, paths)
        if cross_validate and len(kernels) >= FOLDS:
            from sklearn.model_selection import StratifiedKFold, cross_val_predict

            folds = StratifiedKFold(min(FOLDS, min(paths.count(p) for p in self.paths)),
                                    shuffle=True, random_state=self.seed)
            guessed = cross_val_predict(DecisionTreeClassifier(
                max_depth=PATH_DEPTH, min_samples_leaf=2, random_state=self.seed), rows, paths, cv=folds)
            self.agreement = sum(g == p for g, p in zip(guessed, paths)) / len(paths)
        return self

    def predict(self, kernel: Kernel) -> str:
        return str(self.tree.predict([features.path_vector(kernel)])[0])


@dataclass
class KernelRegressors:
    """Every kind's regressor (or every path's of a kind, keyed ``conv@blocked``), the pooled
    one, the path rules, and their cross-validated errors.

    Attributes:
        sigma: per key (and ``*`` for the pooled regressor), the root mean square of the
            out-of-fold log errors: a kernel's relative uncertainty.
        mape: per key, the out-of-fold mean absolute percentage error (what ``fit`` prints).
        counts: samples per key.
        paths: per kind split by code path, the rule that picks a kernel's path.
    """

    own: dict[str, KindModel] = field(default_factory=dict)
    pooled: KindModel | None = None
    sigma: dict[str, float] = field(default_factory=dict)
    mape: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    paths: dict[str, PathRule] = field(default_factory=dict)

    def key(self, kernel: Kernel) -> str:
        """The regressor a kernel is predicted by: its kind's, or its path's (``conv@blocked``)."""
        rule = self.paths.get(kernel.kind)
        return f"{kernel.kind}@{rule.predict(kernel)}" if rule else kernel.kind

    def predict(self, kernel: Kernel, key: str | None = None) -> tuple[float, float, bool]:
        """``(ms, sigma, own)``: a kernel's predicted latency alone, its log uncertainty, and
        whether its kind's (or path's) own regressor gave it (else the pooled one); ``key``:
        its :meth:`key`, where the caller has it already."""
        key = key or self.key(kernel)
        model = self.own.get(key)
        if model is not None:
            sigma = self.sigma.get(key, self.sigma.get("*", 0.0))
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
    found = KernelRegressors(paths=_path_rules(samples, seed, cross_validate))
    keys = [_sample_key(found, s) for s in samples]
    by_key: dict[str, list[KernelSample]] = {}
    for key, s in zip(keys, samples):
        by_key.setdefault(key, []).append(s)
    for key, group in sorted(by_key.items()):
        found.counts[key] = len(group)
        if len(group) < MIN_KIND:
            continue
        kernels, ms = [s.kernel for s in group], [s.ms for s in group]
        found.own[key] = KindModel(seed).fit(kernels, ms)
        if cross_validate:
            _errors(found, key, out_of_fold(kernels, ms, seed))
    kernels, ms = [s.kernel for s in samples], [s.ms for s in samples]
    found.pooled = KindModel(seed, pooled=True).fit(kernels, ms)
    if cross_validate:
        errors = out_of_fold(kernels, ms, seed, pooled=True)
        _errors(found, "*", errors)
        for key in by_key:  # a key on the pooled regressor: its own share of the errors
            if key not in found.own and errors:
                _errors(found, key, [e for e, k in zip(errors, keys) if k == key])
    return found


def _path_rules(samples: list[KernelSample], seed: int, cross_validate: bool) -> dict[str, PathRule]:
    """A :class:`PathRule` per kind whose profiled kernels took two paths or more, each at
    least :data:`MIN_PATH` times."""
    by_kind: dict[str, list[KernelSample]] = {}
    for s in samples:
        if s.path:
            by_kind.setdefault(s.kernel.kind, []).append(s)
    rules = {}
    for kind, group in sorted(by_kind.items()):
        paths = [s.path for s in group]
        if sum(paths.count(p) >= MIN_PATH for p in set(paths)) >= 2:
            rules[kind] = PathRule(seed).fit([s.kernel for s in group], paths, cross_validate)
    return rules


def _sample_key(found: KernelRegressors, sample: KernelSample) -> str:
    """The regressor a sample teaches: its path's where its kind is split (the path its profile
    showed, or the rule's where it showed none), else its kind's."""
    rule = found.paths.get(sample.kernel.kind)
    if rule is None:
        return sample.kernel.kind
    path = sample.path if sample.path in rule.paths else rule.predict(sample.kernel)
    return f"{sample.kernel.kind}@{path}"


def _errors(found: KernelRegressors, kind: str, errors: list[float]) -> None:
    if errors:
        found.sigma[kind] = math.sqrt(statistics.fmean(e * e for e in errors))
        found.mape[kind] = 100 * statistics.fmean(abs(math.exp(e) - 1) for e in errors)


@dataclass
class Composition:
    """How kernels measured alone add up to a model (see the module docstring).

    Attributes:
        scale, per_call_ms, per_element_ms: the three coefficients.
        per_cold_weight_ms: what a weight read from memory costs over one found in a cache:
            paid by every kernel of over ``cold_kernel_mib`` of weights in a model of over
            ``cold_model_mib`` (both None: no such term, the fit did better without it).
        sigma: the relative error of a model's prediction (leave-one-out over the models the
            coefficients were fitted on), or None when fewer than 2 were measured.
        models: how many measured models they were fitted on.
    """

    scale: float = 1.0
    per_call_ms: float = 0.0
    per_element_ms: float = 0.0
    sigma: float | None = None
    models: int = 0
    per_cold_weight_ms: float = 0.0
    cold_kernel_mib: float | None = None
    cold_model_mib: float | None = None

    def apply(self, total_ms: float, kernels: int, kernel_io: int, model_io: int,
              kernel_weights: tuple[int, ...] = ()) -> float:
        """A model's latency from its kernels' predicted sum (before any floor);
        ``kernel_weights``: each kernel's weights."""
        return (self.scale * total_ms - self.per_call_ms * (kernels - 1)
                - self.per_element_ms * (kernel_io - model_io)
                + self.per_cold_weight_ms * cold_weights(kernel_weights, self.cold_kernel_mib,
                                                         self.cold_model_mib))

    def to_dict(self) -> dict:
        return {"scale": self.scale, "per_call_ms": self.per_call_ms,
                "per_element_ms": self.per_element_ms, "sigma": self.sigma, "models": self.models,
                "per_cold_weight_ms": self.per_cold_weight_ms,
                "cold_kernel_mib": self.cold_kernel_mib, "cold_model_mib": self.cold_model_mib}


#: Where weights may stop staying cached between inferences (MiB of float32 weights): a
#: kernel's own (measured alone, its weights stayed in a cache this size) and a whole model's
#: (a model of more reads them from memory at every inference). The fit tries each pair, and
#: none, and keeps what predicts the models it left out best: no cache size is assumed.
COLD_KERNEL_MIB = (1.0, 2.0, 4.0, 8.0)
COLD_MODEL_MIB = (8.0, 16.0, 32.0, 64.0)


def cold_weights(kernel_weights: tuple[int, ...], kernel_mib: float | None,
                 model_mib: float | None) -> int:
    """The weights of a model read from memory at every inference: those of its kernels of over
    ``kernel_mib`` of them, where the model holds over ``model_mib`` (0 where either is None)."""
    if kernel_mib is None or model_mib is None or sum(kernel_weights) * 4 <= model_mib * 2**20:
        return 0
    return sum(w for w in kernel_weights if w * 4 > kernel_mib * 2**20)


@dataclass
class ModelRow:
    """A measured model of several kernels, as the composition reads it."""

    total_ms: float  # its kernels' predicted latencies alone, summed
    kernels: int
    kernel_io: int
    model_io: int
    ms: float  # measured median
    kernel_weights: tuple[int, ...] = ()  # each kernel's weights


def fit_composition(rows: list[ModelRow]) -> Composition:
    """The coefficients of :class:`Composition` from ``rows`` (weighted by 1/measured, so every
    model's relative error counts alike): all three from 3 models on, the per-call and
    per-element costs alone (scale 1) from 2, none under 2; the cold weights' term from 4
    models on, with the cache sizes (:data:`COLD_KERNEL_MIB`, :data:`COLD_MODEL_MIB`) chosen
    by leave-one-out error, by the one-standard-error rule: of the sizes whose error is within a
    standard error of the lowest, those that make the fewest weights cold (no term at all, the
    fewest). Many sizes predict the models measured about as well, and which is lowest is then
    chance: on 2026-12-06, with RegNetX held out, 1 and 8 MiB scored 0.099 against 0.102 for 8
    and 32 MiB (this machine's L3 is 32 MiB), and over-predicted RegNetX by 29 %."""
    if len(rows) < 2:
        return Composition(models=len(rows))
    candidates = [(_loo_errors(rows, None), None)]
    if len(rows) >= 4:
        candidates += [(_loo_errors(rows, sizes), sizes)
                       for sizes in ((k, m) for k in COLD_KERNEL_MIB for m in COLD_MODEL_MIB if m > k)
                       if any(cold_weights(r.kernel_weights, *sizes) for r in rows)]
    errors, sizes = _simplest_within_one_se(rows, candidates)
    fitted = _solve(rows, len(rows) >= 3, sizes)
    return replace(fitted, sigma=_rms(errors), models=len(rows))


def _simplest_within_one_se(rows: list[ModelRow], candidates: list[tuple[list[float], tuple | None]]):
    """Of ``candidates`` (leave-one-out errors, cache sizes), the one making the fewest weights
    of ``rows`` cold among those whose mean squared error is within one standard error of the
    lowest."""
    scored = [(statistics.fmean(e * e for e in errors), errors, sizes)
              for errors, sizes in candidates]
    lowest, lowest_errors, _ = min(scored, key=lambda c: c[0])
    squares = [e * e for e in lowest_errors]
    se = statistics.stdev(squares) / math.sqrt(len(squares)) if len(squares) > 1 else 0.0

    def cold(sizes) -> int:
        return 0 if sizes is None else sum(cold_weights(r.kernel_weights, *sizes) for r in rows)

    near = (c for c in scored if c[0] <= lowest + se)
    _, errors, sizes = min(near, key=lambda c: (cold(c[2]), c[0]))
    return errors, sizes


def _loo_errors(rows: list[ModelRow], sizes: tuple[float, float] | None) -> list[float]:
    """Each row's relative error by coefficients fitted without it (from 3 rows; with 2, the
    errors of the fit itself)."""
    if len(rows) < 3:
        fitted = _solve(rows, False, sizes)
        return [_predicted(fitted, r) / r.ms - 1 for r in rows]
    errors = []
    for i in range(len(rows)):  # leave one out: the error a model unseen by the fit gets
        left = rows[:i] + rows[i + 1:]
        errors.append(_predicted(_solve(left, len(left) >= 3, sizes), rows[i]) / rows[i].ms - 1)
    return errors


def _rms(errors: list[float]) -> float:
    return math.sqrt(statistics.fmean(e * e for e in errors))


def _solve(rows: list[ModelRow], with_scale: bool, sizes: tuple[float, float] | None) -> Composition:
    """The coefficients fitted on ``rows``: non-negative least squares of relative errors
    (the scale fixed at 1 without ``with_scale``; the cold weights' term with ``sizes``)."""
    from scipy.optimize import nnls

    def columns(r: ModelRow) -> list[float]:
        found = [-(r.kernels - 1) / r.ms, -(r.kernel_io - r.model_io) / r.ms]
        if sizes is not None:  # in millions of weights, so the columns are of like sizes
            found.append(cold_weights(r.kernel_weights, *sizes) / 1e6 / r.ms)
        return ([r.total_ms / r.ms] if with_scale else []) + found

    matrix = [columns(r) for r in rows]
    # without a scale, what is left of each model is the other terms' to explain
    target = [1.0 if with_scale else 1.0 - r.total_ms / r.ms for r in rows]
    values = [float(v) for v in nnls(_array(matrix), _array(target))[0]]
    scale = values.pop(0) if with_scale else 1.0
    cold = values.pop() / 1e6 if sizes is not None else 0.0
    return Composition(scale, values[0], values[1], per_cold_weight_ms=cold,
                       cold_kernel_mib=sizes[0] if sizes else None,
                       cold_model_mib=sizes[1] if sizes else None)


def _array(values):
    import numpy

    return numpy.asarray(values, dtype=float)


def _predicted(composition: Composition, row: ModelRow) -> float:
    value = composition.apply(row.total_ms, row.kernels, row.kernel_io, row.model_io,
                              row.kernel_weights)
    return max(value, FLOOR * composition.scale * row.total_ms)
