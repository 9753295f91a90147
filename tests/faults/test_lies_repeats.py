"""What still lied or repeated itself (second round): a gate that passed having compared
nothing, a rerun that stored every skip again, a ``.dab`` of random bytes described with an
empty table, an inventory of the wrong shape, an empty ``HOME``, file names with commas or
escape sequences, ``.npz`` members that are pickles or compressed bombs, and an input shape
too large to make.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.faults.conftest import count_records, one_line_error

FAST = ("--min-runs", "3", "--min-s", "0", "--warmup-min-s", "0", "--cooldown-max-s", "0")


# -- results compare: a gate that compared nothing did not pass --------------------------------


def _store_runs(sweep: str, threads: list[int], sha: str = "ab" * 32) -> None:
    """Ok latency records of tiny_cnn/onnx on ``local``, one per thread count, in ``sweep``."""
    from aiot.device_agent.stats import summarize_ms
    from aiot.host.store import open_store

    with open_store(Path(os.environ["AIOT_RESULTS_DIR"])) as store:
        for n in threads:
            spec = {"device": "local", "model": "tiny_cnn", "format": "onnx", "threads": n}
            record = store.begin("latency", spec, {"device": {"cpu_model": "x86", "cores": 8}},
                                 sweep_id=sweep, device="local", model="tiny_cnn", format="onnx",
                                 threads=n)
            stats = summarize_ms([int(10e6 + i * 1000) for i in range(50)])
            store.finish(record.id, "ok", result={"stats_ms": stats}, artifact_sha256=sha,
                         size_bytes=4096, median_ms=stats["median"], p90_ms=stats["p90"],
                         validity="VALID")


@pytest.mark.fault("results compare passes with A's runs missing from B")
def test_compare_fails_when_runs_of_a_are_missing(cli, fault):
    _store_runs("base", [1, 2, 4])
    _store_runs("cand", [1])
    result = cli("results", "compare", "base", "cand", code=3)
    assert "gate passed" not in result.stderr
    assert "B is incomplete, 2 run(s) of A missing from B" in result.stderr
    assert "tiny_cnn · onnx · 4t @ local" in result.stderr  # the missing runs are named
    data = json.loads(cli("results", "compare", "base", "cand", "--json", code=3).stdout)
    assert not data["passed"] and len(data["missing"]) == 2
    cli("results", "compare", "base", "cand", "--allow-missing")  # asked for: B is a part of A


@pytest.mark.fault("results compare passes with nothing comparable")
def test_compare_fails_when_nothing_is_comparable(cli, fault):
    _store_runs("base", [1])
    _store_runs("cand", [1], sha="cd" * 32)  # another artifact: not comparable
    result = cli("results", "compare", "base", "cand", code=3)
    assert "nothing was compared" in result.stderr and "gate passed" not in result.stderr
    _store_runs("other", [2])
    cli("results", "compare", "base", "other", code=3)  # nothing shares a key at all


# -- a rerun of a sweep ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.fault("sweep rerun records every skipped run again")
def test_sweep_rerun_does_not_record_skips_again(cli, fault):
    too_many = str(max(os.cpu_count() or 1, 8) * 2)  # more threads than the host has cores
    sweep = ("sweep", "-m", "tiny_cnn", "-f", "onnx", "--threads", f"1,{too_many}", *FAST)
    cli(*sweep)
    first = count_records()
    statuses = sorted(r["status"] for r in cli.json("results", "list"))
    assert statuses == ["ok", "skipped"], statuses
    for _ in range(2):
        rerun = cli(*sweep)
        assert count_records() == first, rerun.stderr  # the same skip is not stored again
    fault.records_lost(first, count_records())
