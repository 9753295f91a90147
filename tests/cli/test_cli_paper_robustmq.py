"""``aiot paper robustmq`` on the command line: refusals before any work, a tiny grid end to
end (tiny_cnn, LSQ at two widths, a few digits) printing every table in the paper's shape,
and resuming after a real Ctrl-C."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

needs_stack = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("torch", "torchattacks", "sklearn")),
    reason="torch, torchattacks or scikit-learn is not installed")
TINY = ("paper", "robustmq", "--models", "tiny_cnn", "--methods", "lsq", "--bits", "2,8",
        "--dataset", "digits", "--limit", "8", "--corruptions", "gaussian_noise,brightness",
        "--severities", "1", "--frames", "2", "--epochs", "1", "--train-limit", "64")


@pytest.mark.parametrize(("args", "fragment"), [
    (("--methods", "lsq,nosuch"), "nosuch"),
    (("--bits", "3"), "3 bits is not one of RobustMQ's bit-widths"),
    (("--suites", "attack,speed"), "unknown suite(s) speed"),
    (("--dataset", "photos"), "the photos have no labels"),
    (("--models", "nosuchmodel"), "nosuchmodel"),
    (("--corruptions", "rain"), "rain"),
])
def test_bad_options_are_refused_in_one_line_before_any_work(cli, args, fragment):
    res = cli("paper", "robustmq", "--models", "tiny_cnn", *args, code=2)
    assert fragment in res.stderr and "Traceback" not in res.stderr


@pytest.mark.slow
@needs_stack
def test_a_tiny_grid_prints_every_table_and_resumes_without_measuring_again(cli):
    data = cli.json(*TINY)
    tables = {t["table"]: t for t in data["tables"]}
    assert sorted(tables) == list(range(1, 11)) and data["failures"] == []
    for number in (1, 2, 3, 4, 5, 7, 9):
        table = tables[number]
        assert table["columns"] == ["2", "8", "32"]
        (row,) = table["rows"]
        assert (row["model"], row["method"], row["arch"]) == ("tiny_cnn", "LSQ", None)
        assert all(row["cells"][c] is not None for c in table["columns"]), (number, row)
        assert len(row["cells"]["2"]) == len(table["fields"])
    clean = tables[1]["rows"][0]["cells"]
    wcar = tables[2]["rows"][0]["cells"]
    assert all(0 <= wcar[c][0] <= clean[c][0] <= 100 for c in ("2", "8", "32"))
    six = tables[6]
    assert six["columns"] == ["ACC", "gaussian_noise", "brightness", "mNR", "NCI"]
    assert [(r["method"], r["bits"]) for r in six["rows"]] == [("FP", 32), ("LSQ", 2), ("LSQ", 8)]
    assert tables[10]["columns"][0] == "ACC" and tables[10]["columns"][-2:] == ["Mean", "std"]
    assert tables[10]["paper"]["rows"][0]["values"][0] == 71.06  # the paper's ResNet18 FP beside
    assert {t["claim"].split(" (")[0] for t in data["trends"]} == {
        "adversarial robustness", "natural robustness", "systematic robustness falls as bits fall"}
    records = _grid_records(data["sweep"])
    assert len(records) == 3 * 3 and {r.status for r in records} == {"ok"}

    again = cli(*TINY)  # every job has its ok record: nothing runs again
    assert f"resumed RobustMQ sweep {data['sweep']}: 9 runs already done" in again.stderr
    for title in ("Table 1: Clean accuracy", "Table 2: Worst-case adversarial robustness WCAR",
                  "Table 3: FGSM", "Table 4: PGD", "Table 5: Natural corruptions", "Table 7: Perturbation",
                  "Table 9: Systematic noise", "Table 10 in the paper (ResNet18, ImageNet)",
                  "paper ResNet18", "The paper's headline trends"):
        assert title in again.stdout, title
    assert len(_grid_records(data["sweep"])) == 9


@pytest.mark.slow
@needs_stack
def test_ctrl_c_keeps_finished_jobs_and_the_same_command_resumes_the_rest(cli):
    args = (*TINY, "--suites", "attack,corrupt")
    proc = subprocess.Popen([sys.executable, "-m", "aiot", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not _ok_suite_records():
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        assert _ok_suite_records(), "no job finished in time"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0 and "Traceback" not in stderr
    done_before = {r.id for r in _ok_suite_records()}
    assert 1 <= len(done_before) < 6

    data = cli.json(*args)
    sweep = data["sweep"]
    records = _grid_records(sweep)
    ok = [r for r in records if r.status == "ok"]
    assert len(ok) == 6 and done_before <= {r.id for r in ok}  # the finished jobs were kept
    assert all(r.status != "pending" for r in records)
    tables = {t["table"] for t in data["tables"]}
    assert tables == {1, 2, 3, 4, 5, 6, 7, 8}  # no system noise asked for


def _grid_records(sweep_id: str) -> list:
    from aiot.host.store.store import open_store

    with open_store(Path(os.environ["AIOT_RESULTS_DIR"])) as store:
        return store.query(sweep_id=sweep_id)


def _ok_suite_records() -> list:
    from aiot.host.store.store import open_store

    results = Path(os.environ["AIOT_RESULTS_DIR"])
    if not results.exists():
        return []
    with open_store(results) as store:
        return [r for r in store.query(status="ok") if r.kind.startswith("robust-")]
