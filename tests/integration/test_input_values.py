"""Control inputs (issue 39, item 4): an integer scalar that selects a branch.

A real model built here with ``torch.onnx.export``: ``sample_rate`` (int64 scalar) picks
between two paths with ``torch.where``. Without a value the agent makes one up in [0, 10),
a value real data never has: the run says so, and the record shows it; ``--input-value``
gives the value, which the record keeps.
"""

from __future__ import annotations

import pytest

from tests.helpers import fast

FAST = fast(warmup_runs=1, cooldown=False)


@pytest.fixture(scope="module")
def srnet(tmp_path_factory):
    import torch
    from torch import nn

    class SrNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(16, 8)

        def forward(self, x, sample_rate):
            y = self.lin(x)
            return torch.where(sample_rate == 16000, y * 2.0, y)

    path = tmp_path_factory.mktemp("srnet") / "srnet.onnx"
    example = (torch.randn(1, 16), torch.tensor(16000, dtype=torch.int64))
    torch.onnx.export(SrNet().eval(), example, str(path), input_names=["x", "sample_rate"],
                      output_names=["y"], opset_version=17, dynamo=False)
    return path


def test_made_up_control_input_is_said_and_a_given_value_is_kept(cli, srnet):
    made = cli("run", "-m", str(srnet), "-d", "local", *FAST)
    assert "integer scalar input 'sample_rate' (int64) got made-up values in [0, 10)" in made.stderr
    assert "--input-value sample_rate=16000" in made.stderr
    (record,) = cli.json("results", "list")
    sr = {i["name"]: i for i in record["result"]["inputs"]}["sample_rate"]
    assert (sr["source"], sr["range"]) == ("generated", [0, 10])
    assert "made-up values: sample_rate int64 uniform in [0, 10)" in cli("results", "show", record["id"]).stdout

    given = cli("run", "-m", str(srnet), "-d", "local", "--input-value", "sample_rate=16000", *FAST)
    assert "made-up values" not in given.stderr
    latest = next(r for r in cli.json("results", "list") if r["id"] != record["id"])
    sr = {i["name"]: i for i in latest["result"]["inputs"]}["sample_rate"]
    assert (sr["source"], sr["value"], sr["shape"]) == ("given", 16000, [])
    assert latest["spec"]["input_values"] == {"sample_rate": 16000}
    assert "given: sample_rate=16000" in cli("results", "show", latest["id"]).stdout

    # Not only `results show`: the run table of `results list` marks the run whose inputs were
    # made up and says how under it, the CSV export has a column for it, and so does the report.
    listed = cli("results", "list").stdout
    row = next(line for line in listed.splitlines() if line.startswith(record["id"][:8]))
    assert "†" in row and "† made-up values: sample_rate int64 uniform in [0, 10)" in listed, listed
    assert "--input-value NAME=NUMBER" in listed
    import csv
    import io

    rows = {r["id"]: r for r in csv.DictReader(io.StringIO(cli("results", "export", "-f", "csv").stdout))}
    assert rows[record["id"]]["input_values"] == "made-up values: sample_rate int64 uniform in [0, 10)"
    assert rows[latest["id"]]["input_values"] == "given: sample_rate=16000"
    out = srnet.parent / "report"
    cli("report", "--out", str(out))
    page = (out / "index.html").read_text()
    assert "<th>input values</th>" in page and "made-up values: sample_rate int64 uniform in [0, 10)" in page


def test_a_runtime_failing_on_made_up_values_names_the_input(cli, tmp_path):
    import torch
    from torch import nn

    class Framer(nn.Module):  # frames of (sample_rate / 1000 - 8) samples: 8 at 16 kHz
        def forward(self, x, sample_rate):
            return x.reshape(-1, sample_rate // 1000 - 8) * 2.0

    path = tmp_path / "framer.onnx"
    torch.onnx.export(Framer().eval(), (torch.randn(1, 16), torch.tensor(16000)), str(path),
                      input_names=["x", "sample_rate"], output_names=["frames"],
                      opset_version=17, dynamo=False)
    cli("run", "-m", str(path), "-d", "local", *FAST, code=1)
    (failed,) = cli.json("results", "list")
    assert ("the model failed on made-up values in [0, 10) for integer input 'sample_rate' "
            "int64 [] (give real ones: --input-value sample_rate=NUMBER") in failed["reason"]
    assert "Reshape" in failed["reason"]  # the runtime's own words follow
    cli("run", "-m", str(path), "-d", "local", "--input-value", "sample_rate=16000", *FAST)
    assert {r["status"] for r in cli.json("results", "list")} == {"failed", "ok"}


def test_input_value_typos_are_refused(cli, srnet):
    bad = cli("run", "-m", str(srnet), "-d", "local", "--input-value", "sample_rate", *FAST, code=2)
    assert "is not NAME=NUMBER" in bad.stderr
    twice = cli("run", "-m", str(srnet), "-d", "local", "--input-value", "sr=1",
                "--input-value", "sr=2", *FAST, code=2)
    assert "gives 'sr' twice" in twice.stderr
    cli("run", "-m", str(srnet), "-d", "local", "--input-value", "samplerate=16000", *FAST, code=1)
    (record,) = cli.json("results", "list")
    assert "names no input of the model: samplerate (its inputs: x, sample_rate)" in record["reason"]
