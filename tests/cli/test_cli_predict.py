"""``aiot predict`` on ``local``: collect a tiny grid, fit, evaluate with the one measured
family held out (the predictor of that fold never saw it), predict a model of another family,
and the later run that checks the prediction. Timing is FAST: these runs test the pipeline,
the numbers are a loaded box's."""

from __future__ import annotations

import math
import os
from pathlib import Path

from aiot.host.predict.collect import transient
from aiot.host.store import open_store
from tests.helpers import FAST, single_error

#: Four kernels (the kinds with the largest shares: conv, dw, grouped, pointwise) and one model.
COLLECT = ("predict", "collect", "-d", "local", "-f", "onnx", "--threads", "1", "--kernels", "4",
           "--models", "tiny_cnn", "--min-runs", "5", "--min-s", "0", "--warmup-runs", "1",
           "--warmup-min-s", "0", "--cooldown-max-s", "0",
           # the suite's box is loaded: its verdicts are off but for threads, which a busy
           # box also fails (no idle core for the run's one thread)
           "--validity", "threads=off")
TARGET = ("-d", "local", "-f", "onnx", "--threads", "1")


def test_collect_fit_evaluate_predict_and_the_run_that_checks_it(cli):
    summary = cli.json(*COLLECT)
    measured = summary["measured"]
    # A loaded box may fail a run's timing audit (INVALID whatever the limits): fit leaves it out.
    assert sum(measured.values()) == 5 and set(measured) <= {"ok VALID", "ok INVALID"}, measured
    valid = measured.get("ok VALID", 0)
    again = cli(*COLLECT)  # the same command resumes: nothing is measured twice
    assert "5 run(s), 5 done before" in again.stderr and "nothing new" in again.stderr
    assert "complete" in again.stderr

    facts = cli.json("predict", "fit", *TARGET)
    assert facts["runs"] == valid == facts["kernels"] + facts["models"]
    assert sum(facts["left_out"].values()) == 5 - valid
    assert set(facts["kinds"]) <= {"conv", "dw", "gconv"} and facts["kinds"]
    assert any(ops["runtime"] for ops in facts["fusion"].values())  # ONNX Runtime's profile
    fitted = cli("predict", "fit", *TARGET)
    assert f"learned from {valid} VALID run(s) of local · onnx · 1t" in fitted.stdout
    assert "saved" in fitted.stderr and "local-onnx-1t.json" in fitted.stderr
    assert "fewer than 2 whole models" in fitted.stderr  # one model: no composition fitted

    held = cli.json("predict", "evaluate", *TARGET)
    if facts["models"]:  # tiny_cnn's family held out: its fold learned from the kernels alone
        (outcome,) = held["outcomes"]
        assert outcome["model"] == "tiny_cnn" and outcome["family"] == "tiny"
        assert math.isfinite(outcome["predicted_ms"]) and outcome["predicted_ms"] > 0
        assert held["families"]["tiny"]["n"] == 1
        shown = cli("predict", "evaluate", *TARGET).stdout
        assert "held-out families" in shown and "tiny" in shown and "FLOPs baseline" in shown
    else:
        assert "no whole models" in held["skipped"][0]

    # squeezenet's family was never measured and its concat and max-pool kinds never collected
    told = cli("predict", "-m", "squeezenet_mnist", *TARGET)
    assert "squeezenet_mnist · onnx · 1t @ local: predicted" in told.stdout
    assert "95 % interval" in told.stdout and "kernels summed" in told.stdout
    assert "never collected, predicted by the pooled regressor: concat" in told.stderr
    guess = cli.json("predict", "-m", "tiny_cnn", *TARGET)
    assert guess["low_ms"] < guess["predicted_ms"] < guess["high_ms"]
    assert len(guess["kernels"]) == 6 and guess["interval"] == "95 %"
    assert cli.record(guess["record"]).kind == "prediction"

    run = cli.json("run", "-m", "tiny_cnn", "-f", "onnx", "-d", "local", *FAST)
    shown = cli("results", "show", run[0]["id"][:8])
    assert "predicted" in shown.stdout and f"record {guess['record'][:8]}" in shown.stdout
    checked = cli.json("predict", "evaluate", *TARGET)["stored_predictions"]
    assert checked["n"] == 1 and checked["mape"] >= 0


def test_each_step_says_in_one_line_what_is_missing(cli):
    fit = cli("predict", "fit", *TARGET, code=2)
    assert "no VALID kernel runs for local · onnx · 1 thread(s)" in single_error(fit)
    asked = cli("predict", "-m", "tiny_cnn", *TARGET, code=2)
    single_error(asked, "no predictor for local · onnx · 1 thread(s) yet", "aiot predict fit")
    empty = cli.json("predict", "evaluate", *TARGET)
    assert empty["outcomes"] == [] and "no whole models" in empty["skipped"][0]
    cli("predict", "collect", "--threads", "0", code=2)
    cli("predict", "-m", "tiny_cnn", "-f", "nosuchformat", code=2)
    assert "Usage: aiot predict" in cli("predict").stdout  # no model, no command: the help


def test_runs_invalid_for_the_machines_moment_are_measured_again_once(cli):
    """A CV limit no run meets makes every run INVALID for a reason of the moment: each is
    measured once more at the end (--retries 1), and a second call retries none again."""
    collect = (*COLLECT[:COLLECT.index("--kernels")], "--kernels", "2", "--models", "none",
               *COLLECT[COLLECT.index("--min-runs"):-1], "threads=off,cv=0.000001", "--retries", "1")
    first = cli.json(*collect)
    assert first["measured"] == {"ok INVALID": 2}, first
    with open_store(Path(os.environ["AIOT_RESULTS_DIR"]), readonly=True) as store:
        records = store.query(sweep_id=first["sweep_id"])
    # a loaded box may fail a run's timing audit too: INVALID for what it is, not measured again
    moment = {r.model for r in records if transient(r)}
    assert moment and sum(first["retried"].values()) == len(moment), first
    assert len(records) == 2 + len(moment)
    shown = cli(*collect)
    assert "2 run(s), 2 done before" in shown.stderr and "measured again" not in shown.stderr
    cli(*collect[:-1], "-1", code=2)
