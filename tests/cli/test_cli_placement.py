"""A run's placement where people read it, over a hand-filled store: the run table's mark and
line, ``results show``, the CSV export, the report, the lab view's results and record pages,
and the ``results compare`` gate failing a candidate whose operators fall back."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest

from aiot.device_agent.stats import summarize_ms
from aiot.host.store import open_store

FULL = {"engine": "xnnpack", "source": "execution plan of LiteRT's Interpreter",
        "total_nodes": 4, "delegated_nodes": 4, "outside_nodes": 0, "partitions": 1,
        "outside": {}, "complete": True}
PARTLY = {**FULL, "delegated_nodes": 3, "outside_nodes": 1, "partitions": 2,
          "outside": {"CUMSUM": 1}, "complete": False}
PARTLY_LINE = ("partly delegated: xnnpack took 3 of 4 operators in 2 partitions; outside: "
               "CUMSUM ×1 (execution plan of LiteRT's Interpreter)")
FULL_LINE = ("fully delegated: all 4 operators on xnnpack in 1 partition (execution plan of "
             "LiteRT's Interpreter)")


def add(store, sweep: str, placement: dict | None, model: str = "net.tflite",
        median: float = 1.0) -> str:
    spec = {"device": "local", "model": model, "format": "tflite", "threads": 1}
    provenance = {"device": {"cpu_model": "x86", "cores": 8},
                  "runtime": {"backend": "litert", "version": "2.3.0"}}
    record = store.begin("latency", spec, provenance, sweep_id=sweep, device="local",
                         model=model, format="tflite", threads=1)
    stats = summarize_ms([int(median * 1e6)] * 50)
    result = {"stats_ms": stats, **({"placement": placement} if placement else {})}
    store.finish(record.id, "ok", result=result, artifact_sha256="ab" * 32, size_bytes=4096,
                 median_ms=stats["median"], p90_ms=stats["p90"], validity="VALID")
    return record.id


@pytest.fixture
def runs():
    """A partly and a fully delegated run, and one recorded before placement was."""
    with open_store(Path(os.environ["AIOT_RESULTS_DIR"])) as store:
        yield {"partly": add(store, "s1", PARTLY), "full": add(store, "s1", FULL, model="a.tflite"),
               "old": add(store, "s1", None, model="old.tflite")}


def _rows(text: str) -> dict[str, str]:
    return {line.split()[0]: line for line in text.splitlines() if line[:8].isalnum()}


def test_the_run_table_marks_the_partly_delegated_run_and_names_what_stayed_outside(cli, runs):
    table = cli("results", "list").stdout
    rows = _rows(table)
    assert "tflite‡" in rows[runs["partly"][:8]]
    assert "‡" not in rows[runs["full"][:8]] and "‡" not in rows[runs["old"][:8]]
    assert (f"‡ partly delegated: xnnpack left CUMSUM ×1 outside ({runs['partly'][:8]})"
            in table)


def test_results_show_names_the_operators_and_says_fully_delegated(cli, runs):
    def placement_row(record_id: str) -> str | None:
        for line in cli("results", "show", record_id[:8]).stdout.splitlines():
            cells = [cell.strip() for cell in line.split("│")]
            if len(cells) == 4 and cells[1] == "placement":  # one line: the terminal is wide
                return cells[2]
        return None

    assert placement_row(runs["partly"]) == PARTLY_LINE
    assert placement_row(runs["full"]) == FULL_LINE
    assert placement_row(runs["old"]) is None  # older records: no row, nothing made up


def test_the_csv_and_the_report_carry_the_placement(cli, runs, tmp_path):
    out = tmp_path / "runs.csv"
    cli("results", "export", "--format", "csv", "--out", str(out))
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO(out.read_text()))}
    assert rows[runs["partly"]]["placement"] == PARTLY_LINE
    assert rows[runs["full"]]["placement"] == FULL_LINE and rows[runs["old"]]["placement"] == ""
    folder = tmp_path / "report"
    cli("report", "--format", "csv", "--out", str(folder))
    report = {r["id"]: r for r in csv.DictReader((folder / "runs.csv").open())}
    assert report[runs["partly"]]["placement"] == PARTLY_LINE
    cli("report", "--format", "md", "--out", str(tmp_path / "md"))
    assert PARTLY_LINE in (tmp_path / "md" / "report.md").read_text()


def test_the_lab_views_results_and_record_pages_show_it(runs):
    pytest.importorskip("starlette")
    from tests.unit.test_labview import client

    c = client()
    page = c.get("/results").text
    assert "partly delegated: xnnpack left CUMSUM ×1 outside" in page
    assert page.count("partly delegated") == 1
    record = c.get(f"/record/{runs['full']}").text
    assert "fully delegated: all 4 operators on xnnpack in 1 partition" in record


def test_the_gate_fails_a_candidate_whose_operators_fall_back_whatever_the_thresholds(cli):
    with open_store(Path(os.environ["AIOT_RESULTS_DIR"])) as store:
        add(store, "base", FULL)
        moved = add(store, "cand", PARTLY)
    result = cli("results", "compare", "base", "cand", "--fail-on", "median:1000%", code=1)
    said = " ".join(result.stderr.split())
    assert (f"net.tflite · tflite · 1t @ local (B {moved[:8]}, artifact abababab): placement: 1 "
            "more operator(s) fall back outside xnnpack: CUMSUM +1 (A 0 outside, B 1)") in said
    data = json.loads(cli("results", "compare", "base", "cand", "--json", code=1).stdout)
    [row] = data["rows"]
    assert row["status"] == "unchanged" and row["failures"] == [
        "placement: 1 more operator(s) fall back outside xnnpack: CUMSUM +1 (A 0 outside, B 1)"]
    assert data["passed"] is False
    cli("results", "compare", "cand", "base")  # the fix passes: fewer fall back
