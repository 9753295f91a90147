"""Models whose outputs hold NaN or ±Inf: their latency is measured like any other's, the
record says how many of their outputs are not numbers, nothing is strict-JSON-encoded into a
failure, and the parity check says NaN/Inf instead of blaming the exporter.
"""

from __future__ import annotations

import json

import pytest

from tests.faults.conftest import count_records
from tests.helpers import FAST

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")


#: Two finite logits, one +Inf or -Inf (a logit over zero), one NaN (the square root of a
#: negative number), whatever the input.
CODE = '''
import torch

class Odd(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(8, 3)

    def forward(self, x):
        y = self.fc(x)
        nan = torch.sqrt(-torch.ones_like(y[:, :1]) - y[:, :1].abs())
        return torch.cat([y[:, :2], y[:, 2:] / 0.0, nan], dim=1)

def make():
    return Odd(), torch.randn(1, 8)
'''


@pytest.fixture
def odd_code(tmp_path):
    path = tmp_path / "odd.py"
    path.write_text(CODE)
    return path


def _strict(text: str):
    """JSON as a strict parser reads it (no NaN or Infinity literals)."""
    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.fault("NaN/Inf outputs: a user's artifact is never measured")
def test_artifact_with_nan_outputs_is_measured(cli, fault, tmp_path, odd_code):
    import importlib.util

    spec = importlib.util.spec_from_file_location("odd", odd_code)
    odd = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(odd)
    model, example = odd.make()
    artifact = tmp_path / "odd.onnx"
    torch.onnx.export(model, (example,), str(artifact), input_names=["x"], dynamo=False)
    result = cli("run", "-m", str(artifact), "--json", *FAST)
    (record,) = _strict(result.stdout)
    assert record["status"] == "ok" and record["median_ms"] > 0, record["reason"]
    output = record["result"]["output"]
    assert output["nonfinite"] == {"nan": 1, "inf": output["nonfinite"]["inf"],
                                   "-inf": 1 - output["nonfinite"]["inf"]}
    assert output["head"][3] == "nan" and output["head"][2] in ("inf", "-inf")
    assert all(isinstance(v, float) for v in output["head"][:2])
    shown = cli("results", "show", record["id"]).stdout
    assert "non-finite outputs" in shown and "1 NaN" in shown and "of 4 values" in shown
    _strict(cli("results", "list", "--json").stdout)
    _strict(cli("results", "export", "-f", "json").stdout)
    fault.records_lost(1, count_records())


@pytest.mark.fault("NaN/Inf outputs: parity blames the exporter")
def test_converted_model_with_nan_outputs(cli, fault, odd_code):
    converted = cli("convert", f"{odd_code}:make", "-f", "onnx")
    assert "NaN/Inf: PyTorch 16, the artifact 16, at the same places" in converted.stdout
    assert "does not match" not in converted.output
    (record,) = _strict(cli("run", "-m", f"{odd_code}:make", "-f", "onnx", "--json", *FAST).stdout)
    assert record["status"] == "ok" and record["median_ms"] > 0
    parity = record["provenance"]["artifact"]["parity"]
    assert parity["ok"] and parity["nonfinite"]["disagree"] == 0
    assert record["result"]["output"]["nonfinite"]["nan"] == 1


@pytest.mark.fault("NaN/Inf outputs: a mismatch is named as such")
def test_nan_where_pytorch_has_numbers_is_named(fault):
    import numpy as np

    from aiot.converters.parity import compare_outputs
    from aiot.core.errors import AccuracyMismatch

    reference = np.array([[1.0, 2.0, np.inf, np.nan], [0.5, -1.0, -np.inf, np.nan]])
    same = compare_outputs(reference, reference.copy(), 1e-4, 1e-3)
    assert same["ok"] and same["max_abs"] == 0.0
    assert same["nonfinite"] == {"reference": 4, "artifact": 4, "disagree": 0}
    other = reference.copy()
    other[0, 0] = np.nan  # the artifact gives NaN where PyTorch gives a number
    other[1, 2] = np.inf  # and +Inf where PyTorch gives -Inf
    report = compare_outputs(reference, other, 1e-4, 1e-3)
    assert not report["ok"] and report["nonfinite"]["disagree"] == 2
    assert np.isfinite(report["max_abs"])
    error = AccuracyMismatch("onnx", report)
    assert "NaN/Inf" in error.message and "2 place(s)" in error.message
    assert "exported graph does not match" not in error.one_line()
    json.dumps(report, allow_nan=False)  # the report itself is plain JSON


def test_output_drift_compares_nonfinite_heads():
    from aiot.host.store.output_drift import compare_fingerprints

    a = {"size": 4, "l2": 2.0, "head": [1.0, 1.0, "inf", "nan"],
         "nonfinite": {"nan": 1, "inf": 1, "-inf": 0}}
    assert compare_fingerprints(a, dict(a))[2] == "match"
    b = {**a, "head": [1.0, 1.0, "-inf", "nan"], "nonfinite": {"nan": 1, "inf": 0, "-inf": 1}}
    assert compare_fingerprints(b, a)[2] == "mismatch"
