"""A researcher's several-input models measured end to end on ``local`` (issue 51): a BERT's
token ids are drawn inside its vocabulary and its mask in the example's span, under the names
the runtime knows them by (a .pte's are positional); ``--input-value`` reaches both the
conversion's parity and the run; a sweep over formats that cannot hold the model says why in
its table, in one line, with no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import fast

pytest.importorskip("transformers")

FAST = fast(warmup_runs=1, cooldown=False)
BERT = f"{Path(__file__).resolve().parents[1] / 'transformer_models.py'}:bert"


def _inputs(record) -> dict:
    return {i["name"]: i for i in record["result"]["inputs"]}


@pytest.mark.slow
@pytest.mark.parametrize("fmt, names", [("onnx", ("input_ids", "attention_mask")),
                                        ("executorch", ("input_0", "input_1"))])
def test_a_bert_runs_on_ids_inside_its_vocabulary(cli, fmt, names):
    from tests.converters.conftest import need_toolchain

    if fmt == "executorch":
        need_toolchain("executorch")
    run = cli("run", "-m", BERT, "-f", fmt, "-d", "local", *FAST)
    assert "Traceback" not in run.stdout + run.stderr
    (record,) = cli.json("results", "list")
    assert record["status"] == "ok", record
    ids, mask = (_inputs(record)[name] for name in names)
    assert (ids["dtype"], ids["range"]) == ("int64", [0, 1000])
    assert "word_embeddings" in ids["range_from"]
    assert (mask["range"], mask["range_from"]) == ([0, 2], "example")
    shown = cli("results", "show", record["id"]).stdout
    assert "drawn:" in shown and "in [0, 1000) (embedding embeddings.word_embeddings)" in shown
    assert "made-up values" not in shown  # the vocabulary's range is the model's, not made up


@pytest.mark.slow
def test_a_held_value_reaches_the_conversion_and_the_run(cli):
    cli("run", "-m", BERT, "-f", "executorch", "-d", "local", "--input-value", "attention_mask=1",
        *FAST)
    (record,) = cli.json("results", "list")
    assert (_inputs(record)["input_1"]["source"], _inputs(record)["input_1"]["value"]) == ("given", 1)
    import json
    import os

    (sidecar,) = Path(os.environ["AIOT_RESULTS_DIR"]).rglob(
        record["provenance"]["artifact"]["file"] + ".aiot.json")
    held = {i["name"]: i.get("value") for i in json.loads(sidecar.read_text())["inputs"]}
    assert held == {"input_ids": None, "attention_mask": 1}


@pytest.mark.slow
def test_a_sweep_says_why_a_format_cannot_hold_the_model(cli):
    from tests.converters.conftest import need_toolchain

    need_toolchain("lce")
    swept = cli("sweep", "-m", BERT, "-f", "onnx,lce", "-d", "local", "--threads", "1",
                *FAST, code=1)
    said = swept.stdout + swept.stderr
    assert "Traceback" not in said
    assert "takes 2 inputs (input_ids, attention_mask) and a lce artifact holds one" in said
    records = {r["format"]: r for r in cli.json("results", "list")}
    assert records["onnx"]["status"] == "ok"
    assert records["lce"]["status"] == "failed"
    assert "holds one" in records["lce"]["reason"] and "\n" not in records["lce"]["reason"]
