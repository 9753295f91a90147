"""A busy machine, honestly: the limits a verdict used are stored with every record and shown,
``--validity`` sets them per command, a run INVALID for load says what was busy and what to do,
and a run judged under looser limits is never shown as a plain VALID (issue 39, item 2)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytest.importorskip("onnxruntime")

FAST = ("--min-runs", "5", "--min-s", "0.3", "--warmup-min-s", "0", "--cooldown-max-s", "0")


@pytest.fixture
def spinners():
    """Two real processes that keep two CPUs busy while a run is timed."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    yield [p.pid for p in procs]
    for p in procs:
        p.kill()
        p.wait()


def test_a_busy_run_names_the_busy_processes_and_the_way_out(cli, spinners):
    result = cli("sweep", "-m", "tiny_cnn", "-f", "onnx", "--threads", "1", *FAST,
                 "--validity", "load=0.5")
    (record,) = cli.json("results", "list")
    assert record["validity"] == "INVALID"
    reason = next(r for r in record["result"]["validity"]["reasons"] if r.startswith("device busy"))
    assert "busiest: " in reason and "--validity load=" in reason and "close what runs" in reason
    assert record["result"]["validity"]["limits"]["load"] == 0.5
    words = " ".join(result.stdout.split())
    assert "device busy: other processes kept" in words and "To fix:" in words


def test_relaxed_limits_are_stored_shown_and_never_a_plain_valid(cli):
    result = cli("run", "-m", "tiny_cnn", "-f", "onnx", *FAST, "--validity", "load=50")
    (record,) = cli.json("results", "list")
    validity = record["result"]["validity"]
    assert record["validity"] == "VALID" and validity["limits"]["load"] == 50.0
    # The suite's AIOT_VALIDITY turns cv, samples, tail and speed off; --validity sets load on top.
    assert validity["limits"]["cv"] is None and validity["limits"]["tail"] is None
    # The reference kernel's readings on each side of the timed loop travel with the run.
    speed = record["result"]["speed"]
    assert speed["kernel"].startswith("numpy-muladd") and speed["before_ms"] > 0 < speed["after_ms"]
    table = " ".join(re.sub(r"[│┃┏┓┗┛┡┩└┘┬┴┼━─╇╋┳┻]", " ", result.stdout).split())
    assert "VALID (relaxed)" in table
    assert (
        "validity judged with cv off, load≤50, samples off, tail off, speed off (not the defaults") in table
    shown = " ".join(cli("results", "show", record["id"]).stdout.split())
    assert "VALID (relaxed: cv off, load≤50, samples off, tail off, speed off)" in shown
    assert "validity limits" in shown


def test_a_bad_validity_option_is_one_line_before_any_run(cli):
    result = cli("run", "-m", "tiny_cnn", "-f", "onnx", *FAST, "--validity", "lod=2", code=2)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "--validity: unknown check 'lod'" in errors[0], result.stderr
    assert cli.json("results", "list") == []
