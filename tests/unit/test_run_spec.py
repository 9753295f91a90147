"""The run spec is one typed definition (``device_agent/spec.py``) that the host writes and the
agent reads; its wire form keeps the keys the host always sent."""

import json

import pytest

from aiot.device_agent.signature import SpecError
from aiot.device_agent.spec import RUN_SPEC_VERSION, RunSpec
from aiot.host.engine.executor import _agent_spec
from aiot.host.engine.runs import MeasureParams, RunRequest

#: What the host sent for every run before the spec was typed (``input_shapes`` and
#: ``inputs`` only when asked).
ALWAYS_SENT = {"v", "backend", "artifact", "threads", "warmup_runs", "warmup_min_s", "min_runs",
               "min_s", "max_s", "seed", "dataset", "target_cv", "max_runs", "cpus"}


def test_defaults_fill_a_minimal_spec_and_survive_the_wire():
    spec = RunSpec.from_wire({"v": 1, "backend": "null", "artifact": "m.json"})
    assert spec == RunSpec("null", "m.json")
    assert (spec.threads, spec.warmup_runs, spec.warmup_min_s, spec.min_runs, spec.min_s,
            spec.max_s, spec.seed) == (1, 1, 0.5, 50, 1.0, 150.0, 0)
    assert set(spec.to_wire()) == ALWAYS_SENT and spec.to_wire()["v"] == RUN_SPEC_VERSION
    full = RunSpec("onnxruntime", "/d/m.onnx", threads=4, target_cv=0.02, max_runs=500,
                   cpus=[4, 5], input_shapes={"x": [1, 3]}, inputs="/d/x.npz", outputs="/d/y.npz",
                   runs=2, profile_runs=5, profile_warmup=0)
    wire = json.loads(json.dumps(full.to_wire()))  # as it travels
    assert RunSpec.from_wire(wire) == full
    assert set(wire) == ALWAYS_SENT | {"input_shapes", "inputs", "outputs", "runs", "profile_runs",
                                       "profile_warmup"}


def test_unknown_keys_are_ignored_and_bad_specs_refused():
    assert RunSpec.from_wire({"v": 1, "backend": "null", "artifact": "m", "later_key": 1}) == \
        RunSpec("null", "m")
    with pytest.raises(SpecError, match="a spec must be a JSON object"):
        RunSpec.from_wire([1])
    with pytest.raises(SpecError, match="run spec version 2, agent expects 1"):
        RunSpec.from_wire({"v": 2, "backend": "null", "artifact": "m"})
    with pytest.raises(SpecError, match="unknown backend 'tvm'"):
        RunSpec.from_wire({"v": 1, "backend": "tvm", "artifact": "m"})
    with pytest.raises(SpecError, match="'cpus'"):
        RunSpec.from_wire({"v": 1, "backend": "null", "artifact": "m", "cpus": [-1]})


def test_the_executor_sends_the_keys_it_always_sent():
    params = MeasureParams(min_runs=7, target_cv=0.05)
    request = RunRequest("local", "tiny_cnn", "onnx", 2, params=params)
    spec = _agent_spec(request, "/d/m.onnx", "onnxruntime", None, cpus=[0, 1])
    assert set(spec) == ALWAYS_SENT
    assert spec == {"v": 1, "backend": "onnxruntime", "artifact": "/d/m.onnx", "threads": 2,
                    "warmup_runs": params.warmup_runs, "warmup_min_s": params.warmup_min_s,
                    "min_runs": 7, "min_s": params.min_s, "max_s": params.max_s,
                    "seed": params.seed, "dataset": None, "target_cv": 0.05,
                    "max_runs": params.max_runs, "cpus": [0, 1]}
    with_inputs = _agent_spec(request, "/d/m.onnx", "onnxruntime", None, inputs="/d/x.npz")
    assert set(with_inputs) == ALWAYS_SENT | {"inputs"} and with_inputs["inputs"] == "/d/x.npz"
    assert RunSpec.from_wire(with_inputs).inputs == "/d/x.npz"
