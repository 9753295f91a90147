"""What a measurement is, as values: a run's request and timing knobs, a sweep's expansion into
requests, and the listener that hears a run's progress.

Nothing here touches a device or the store: sessions are :mod:`aiot.host.engine.workspace`'s,
one run is :mod:`aiot.host.engine.executor`'s, a sweep is :mod:`aiot.host.engine.campaign`'s.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from pathlib import Path
from typing import Protocol

from aiot.core.errors import UsageError
from aiot.device_agent.spec import RunSpec
from aiot.host.store import identity
from aiot.host.store.store import RunRecord

RUN_SLACK_S = 300.0  # loading a big model and an accuracy pass on a slow phone fit in this
MAX_RUNS = 10_000_000  # iteration counts above this are typos (and overflow the store's integers)
_AGENT_DEFAULTS = {spec_field.name: spec_field.default for spec_field in fields(RunSpec)}


@dataclass(frozen=True)
class MeasureParams:
    """Timing knobs, TFLite ``benchmark_model`` semantics (see the device agent)."""

    # The timing defaults are the agent's own (one definition: device_agent/spec.py).
    warmup_runs: int = _AGENT_DEFAULTS["warmup_runs"]
    warmup_min_s: float = _AGENT_DEFAULTS["warmup_min_s"]
    min_runs: int = _AGENT_DEFAULTS["min_runs"]
    min_s: float = _AGENT_DEFAULTS["min_s"]
    max_s: float = _AGENT_DEFAULTS["max_s"]
    seed: int = _AGENT_DEFAULTS["seed"]
    timeout_s: float | None = None  # None: max_s + warm-up + RUN_SLACK_S for load and accuracy
    target_cv: float | None = None  # repeat until the robust CV is at most this (None: off)
    max_runs: int | None = None  # cap on timed iterations (with target_cv: the give-up point)
    memory: bool = False  # a separate pass, in a fresh agent process, for peak memory
    profile: bool = False  # a separate pass with the runtime's profiler: per-operator time

    def run_timeout(self) -> float:
        """Seconds after which a run's agent is killed and the run recorded as failed."""
        return self.timeout_s or self.max_s + self.warmup_min_s + RUN_SLACK_S

    def validate(self) -> MeasureParams:
        seconds = {"--warmup-min-s": self.warmup_min_s, "--min-s": self.min_s, "--max-s": self.max_s,
                   "--timeout": self.timeout_s}
        for option, value in seconds.items():
            # nan slips through every comparison below and inf never ends a run: refuse both.
            if value is not None and not math.isfinite(value):
                raise UsageError(f"{option} must be a finite number of seconds, got {value}",
                                 f"e.g. {option} 30")
        counts = {"--warmup-runs": self.warmup_runs, "--min-runs": self.min_runs, "--max-runs": self.max_runs}
        for option, value in counts.items():
            if value is not None and value > MAX_RUNS:
                raise UsageError(f"{option} {value} is more than {MAX_RUNS:,} iterations",
                                 "use --max-s to bound a run by time")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise UsageError("--timeout must be > 0 seconds")
        if self.min_runs < 1 or self.warmup_runs < 0:
            raise UsageError("--min-runs must be ≥ 1 and --warmup-runs ≥ 0")
        if min(self.warmup_min_s, self.min_s, self.max_s) < 0 or self.max_s < self.min_s:
            raise UsageError("times must be ≥ 0 and --max-s must be ≥ --min-s")
        if self.target_cv is not None and not 0 < self.target_cv < 1:
            raise UsageError(f"--target-cv must be between 0 and 1 (0.02 = 2 %), got {self.target_cv}")
        if self.max_runs is not None and self.max_runs < self.min_runs:
            raise UsageError(f"--max-runs ({self.max_runs}) must be ≥ --min-runs ({self.min_runs})")
        return self


@dataclass(frozen=True)
class RunRequest:
    """One measurement: a model in one format on one device at one thread count."""

    device: str
    model: str
    format: str
    threads: int
    weights: Path | None = None
    dataset: str | None = None
    dataset_limit: int | None = None
    params: MeasureParams = field(default_factory=MeasureParams)
    native: str | None = None  # a native benchmark tool instead of the agent
    binary: Path | None = None  # its local file; else the device's inventory entry
    delegate: str | None = None  # native runs only (NNAPI/GPU are not in Python runtimes)
    binarize: str | None = None  # a BiBench algorithm the model was binarized with
    cluster: str | None = None  # pin to this CPU cluster (prime/big/little/all) of the device
    # A user's file (artifact, .pt2 or .py) named by --model: ``model`` is then its file name
    # (or ``file.py:factory``), ``model_sha256`` its content. The host path is never recorded.
    model_path: Path | None = None
    model_sha256: str | None = None
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] | None = None  # --input-shape
    # Inputs whose free batch dim aiot set to 1 (aiot.host.engine.input_shapes): provenance, not spec.
    batch_defaulted: tuple[str, ...] | None = None
    inputs: Path | None = None  # --inputs FILE.npz (recorded by name and hash)
    # --input-value: sorted (input name, number) pairs filling those inputs; None: made up.
    input_values: tuple[tuple[str, int | float], ...] | None = None
    inputs_sha256: str | None = None
    # Converter options (``--opt quant=int8``), sorted ``(key, value)`` pairs so the request
    # stays hashable; None: the format's defaults.
    options: tuple[tuple[str, str], ...] | None = None
    # Where ``weights`` came from (aiot.host.engine.weights: given, trained, packaged, random, own):
    # provenance, not part of the spec (the weights themselves are).
    weights_origin: str | None = None
    # How the agent is started on an Android device: "shell" (adb shell) or "app" (through the
    # aiot app's Instrumentation, in an app's process context). Part of the spec: the two are
    # different runs.
    via: str = "shell"
    # The model as preflight resolved it (:class:`~aiot.models.model_ref.ModelRef`), handed to
    # the converter so that no run resolves its name again; not part of the spec or the
    # request's identity (``model``, ``model_sha256`` and ``binarize`` are). None: resolve
    # :meth:`reference` (a request built by API, a lab node's).
    model_ref: object | None = field(default=None, compare=False, repr=False)

    @cached_property
    def key(self) -> str:
        """The campaign's resume key (:func:`aiot.host.store.identity.request_key`), computed
        once per request (a frozen request's spec never changes)."""
        return identity.request_key(self.to_spec())

    def label(self) -> str:
        """The run's label, as every table names its records (:mod:`aiot.host.store.identity`)."""
        return self._label

    @cached_property
    def _label(self) -> str:  # a progress bar asks for it at every stage
        return identity.label(self)

    def to_spec(self) -> dict:
        spec = asdict(self)
        spec["weights"] = str(self.weights) if self.weights else None
        spec["binary"] = str(self.binary) if self.binary else None
        spec.pop("model_path")  # a host path: the file's name and hash identify the model
        spec["inputs"] = self.inputs.name if self.inputs else None
        spec["input_shapes"] = self.shapes()
        spec["options"] = self.option_dict() or None
        spec["input_values"] = dict(self.input_values) if self.input_values else None
        spec.pop("weights_origin")
        spec.pop("model_ref")
        spec.pop("batch_defaulted")
        if spec["via"] == "shell":  # the default: shell runs keep the specs (and keys) they had
            spec.pop("via")
        if not spec["params"]["profile"]:  # likewise: a run without --profile keeps its key
            spec["params"].pop("profile")
        for key in ("model_sha256", "input_shapes", "inputs", "inputs_sha256", "options",
                    "input_values"):
            if spec[key] is None:  # keep the specs (and run keys) of zoo runs as they were
                spec.pop(key)
        return spec

    def resolved(self):
        """This run's model as a :class:`~aiot.models.model_ref.ModelRef` the converter takes:
        the one preflight resolved, else :meth:`reference` (resolved by the converter)."""
        ref = self.model_ref
        if ref is not None and ref.binarize == self.binarize:
            return ref
        return self.reference()

    def reference(self) -> str:
        """What resolves to this run's model again (:func:`aiot.models.model_ref.resolve_model`)."""
        if self.model_path is None:
            return self.model
        if self.model_path.suffix == ".py":  # file.py:factory
            return f"{self.model_path}:{self.model.rpartition(':')[2]}"
        return str(self.model_path)

    def option_dict(self) -> dict[str, str]:
        """``--opt`` as a dict (empty: the format's defaults)."""
        return dict(self.options or ())

    def shapes(self) -> dict[str, list[int]] | None:
        """``--input-shape`` as ``{input name: dims}``, or None."""
        return {name: list(dims) for name, dims in self.input_shapes} if self.input_shapes else None


class RunListener(Protocol):
    """Receives progress; the CLI draws Rich progress from it, tests record it.

    A campaign calls it from one thread per device, so implementations must be thread-safe.
    """

    def on_run_start(self, request: RunRequest, index: int, total: int) -> None: ...
    def on_stage(self, request: RunRequest, stage: str) -> None: ...
    def on_progress(self, request: RunRequest, phase: str, done: int, total: int) -> None: ...
    def on_run_end(self, record: RunRecord) -> None: ...


class NullListener:
    """A listener that ignores everything."""

    def on_run_start(self, request, index, total) -> None: ...
    def on_stage(self, request, stage) -> None: ...
    def on_progress(self, request, phase, done, total) -> None: ...
    def on_run_end(self, record) -> None: ...


def expand_sweep(devices: list[str], models: list[str], formats: list[str], threads: list[int],
                 delegates: list[str | None] | None = None, clusters: list[str | None] | None = None,
                 **common) -> list[RunRequest]:
    """Every combination, grouped by device, then model, format, delegate and cluster,
    threads innermost."""
    if not (devices and models and formats and threads):
        raise UsageError("a sweep needs at least one device, model, format and thread count")
    if any(t < 1 for t in threads):
        raise UsageError("thread counts must be ≥ 1")
    return [RunRequest(d, m, f, t, delegate=g, cluster=c, **common)
            for d, m, f, g, c, t in itertools.product(devices, models, formats, delegates or [None],
                                                      clusters or [None], threads)]


def expand_targets(devices: list[str], targets: list[tuple[object, list[str]]], threads: list[int],
                   delegates: list[str | None] | None = None,
                   clusters: list[str | None] | None = None, **common) -> list[RunRequest]:
    """Like :func:`expand_sweep` for resolved model references, each with its own formats.

    Args:
        targets: ``(ModelRef, formats)`` pairs: a user's artifact has its one format, a
            model that converts has the formats asked for (or its default).
    """
    if not (devices and targets and threads):
        raise UsageError("a sweep needs at least one device, model, format and thread count")
    requests = []
    for device in devices:
        for ref, formats in targets:
            user_file = {"model_path": ref.path, "model_sha256": ref.sha256} if ref.path else {}
            binarize = ref.binarize or common.get("binarize")
            for fmt, delegate, cluster, t in itertools.product(formats, delegates or [None],
                                                               clusters or [None], threads):
                # a quantized model runs under its label (tiny_cnn_lsq8), which resolves again
                requests.append(RunRequest(device, ref.label() if ref.quantize else ref.name, fmt, t, delegate=delegate,
                                           cluster=cluster, **{**common, "binarize": binarize},
                                           model_ref=ref, **user_file))
    return list(dict.fromkeys(requests))  # "a,a" or "1,1" measure once
