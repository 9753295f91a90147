"""Models that are more than one file: an ONNX model with its tensors in a ``.data`` file
beside it runs (every file is pushed, beside it), its record's identity covers every file
(another ``.data`` is another model), and a data path outside the model's folder is refused.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.faults.conftest import count_records, one_line_error
from tests.helpers import FAST

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")


def _external_model(folder: Path, location: str = "net.onnx.data", seed: int = 0) -> Path:
    """``folder/net.onnx`` with every tensor in ``folder/<location>`` (a valid pair)."""
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    folder.mkdir(parents=True, exist_ok=True)
    whole = folder / "whole.onnx"
    torch.onnx.export(net, (torch.randn(1, 8),), str(whole), input_names=["x"], dynamo=False)
    model = onnx.load(str(whole))
    whole.unlink()
    path = folder / "net.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=location, size_threshold=0)
    return path


@pytest.mark.fault("ONNX with external data: only the .onnx is pushed")
def test_onnx_with_external_data_runs(cli, fault, tmp_path):
    model = _external_model(tmp_path / "model")
    data = model.with_name("net.onnx.data")
    assert data.stat().st_size > model.stat().st_size  # the weights are in the .data file
    (record,) = cli.json("run", "-m", str(model), *FAST)
    assert record["status"] == "ok" and record["median_ms"] > 0, record["reason"]
    files = record["provenance"]["source"]["files"]
    assert [f["name"] for f in files] == ["net.onnx", "net.onnx.data"]
    assert record["size_bytes"] == model.stat().st_size + data.stat().st_size
    # Both files were pushed side by side, into the folder named by the pair's hash.
    pushed = sorted(p.name for p in Path(os.environ["AIOT_LOCAL_WORKDIR"]).glob("blobs/*/net.onnx*"))
    assert pushed == ["net.onnx", "net.onnx.data"]
    fault.records_lost(1, count_records())


@pytest.mark.fault("ONNX with external data: the .data file is not in the identity")
def test_external_data_is_in_the_identity(cli, fault, tmp_path):
    model = _external_model(tmp_path / "model")
    sweep = ("sweep", "-m", str(model), "--threads", "1", *FAST)
    (first,) = cli.json(*sweep)
    _external_model(tmp_path / "model", seed=1)  # the same graph, other weights in the .data
    (second,) = cli.json(*sweep)  # not "already done": another model
    assert first["artifact_sha256"] != second["artifact_sha256"]
    assert first["spec"]["model_sha256"] != second["spec"]["model_sha256"]
    assert second["status"] == "ok"


@pytest.mark.fault("ONNX external data outside the model's folder")
@pytest.mark.parametrize("location", ["../outside.data", "ABSOLUTE", "missing.data"])
def test_external_data_outside_the_folder_is_refused(cli, fault, tmp_path, location):
    model = _external_model(tmp_path / "model")
    target = tmp_path / "outside.data"
    target.write_bytes(model.with_name("net.onnx.data").read_bytes())
    location = str(target) if location == "ABSOLUTE" else location
    proto = onnx.load(str(model), load_external_data=False)
    for tensor in proto.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    onnx.save_model(proto, str(model))
    says = "which is not there" if location == "missing.data" else "outside the model's folder"
    for command in (("models", "info", str(model)), ("run", "-m", str(model), *FAST)):
        result = cli(*command, code=2)
        one_line_error(result, "net.onnx: tensor", says, code=2)
    assert count_records() == 0
