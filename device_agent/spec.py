"""The run spec: what the host asks of one agent command, defined once for host and agent.

The host builds a :class:`RunSpec` and sends :meth:`RunSpec.to_wire` (a JSON object: the
spec file of a one-shot command, or a session request's ``spec``); the agent reads it back
with :meth:`RunSpec.from_wire`, which fills in the defaults and checks every field, and each
command reads the typed fields. Standard library only and Python 3.8 syntax: it runs on the
device too.

Wire format, run spec version 1: ``v`` and one key per field. ``input_shapes``, ``inputs``
and the keys of single commands (``outputs``, ``runs``, ``profile_runs``,
``profile_warmup``) go on the wire only when set, as the host always sent them; keys the
agent does not know are ignored, so a newer host's additions never break an older agent.
Adding a field with a default is an addition (no version change); changing what a key
means is not.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, fields

from . import backends
from .signature import SpecError, validate_overrides

RUN_SPEC_VERSION = 1
#: Keys left off the wire while they are None (see the module docstring).
SENT_WHEN_SET = ("input_shapes", "input_values", "input_ranges", "inputs", "outputs", "runs",
                 "profile_runs", "profile_warmup")


@dataclass(frozen=True)
class RunSpec:
    """One command's spec. The timing fields follow TFLite ``benchmark_model`` (see
    ``agent.py``); ``None`` means "off" or "the command's own default" as each field says."""

    backend: str  #: a name in ``backends.MODULES``
    artifact: str  #: the model file's path on the device
    threads: int = 1
    warmup_runs: int = 1
    warmup_min_s: float = 0.5
    min_runs: int = 50
    min_s: float = 1.0
    max_s: float = 150.0
    seed: int = 0  #: generated inputs' seed
    dataset: dict | None = None  #: a pushed accuracy shard, ``{"x": .npy, "y": .npy}``
    target_cv: float | None = None  #: None: no repeat-until-stable; else until robust CV <= it
    max_runs: int | None = None  #: None: no cap on timed iterations (``max_s`` still applies)
    cpus: list[int] | None = None  #: None: no pinning; else the CPUs this process may run on
    input_shapes: dict | None = None  #: None: the model's own shapes; else {input name: dims}
    #: None: every input generated; else {input name: number} filling those inputs instead
    input_values: dict | None = None
    #: None: made-up integer inputs drawn from ``MADE_UP_INTS``; else {input name: {"range":
    #: [low, high], "range_from": why}}, the range the model takes (an embedding's size)
    input_ranges: dict | None = None
    #: None: generated inputs; else a pushed .npz, one array per input name (``predict``: the
    #: batch file, a .npy or a .npz of batches)
    inputs: str | None = None
    outputs: str | None = None  #: ``predict``: where the outputs go
    runs: int | None = None  #: ``memory``: inferences after loading (None: ``MEMORY_RUNS``)
    profile_runs: int | None = None  #: ``profile``: profiled inferences (None: its default)
    profile_warmup: int | None = None  #: ``profile``: inferences before (None: its default)

    def to_wire(self) -> dict:
        """The JSON object sent to the agent (``v`` and the fields; see the module docstring)."""
        wire: dict = {"v": RUN_SPEC_VERSION}
        for field in fields(self):
            value = getattr(self, field.name)
            if value is not None or field.name not in SENT_WHEN_SET:
                wire[field.name] = value
        return wire

    @classmethod
    def from_wire(cls, raw) -> RunSpec:
        """The spec in ``raw`` (a decoded JSON object), defaults filled in and every field
        checked; unknown keys are ignored.

        Raises:
            SpecError: naming the first field that is wrong.
        """
        if not isinstance(raw, dict):
            raise SpecError("a spec must be a JSON object")
        if raw.get("v") != RUN_SPEC_VERSION:
            raise SpecError(f"run spec version {raw.get('v')!r}, agent expects {RUN_SPEC_VERSION}")
        spec = {f.name: f.default for f in fields(cls) if f.default is not MISSING}
        spec.update((key, value) for key, value in raw.items() if key in cls._names())
        _check(spec)
        return cls(**spec)

    @classmethod
    def _names(cls) -> frozenset:
        return frozenset(f.name for f in fields(cls))


def _check(spec: dict) -> None:
    """Raise SpecError naming the first field of ``spec`` (defaults filled in) that is wrong."""
    for key in ("backend", "artifact"):
        if not isinstance(spec.get(key), str) or not spec[key]:
            raise SpecError(f"run spec needs a non-empty string '{key}'")
    if spec["backend"] not in backends.MODULES:
        raise SpecError(f"unknown backend {spec['backend']!r}; known: {sorted(backends.MODULES)}")
    for key in ("threads", "warmup_runs", "min_runs"):
        if not isinstance(spec[key], int) or spec[key] < (1 if key != "warmup_runs" else 0):
            raise SpecError(f"run spec field '{key}' must be a positive integer")
    for key in ("warmup_min_s", "min_s", "max_s"):
        if not isinstance(spec[key], (int, float)) or spec[key] < 0:
            raise SpecError(f"run spec field '{key}' must be a non-negative number")
    _check_stability(spec)
    _check_cpus(spec["cpus"])
    validate_overrides(spec["input_shapes"])
    _check_values(spec["input_values"])
    _check_ranges(spec["input_ranges"])
    if spec["inputs"] is not None and (not isinstance(spec["inputs"], str) or not spec["inputs"]):
        raise SpecError(f"run spec field 'inputs' must be the path of a .npz or null, "
                        f"got {spec['inputs']!r}")


def _check_values(values) -> None:
    if values is None:
        return
    ok = isinstance(values, dict) and all(
        isinstance(name, str) and name and isinstance(v, (int, float)) and not isinstance(v, bool)
        for name, v in values.items())
    if not ok:
        raise SpecError(f"run spec field 'input_values' must map input names to numbers "
                        f"(or be null), got {values!r}")


def _check_ranges(ranges) -> None:
    if ranges is None:
        return
    def fits(value) -> bool:
        bounds = value.get("range") if isinstance(value, dict) else None
        return (isinstance(bounds, list) and len(bounds) == 2
                and all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)
                and bounds[0] < bounds[1] and isinstance(value.get("range_from", ""), str))
    if not isinstance(ranges, dict) or not all(isinstance(k, str) and k and fits(v)
                                               for k, v in ranges.items()):
        raise SpecError("run spec field 'input_ranges' must map input names to "
                        f"{{'range': [low, high], 'range_from': text}} (or be null), got {ranges!r}")


def _check_cpus(cpus) -> None:
    if cpus is None:
        return
    if not isinstance(cpus, list) or not cpus or not all(
            isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus):
        raise SpecError(f"run spec field 'cpus' must be a non-empty list of CPU numbers, got {cpus!r}")


def _check_stability(spec: dict) -> None:
    """``target_cv`` and ``max_runs``: each null (off) or a sensible number."""
    target, cap = spec["target_cv"], spec["max_runs"]
    if target is not None and (isinstance(target, bool) or not isinstance(target, (int, float))
                               or not 0 < target < math.inf):
        raise SpecError(f"run spec field 'target_cv' must be a number > 0 (0.02 means 2 %) or "
                        f"null, got {target!r}")
    if cap is None:
        return
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise SpecError(f"run spec field 'max_runs' must be a positive integer or null, "
                        f"got {cap!r}")
    if cap < spec["min_runs"]:
        raise SpecError(f"run spec field 'max_runs' ({cap}) is below "
                        f"'min_runs' ({spec['min_runs']})")
