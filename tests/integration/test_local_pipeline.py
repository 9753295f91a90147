"""Convert → push → measure → store on the embedded local device, through the real CLI."""

import re

import numpy as np
import pytest

from tests.helpers import fast

pytest.importorskip("onnxruntime")
pytest.importorskip("ai_edge_litert")
pytest.importorskip("litert_torch")

FAST = fast(5, warmup_runs=1, cooldown=False)


def test_sweep_tiny_model_two_formats_two_threads(cli):
    records = cli.json("sweep", "--device", "local", "--model", "tiny_cnn", "--format", "tflite,onnx",
                       "--threads", "1,2", *FAST)
    # Shuffled with a recorded seed: every combination once, in the order the seed gives.
    assert sorted((r["format"], r["threads"]) for r in records) == [("onnx", 1), ("onnx", 2),
                                                                     ("tflite", 1), ("tflite", 2)]
    assert [r["provenance"]["sweep"]["index"] for r in records] == [0, 1, 2, 3]
    assert {r["provenance"]["sweep"]["seed"] for r in records} == {0}
    # Running the same sweep again resumes it: everything is done, nothing is measured.
    again = cli("sweep", "--device", "local", "--model", "tiny_cnn", "--format", "tflite,onnx",
                "--threads", "1,2", *FAST)
    assert "complete" in again.stderr
    stored = cli.json("results", "list")
    assert [r["id"] for r in stored] == [r["id"] for r in records]
    for r in stored:
        assert r["status"] == "ok" and r["kind"] == "latency"
        assert r["median_ms"] > 0 and r["p90_ms"] >= r["median_ms"] and r["load_ms"] > 0
        assert len(r["result"]["samples_ns"]) >= 5
        prov = r["provenance"]
        assert prov["aiot_version"] and prov["host"]["python"] and prov["recorded_at"]
        assert prov["device"]["name"] == "local" and prov["device"]["cores"] >= 1
        assert prov["artifact"]["sha256"] == r["artifact_sha256"] and prov["artifact"]["parity"]["ok"]
        assert prov["runtime"]["version"] and prov["toolchain"]
    assert len({r["sweep_id"] for r in stored}) == 1


def test_on_device_accuracy_equals_pytorch(cli):
    from aiot.converters.api import build_source_model
    from aiot.models.datasets import load_dataset

    torch = pytest.importorskip("torch")
    (record,) = cli.json("run", "--model", "tiny_cnn", "--format", "onnx", "--dataset", "fashion-mnist",
                         "--limit", "300", *FAST)
    spec, model = build_source_model("tiny_cnn")  # the seeded random init the artifact came from
    x, y = load_dataset("fashion-mnist", spec.input, split="test", limit=300, seed=0)
    with torch.no_grad():
        pred = model(torch.from_numpy(x)).argmax(1).numpy()
    assert record["result"]["accuracy"]["total"] == 300
    # Same random init (seeded build), same shard: the artifact must agree image for image.
    assert record["accuracy"] == pytest.approx(float(np.mean(pred == y)), abs=1 / 300)


def test_failed_run_is_recorded_and_the_sweep_goes_on(cli, monkeypatch):
    from aiot.host.engine import executor

    real = executor._measure

    def flaky(request, *args):
        if request.format == "onnx":
            raise executor.UsageError("simulated failure")
        return real(request, *args)

    monkeypatch.setattr(executor, "_measure", flaky)
    result = cli("sweep", "--model", "tiny_cnn", "--format", "onnx,tflite", "--threads", "1", *FAST, code=1)
    assert "simulated failure" in result.stderr
    stored = cli.json("results", "list")
    assert sorted((r["format"], r["status"]) for r in stored) == [("onnx", "failed"), ("tflite", "ok")]
    assert [r["reason"] for r in stored if r["status"] == "failed"] == ["simulated failure"]


def test_ctrl_c_leaves_no_pending_records(cli, monkeypatch):
    from aiot.host.cli import progress

    def interrupt(self, request, stage):
        if stage == "measure":
            raise KeyboardInterrupt

    monkeypatch.setattr(progress.RichRunListener, "on_stage", interrupt)
    result = cli("sweep", "--model", "tiny_cnn", "--format", "onnx", "--threads", "1,2", *FAST, code=130)
    assert "interrupted" in result.stderr
    stored = cli.json("results", "list")
    assert [(r["status"], r["reason"]) for r in stored] == [("failed", "interrupted by user")]


def test_push_is_content_addressed(cli):
    first = cli.json("push", "--model", "tiny_cnn", "--format", "onnx")
    second = cli.json("push", "--model", "tiny_cnn", "--format", "onnx")
    assert first["sent"] and not second["sent"] and first["artifact"] == second["artifact"]


def test_results_show_and_csv_export(cli, tmp_path):
    (record,) = cli.json("run", "--model", "tiny_cnn", "--format", "tflite", *FAST)
    shown = cli("results", "show", record["id"][:8]).stdout
    assert "median (ms)" in shown and "toolchain" in shown
    process = cli.record(record["id"]).provenance["agent_process"]
    assert re.search(rf"agent process\s+│ {process}\s", shown), shown  # session-fork here
    out = tmp_path / "runs.csv"
    cli("results", "export", "--format", "csv", "--out", str(out))
    lines = out.read_text().splitlines()
    assert len(lines) == 2 and lines[1].startswith(record["id"])


@pytest.mark.slow
def test_issue_acceptance_sweep_mobilenet_v2(cli):
    """The issue's done-criterion: four records for mobilenet_v2 × {tflite, onnx} × {1, 2}."""
    records = cli.json("sweep", "--device", "local", "--model", "mobilenet_v2", "--format", "tflite,onnx",
                       "--threads", "1,2", "--min-runs", "10", "--min-s", "0.5")
    assert len(records) == 4 and all(r["status"] == "ok" for r in records)
    assert len(cli.json("results", "list")) == 4
