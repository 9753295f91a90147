"""Honest verdicts and readable sweeps, end to end on the local device.

* threads above the device's online cores: warned before the sweep, marked INVALID in the
  record and in the table, with the reason beside INVALID;
* the sweep table sorted by threads (not the shuffled run order), with speed-up and
  throughput, the sweep id at its start and end, and the stored table on a complete resume;
* ``results export --format csv`` with flat columns, ``results show`` with rounded numbers;
* a random-init model whose logits ignore the input: parity inconclusive in the CLI line,
  the sidecar and the run's record.
"""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from aiot.host.transports.local import LocalTransport
from tests.helpers import fast

pytest.importorskip("onnxruntime")

FAST = fast(5)


def _online_cores() -> int:
    facts = LocalTransport().info()
    return facts.get("online_cores") or facts["cores"]


@pytest.mark.slow
def test_sweep_warns_marks_sorts_and_resumes_with_its_table(cli):
    cores = _online_cores()
    many = 2 * cores
    result = cli("sweep", "-m", "tiny_cnn", "-f", "onnx", "--threads", f"{many},1", *FAST)
    err = result.stderr
    warning = f"local has {cores} online cores: the runs at {many} threads oversubscribe them"
    assert warning in err
    sweep_id = re.search(r"sweep (\w+): 2 run\(s\)", err).group(1)
    assert err.index(warning) < err.index(f"sweep {sweep_id}: 2 run(s)")  # before the runs
    assert f"sweep {sweep_id} done; see: aiot results list --sweep {sweep_id}" in err

    records = {r["threads"]: r for r in cli.json("results", "list", "--sweep", sweep_id)}
    over, one = records[many], records[1]
    assert over["validity"] == "INVALID"
    assert over["result"]["validity"]["reasons"][0].startswith(
        f"threads above online cores: {many} threads > ")
    assert not any("threads above" in r for r in one["result"]["validity"]["reasons"])
    load = over["result"]["load"]  # the agent's reading of the CPUs around the timed loop
    assert load["online_cpus"] >= 1 and load["own_cpus"] is not None

    # Sorted by threads, not by the order given or run; the reason beside INVALID.
    table = result.stdout
    rows = [line for line in table.splitlines() if "tiny_cnn" in line]
    assert rows[0].index(one["id"][:8]) >= 0 and over["id"][:8] in rows[1]
    # The status cell may wrap (its width follows the other cells' numbers): read the
    # table's words with its borders and blank continuation cells taken out.
    words = " ".join(re.sub(r"[│┃┏┓┗┛┡┩└┘┬┴┼━─╇╋┳┻]", " ", table).split())
    # Where both runs' speed-ups print alike (a tiny model that more threads do not speed up,
    # on a loaded host: 1.00× each), the column is folded into the "every run:" line above.
    assert "1.00×" in rows[0] or re.search(r"every run:.*speed-up 1\.00×", words), table
    assert "INVALID:" in rows[1] and "INVALID: threads above" in words
    assert "speed-up" in table and "inf/s" in table

    # A complete resume prints the stored table (and JSON: the stored records).
    again = cli("sweep", "-m", "tiny_cnn", "-f", "onnx", "--threads", f"{many},1", *FAST)
    assert f"sweep {sweep_id} is complete" in again.stderr
    assert one["id"][:8] in again.stdout and over["id"][:8] in again.stdout
    stored = cli.json("sweep", "-m", "tiny_cnn", "-f", "onnx", "--threads", f"{many},1", *FAST)
    assert {r["id"] for r in stored} == {one["id"], over["id"]}

    # The CSV a spreadsheet opens: flat columns, the JSON blobs last.
    text = cli("results", "export", "--format", "csv", "--sweep", sweep_id).stdout
    rows = {int(r["threads"]): r for r in csv.DictReader(io.StringIO(text))}
    header = text.splitlines()[0].split(",")
    assert header[-2:] == ["stats_ms", "provenance"]
    row = rows[many]
    assert float(row["mean_ms"]) > 0 and float(row["min_ms"]) <= float(row["median_ms"]) <= float(row["max_ms"])
    assert int(row["n"]) == over["result"]["stats_ms"]["count"] and float(row["std_ms"]) >= 0
    assert row["input_shape"] == "1x1x28x28" and row["runtime"] == "onnxruntime"
    assert row["runtime_version"] == over["provenance"]["runtime"]["version"]
    assert row["cpu"] and row["via"] == "shell" and row["emulated"] == "False"
    assert row["validity"] == "INVALID" and "threads above online cores" in row["validity_reasons"]
    assert row["parity"] == "pass"
    json.loads(row["stats_ms"])

    # results show: each number rounded, its unit in the label once.
    shown = cli("results", "show", over["id"][:8]).stdout
    assert "median (ms)" in shown and "latency (ms)" in shown and "n 5" in shown
    assert not re.search(r"\d\.\d{6,}", shown)  # no unrounded floats
    assert "parity vs PyTorch" in shown and "pass (max abs" in shown


@pytest.mark.slow
def test_random_init_model_parity_is_inconclusive_everywhere(cli, tmp_path):
    out = cli("convert", "mobilenet_v2_mnist", "--format", "onnx", "--out", str(tmp_path)).stdout
    assert "parity vs PyTorch: inconclusive: PyTorch's outputs barely depend on the input" in out
    assert "fix: convert trained weights" in out
    sidecar = json.loads((tmp_path / "mobilenet_v2_mnist.onnx.aiot.json").read_text())
    assert sidecar["parity"]["verdict"] == "inconclusive" and sidecar["parity"]["ok"] is True

    run = cli("run", "-m", "mobilenet_v2_mnist", "-f", "onnx", *FAST, "--json")
    (record,) = json.loads(run.stdout)
    # The run converted it itself: its own line says so.
    assert "mobilenet_v2_mnist as onnx: parity with PyTorch inconclusive" in run.stderr
    parity = record["provenance"]["artifact"]["parity"]
    assert parity["verdict"] == "inconclusive" and "constant output" in parity["inconclusive"]["reason"]
    shown = cli("results", "show", record["id"][:8]).stdout
    assert "parity vs PyTorch" in shown and "inconclusive: PyTorch's outputs" in shown


def test_a_bad_validity_setting_is_refused_before_any_run(cli, monkeypatch):
    monkeypatch.setenv("AIOT_VALIDITY", "cv=lots")
    result = cli("run", "-m", "tiny_cnn", "-f", "onnx", *FAST, code=2)
    assert "AIOT_VALIDITY: cv=lots is not a number" in result.stderr
    assert cli.json("results", "list") == []
