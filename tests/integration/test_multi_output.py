"""User code whose model returns several outputs (a tuple, a dict, nested), as detectors and
landmark nets do: every format exports all of them, parity judges each, `models info` names
them, and a run on `local` times the model with all of them."""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("torch")

FAST = ["--min-runs", "3", "--min-s", "0", "--warmup-min-s", "0", "--cooldown-max-s", "0"]

DETECTOR = textwrap.dedent("""
    import torch
    from torch import nn


    class Detector(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
            self.cls = nn.Conv2d(8, 4, 1)
            self.box = nn.Conv2d(8, 2, 1)

        def forward(self, x):
            f = self.body(x)
            return self.cls(f).flatten(1), self.box(f).mean((2, 3))


    class Heads(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c = nn.Linear(12, 5), nn.Linear(12, 3), nn.Linear(12, 2)

        def forward(self, x):
            return {"scores": self.a(x), "boxes": (self.b(x), torch.tanh(self.c(x)))}


    def detector():
        torch.manual_seed(0)
        return Detector().eval(), torch.randn(1, 3, 16, 16)


    def heads():
        torch.manual_seed(0)
        return Heads().eval(), torch.randn(1, 12)
""")


@pytest.fixture
def detnet(tmp_path):
    path = tmp_path / "detnet.py"
    path.write_text(DETECTOR)
    return path


def test_outputs_are_named_by_their_place_in_what_the_model_returns():
    import torch

    from aiot.converters.outputs import flat_outputs

    t = torch.zeros(1)
    got = flat_outputs({"scores": t, "boxes": (t, [t, {"xy": t}])}, "m")
    assert [name for name, _ in got] == ["scores", "boxes.0", "boxes.1.0", "boxes.1.1.xy"]
    assert [name for name, _ in flat_outputs((t, t), "m")] == ["out0", "out1"]
    assert [name for name, _ in flat_outputs(t, "m")] == ["output"]


def test_an_output_that_is_not_a_tensor_is_one_line():
    import torch

    from aiot.converters.outputs import flat_outputs
    from aiot.core.errors import UsageError

    with pytest.raises(UsageError, match="returns a str as output out1"):
        flat_outputs((torch.zeros(1), "boxes"), "m")


def test_positional_outputs_are_put_back_in_number_order():
    from aiot.device_agent.signature import export_order

    names = [{"name": f"output_{k}"} for k in (0, 1, 10, 11, 2)]
    assert [names[i]["name"] for i in export_order(names)] == [
        "output_0", "output_1", "output_2", "output_10", "output_11"]
    kept = [{"name": n} for n in ("scores", "boxes")]
    assert export_order(kept) == [0, 1]


def test_models_info_names_a_factorys_outputs(cli, detnet):
    info = cli.json("models", "info", f"{detnet}:heads")
    assert [(o["name"], o["shape"]) for o in info["outputs"]] == [
        ("scores", [1, 5]), ("boxes.0", [1, 3]), ("boxes.1", [1, 2])]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["tflite", "onnx", "ort", "ptl", "executorch"])
def test_every_format_exports_all_outputs_and_checks_each(cli, detnet, tmp_path, fmt):
    if fmt == "executorch":
        from tests.converters.conftest import need_toolchain

        need_toolchain("executorch")
    report = cli.json("convert", f"{detnet}:heads", "-f", fmt, "--out", str(tmp_path / "out"))
    parity = report["parity"]
    assert parity["verdict"] == "pass" and parity["max_abs"] < 1e-4
    assert [o["name"] for o in parity["outputs"]] == ["scores", "boxes.0", "boxes.1"]
    assert all(o["ok"] and o["max_abs"] < 1e-4 for o in parity["outputs"])
    from aiot.converters.sidecar import read_sidecar

    sidecar = read_sidecar(__import__("pathlib").Path(report["artifact"]))
    assert [o["name"] for o in sidecar["outputs"]] == ["scores", "boxes.0", "boxes.1"]
    shown = cli("convert", f"{detnet}:heads", "-f", fmt, "--out", str(tmp_path / "out")).stdout
    assert "per output: scores max abs" in shown


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["caffe2", "lce", "dabnn"])
def test_one_output_emitters_refuse_in_one_line(cli, detnet, fmt):
    result = cli("convert", f"{detnet}:detector", "-f", fmt, code=1)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output


@pytest.mark.slow
def test_a_tuple_detector_runs_on_local_and_its_file_runs_as_a_third_partys(cli, detnet, tmp_path):
    (record,) = cli.json("sweep", "-d", "local", "-m", f"{detnet}:detector", "-f", "onnx",
                         "--threads", "1", *FAST)
    assert record["status"] == "ok", record["reason"]
    parity = record["provenance"]["artifact"]["parity"]
    assert [o["name"] for o in parity["outputs"]] == ["out0", "out1"]
    shown = cli("results", "show", record["id"]).stdout
    assert "per output: out0" in shown
    # The artifact alone, as someone else's file: models info shows both, a run times both.
    converted = cli.json("convert", f"{detnet}:detector", "-f", "tflite", "--out",
                         str(tmp_path / "out"))
    theirs = tmp_path / "theirs.tflite"
    theirs.write_bytes(__import__("pathlib").Path(converted["artifact"]).read_bytes())
    info = cli.json("models", "info", str(theirs))
    assert [o["shape"] for o in info["outputs"]] == [[1, 1024], [1, 2]]
    (run,) = cli.json("run", "-d", "local", "-m", str(theirs), "--threads", "1", *FAST)
    assert run["status"] == "ok", run["reason"]
