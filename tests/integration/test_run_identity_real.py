"""Real runs of one model, format and thread count (float, ``--opt quant=int8`` and pinned
to a CPU cluster) on this host: ``results compare``, the report's first screen and plots,
and the sweep table keep all three apart (issue 36: the int8 run vanished from the report
and was paired with the float one as "the same run").

``--via app`` is the third variant the issue names; it needs the emulated Android phone and
the app installed (tests/integration/test_android_app.py, minutes), so a ``--cluster all``
run stands in for it here (a zoo model's input shape is fixed, so ``--input-shape`` cannot):
the identity keeps ``via`` apart the same way (tests/unit/test_run_identity.py covers it,
and other input shapes, with stored records)."""

from __future__ import annotations

import pytest

from aiot.host.report.build import build, collect
from aiot.host.report.summary import best_rows
from aiot.host.store import open_store
from tests.helpers import FAST

pytestmark = pytest.mark.slow

RUN = ("run", "-m", "tiny_cnn", "-f", "tflite", "-d", "local", "--threads", "1", *FAST)
VARIANTS = {"float": (), "int8": ("--opt", "quant=int8"), "cluster": ("--cluster", "all")}


def test_report_and_compare_keep_float_int8_and_pinned_runs_apart(cli):
    ids = {}
    for name, extra in VARIANTS.items():
        [record] = cli.json(*RUN, *extra)
        assert record["status"] == "ok", record
        ids[name] = record["id"]
    records = cli.json("results", "list")
    assert len(records) == 3

    # results compare: the set against itself pairs each run with itself, three rows
    board = ",".join(ids.values())
    result = cli.json("results", "compare", board, board)
    pairs = {(row["a_id"], row["b_id"]) for row in result["rows"]}
    assert pairs == {(i, i) for i in ids.values()}, result["rows"]
    labels = sorted(row["label"] for row in result["rows"])
    assert any("tflite[quant=int8]" in label for label in labels), labels
    assert any("1t on all @ local" in label for label in labels), labels

    # the report's first screen: one row per configuration, the int8 run among them
    import os
    from pathlib import Path

    with open_store(Path(os.environ["AIOT_RESULTS_DIR"])) as store:
        report = build(collect(store), source="results")
    assert {r.id for r in report.plotted_runs()} == set(ids.values())
    rows = best_rows(report)
    assert {r["id"] for r in rows} == set(ids.values())
    assert {r["variant"] for r in rows} == {"tflite", "tflite[quant=int8]", "tflite @all"}

    # the run table says which run is which
    table = cli("results", "list").stdout
    assert "tflite[quant=int8]" in table and "tflite @all" in table
