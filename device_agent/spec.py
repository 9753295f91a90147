"""The run spec the host sends with every command: its version, defaults and checks."""

from __future__ import annotations

import math

from . import backends
from .signature import SpecError, validate_overrides

RUN_SPEC_VERSION = 1
DEFAULTS = {
    "threads": 1,
    "warmup_runs": 1,
    "warmup_min_s": 0.5,
    "min_runs": 50,
    "min_s": 1.0,
    "max_s": 150.0,
    "seed": 0,
    "dataset": None,
    "target_cv": None,  # None: no repeat-until-stable; else keep going until robust CV <= it
    "max_runs": None,  # None: no cap on the number of timed iterations (max_s still applies)
    "cpus": None,  # None: no pinning; else the CPU numbers this process may run on
    "input_shapes": None,  # None: the model's own shapes; else {input name: dims} (dynamic dims)
    "inputs": None,  # None: generated inputs; else a pushed .npz, one array per input name
}


def validate_spec(raw: dict) -> dict:
    """Defaults filled in and every field checked; raises SpecError naming the field."""
    if raw.get("v") != RUN_SPEC_VERSION:
        raise SpecError(f"run spec version {raw.get('v')!r}, agent expects {RUN_SPEC_VERSION}")
    spec = {**DEFAULTS, **raw}
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
    _validate_stability(spec)
    _validate_cpus(spec["cpus"])
    validate_overrides(spec["input_shapes"])
    if spec["inputs"] is not None and (not isinstance(spec["inputs"], str) or not spec["inputs"]):
        raise SpecError(f"run spec field 'inputs' must be the path of a .npz or null, "
                        f"got {spec['inputs']!r}")
    return spec


def _validate_cpus(cpus) -> None:
    if cpus is None:
        return
    if not isinstance(cpus, list) or not cpus or not all(
            isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus):
        raise SpecError(f"run spec field 'cpus' must be a non-empty list of CPU numbers, got {cpus!r}")



def _validate_stability(spec: dict) -> None:
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
