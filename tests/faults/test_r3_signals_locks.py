"""Round 3: signals, locks and damage under a running sweep. A closed terminal (SIGHUP), a
store another process holds locked, a store disk that fills and a store file truncated
while a real ``aiot sweep`` child process measures: no record is left ``pending``, no
finished measurement is silently lost, and each failure says its true cause in one line.
``aiot results recover`` gets back every record whose pages survive a truncation.

The sweeps measure the ``null`` test format (a run of a few seconds, no conversion).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.faults.conftest import count_records, one_line_error
from tests.faults.test_disk_faults import small_disk  # noqa: F401 - a fixture used below


def _sweep(threads: str, seconds: float) -> tuple[str, ...]:
    """A sweep of one null run per thread count, each measuring about ``seconds``."""
    return ("sweep", "-m", "tiny_cnn", "-f", "null", "-d", "local", "--threads", threads,
            "--min-runs", "3", "--min-s", str(seconds), "--max-s", str(seconds),
            "--warmup-min-s", "0", "--cooldown-max-s", "0")


def _results() -> Path:
    return Path(os.environ["AIOT_RESULTS_DIR"])


def _store() -> Path:
    return _results() / "aiot.sqlite"


def _start(*args: str, preexec_fn=None, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "aiot", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **env},
                            preexec_fn=preexec_fn)


def _default_sighup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _rows(sql: str = "SELECT id, status, reason FROM runs ORDER BY rowid") -> list[tuple]:
    """The store's rows read with plain sqlite3 (never the code under test)."""
    conn = sqlite3.connect(f"file:{_store()}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _wait_for(proc: subprocess.Popen, pending: int = 1, ok: int = 0, timeout: float = 120.0) -> None:
    """Until the store has at least ``pending`` pending and ``ok`` ok records."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            statuses = [status for _id, status, _why in _rows()]
            if statuses.count("pending") >= pending and statuses.count("ok") >= ok:
                return
        except sqlite3.Error:
            pass  # not created yet
        time.sleep(0.05)
    proc.kill()
    pytest.fail("the sweep never got that far")


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error: ")]


def _seed(n: int) -> list[str]:
    """``n`` finished records of assorted sizes (most with overflow pages), written through
    the store and checkpointed into the file when it closes."""
    from aiot.host.store import open_store

    ids = []
    with open_store(_results()) as store:
        for i in range(n):
            rec = store.begin("latency", {"model": "tiny_cnn", "i": i},
                              {"pad": "p" * (300 + 400 * (i % 13))}, sweep_id="seeded",
                              device="local", model="tiny_cnn", format="null", threads=1)
            store.finish(rec.id, "ok", median_ms=1.0 + i, result={"pad": "r" * (97 * i)})
            ids.append(rec.id)
    return ids


# -- a closed terminal ----------------------------------------------------------------------------

@pytest.mark.fault("sweep hung up (SIGHUP)")
def test_a_hung_up_sweep_marks_its_run_failed(fault):
    # The sweep's terminal may hang up even where the suite itself runs under nohup (whose
    # ignored SIGHUP aiot keeps, as it must): this sweep starts with SIGHUP's default.
    proc = _start(*_sweep("1,2", 30), preexec_fn=_default_sighup)
    _wait_for(proc)
    before = count_records()
    proc.send_signal(signal.SIGHUP)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGHUP, err
    assert "Traceback" not in err
    rows = _rows()
    assert rows and all(status != "pending" for _id, status, _why in rows), rows
    assert [why for _id, status, why in rows if status == "failed"] == ["hangup (SIGHUP)"], rows
    fault.records_lost(before, count_records())


@pytest.mark.fault("sweep quit (SIGQUIT, Ctrl-\\)")
def test_a_quit_sweep_marks_its_run_failed_instead_of_dumping_core(fault):
    proc = _start(*_sweep("1,2", 30))
    _wait_for(proc)
    before = count_records()
    proc.send_signal(signal.SIGQUIT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGQUIT, err
    assert "Traceback" not in err and "core dumped" not in err
    rows = _rows()
    assert [why for _id, status, why in rows if status == "failed"] == ["quit (SIGQUIT)"], rows
    assert all(status != "pending" for _id, status, _why in rows), rows
    fault.records_lost(before, count_records())


@pytest.mark.fault("nohup sweep hung up (SIGHUP ignored)")
def test_a_nohup_sweep_outlives_its_terminal(fault):
    proc = subprocess.Popen([sys.executable, "-m", "aiot", *_sweep("1", 2)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    _wait_for(proc)
    proc.send_signal(signal.SIGHUP)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert [status for _id, status, _why in _rows()] == ["ok"]
    fault.records_lost(1, count_records())


# -- another process holding the store's write lock ---------------------------------------------

_HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


def _hold_lock(seconds: float) -> subprocess.Popen:
    """Another process (plain sqlite3) holding the store's write lock for ``seconds``."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(_store()), str(seconds)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


@pytest.mark.fault("store locked by another process for seconds")
def test_a_sweep_waits_for_a_locked_store_and_stores_everything(fault):
    proc = _start(*_sweep("1,2", 2), AIOT_STORE_WAIT_S="60")
    _wait_for(proc)
    # held past the sweep's own length (two runs of ~2 s): whenever its next write comes, it
    # finds the lock taken for longer than one try (busy.LOCK_TRY_S) and says so once
    holder = _hold_lock(12)
    _out, err = proc.communicate(timeout=180)
    holder.communicate(timeout=30)
    assert proc.returncode == 0, err
    said = " ".join(err.split())  # the terminal wraps long lines
    assert said.count("is busy") == 1, err
    assert re.search(rf"is busy: pid {holder.pid} \(.*\) holds its write lock; aiot waits", said), err
    rows = _rows()
    assert [status for _id, status, _why in rows] == ["ok", "ok"], rows
    fault.records_lost(2, count_records())


@pytest.mark.fault("store locked past the wait")
def test_a_store_locked_past_the_wait_keeps_the_measurement(cli, fault):
    proc = _start("--store-wait", "2", *_sweep("1", 2))  # the option, as a user gives it
    _wait_for(proc)
    (run_id,) = [i for i, status, _why in _rows() if status == "pending"]
    holder = _hold_lock(12)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    assert len(_errors(err)) == 1, err
    said = " ".join(err.split())
    assert re.search(rf"error: .* is locked by another process: pid {holder.pid} ", said), err
    assert "space" not in err, err  # a lock is not a full disk
    kept = _results() / "unstored" / f"{run_id}.json"
    assert kept.is_file() and f"keptin{kept}" in "".join(err.split()), err
    holder.kill()  # the lock is free again
    holder.communicate(timeout=30)
    cli(*_sweep("1", 2))  # the same sweep again: the kept run is stored, not measured again
    rows = _rows("SELECT id, status, median_ms FROM runs")
    assert [(i, s) for i, s, _m in rows] == [(run_id, "ok")] and rows[0][2] > 0, rows
    assert not kept.exists()
    fault.records_lost(1, count_records())


@pytest.mark.fault("sweep terminated while the store is locked")
def test_a_sweep_terminated_on_a_locked_store_keeps_its_failed_run(cli, fault):
    proc = _start(*_sweep("1", 30), AIOT_STORE_WAIT_S="3")
    _wait_for(proc)
    (run_id,) = [i for i, status, _why in _rows() if status == "pending"]
    holder = _hold_lock(60)
    try:
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=120)
        took = time.monotonic() - sent
    finally:
        holder.kill()
        holder.communicate(timeout=30)
    assert proc.returncode == 143 and "Traceback" not in err, err
    assert took < 20, took  # the clean-up gave up on the lock within seconds
    assert (_results() / "unstored" / f"{run_id}.json").is_file()
    cli(*_sweep("1", 0))  # the next sweep stores what the terminated one kept
    rows = [row for row in _rows() if row[0] == run_id]
    assert rows == [(run_id, "failed", "terminated (SIGTERM)")], rows
    fault.records_lost(2, count_records())


@pytest.mark.fault("store wait set to nonsense")
@pytest.mark.parametrize("value", ["soon", "-1", "inf", "nan"])
def test_a_nonsense_store_wait_is_one_line(cli, fault, monkeypatch, value):
    monkeypatch.setenv("AIOT_STORE_WAIT_S", value)
    result = cli("results", "list", code=2)
    one_line_error(result, "AIOT_STORE_WAIT_S", code=2)


# -- the store's disk fills mid-sweep ------------------------------------------------------------

@pytest.mark.fault("store disk full mid-sweep")
def test_a_store_disk_filling_mid_sweep_leaves_no_pending_record(cli, fault, small_disk, monkeypatch):  # noqa: F811
    disk = small_disk("4m")
    monkeypatch.setenv("AIOT_RESULTS_DIR", str(disk.path / "results"))
    proc = _start(*_sweep("1,2,3", 2))
    _wait_for(proc, pending=1, ok=1)
    disk.fill()
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert len(_errors(err)) == 1, err
    said = " ".join(err.split())
    assert "No space left on device (ENOSPC)" in said, err
    rows = _rows()
    stuck = [row for row in rows if row[1] == "pending"]
    if stuck:  # not even "failed" fitted: the next sweep marks it, once there is room
        assert "stays pending until the next" in said, err
        disk.free()
        cli(*_sweep("1", 0))
        rows = [row for row in _rows() if row[0] in {i for i, _s, _w in rows}]
    assert all(status != "pending" for _id, status, _why in rows), rows
    failed = [why for _id, status, why in rows if status == "failed"]
    assert failed and all("No space left on device (ENOSPC)" in why for why in failed), rows
    fault.records_lost(len(rows), count_records())


# -- the store file truncated under a running sweep ----------------------------------------------

def _surviving(intact: Path, pages: int, logged: frozenset = frozenset()) -> set[str]:
    """Ids of the records whose leaf page and overflow pages all lie in the first ``pages``
    pages or in the log (``logged``), from SQLite's own page map (``dbstat``) of the intact
    store: what a truncation to that many pages cannot have destroyed."""
    conn = sqlite3.connect(intact)
    try:
        stats = conn.execute("SELECT path, pageno, pagetype, ncell FROM dbstat WHERE name = 'runs'").fetchall()
        ids = [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY rowid")]
    finally:
        conn.close()
    overflow = [(path, page) for path, page, kind, _n in stats if kind == "overflow"]
    leaves = sorted((path, page, cells) for path, page, kind, cells in stats if kind == "leaf")
    survivors, rowids = set(), iter(ids)  # leaves in key order hold the rowids in order
    for path, page, cells in leaves:
        for cell in range(cells):
            record = next(rowids)
            chain = [p for where, p in overflow if where.startswith(f"{path}{cell:03x}+")]
            if all(p <= pages or p in logged for p in (page, *chain)):
                survivors.add(record)
    assert next(rowids, None) is None
    return survivors


@pytest.mark.fault("store truncated under a running sweep")
def test_a_store_truncated_under_a_sweep_is_named_at_the_next_write(cli, fault, tmp_path):
    _seed(30)
    proc = _start(*_sweep("1,2,3,4", 3))
    _wait_for(proc, pending=1, ok=31)
    intact = tmp_path / "intact.sqlite"
    shutil.copy(_store(), intact)  # the seeded records: checkpointed, in the file
    size = _store().stat().st_size
    os.truncate(_store(), size // 2)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert len(_errors(err)) == 1, err
    said = " ".join(err.split())
    assert "was truncated by something other than aiot" in said, err
    assert "nothing was written" not in err
    written = int(re.search(r"had stored (\d+) records? in it", said).group(1))
    assert written >= 2, err  # the ok run and the one in flight, at least
    kept = sorted((_results() / "unstored").glob("*.json"))  # the run in flight, finished
    assert len(kept) <= 1 and ("is kept in" in said) == bool(kept), err
    survivors = _surviving(intact, size // 2 // 4096)
    cli("results", "recover")
    rows = _rows()
    recovered = {row[0] for row in rows}
    assert survivors <= recovered, (len(survivors), len(recovered))
    for path in kept:  # recover wrote the run that finished after the damage into the new store
        assert (path.stem, "ok", None) in rows and not path.exists(), rows
    fault.records_lost(len(survivors), len(survivors & recovered))


@pytest.mark.fault("truncated store recovered")
@pytest.mark.parametrize("keep", [0.25, 0.5, 0.75, 0.9])
def test_recover_gets_back_every_record_whose_pages_survive(cli, fault, tmp_path, keep):
    ids = _seed(60)
    intact = tmp_path / "intact.sqlite"
    shutil.copy(_store(), intact)
    pages = int(_store().stat().st_size // 4096 * keep)
    os.truncate(_store(), pages * 4096)
    survivors = _surviving(intact, pages)
    assert 0 < len(survivors) < len(ids)
    result = cli("results", "recover")
    recovered = {row[0] for row in _rows()}
    assert survivors <= recovered, (len(survivors), len(recovered))
    assert recovered <= set(ids)  # nothing made up
    assert f"recovered {len(recovered)}" in result.stderr
    fault.records_lost(len(survivors), len(survivors & recovered))


@pytest.mark.fault("truncated store with its log recovered")
def test_recover_reads_the_pages_in_the_log_of_a_truncated_store(cli, fault, tmp_path, monkeypatch):
    """A sweep killed with records still in the log (``-wal``), then the file truncated: the
    records whose pages are in the log or the file's first part come back."""
    from aiot.host.store import open_store

    ids = _seed(20)
    store = open_store(_results())  # held open: what it writes stays in the log
    try:
        ids += [store.begin("latency", {"i": i}, {"pad": "q" * 900 * i}).id for i in range(12)]
        crashed, intact = tmp_path / "crashed", tmp_path / "intact"
        for folder in (crashed, intact):  # the files as a SIGKILL would leave them
            folder.mkdir()
            for tail in ("", "-wal"):
                shutil.copy(_store().with_name(_store().name + tail), folder / f"aiot.sqlite{tail}")
    finally:
        store.close()
    log = (crashed / "aiot.sqlite-wal").read_bytes()
    logged = frozenset(int.from_bytes(log[at:at + 4], "big") for at in range(32, len(log) - 4119, 4120))
    pages = (crashed / "aiot.sqlite").stat().st_size // 4096 // 2
    os.truncate(crashed / "aiot.sqlite", pages * 4096)
    survivors = _surviving(intact / "aiot.sqlite", pages, logged)
    assert 0 < len(survivors) < len(ids)
    monkeypatch.setenv("AIOT_RESULTS_DIR", str(crashed))
    cli("results", "recover")
    recovered = {row[0] for row in _rows()}
    assert survivors <= recovered <= set(ids), (len(survivors), len(recovered))
    fault.records_lost(len(survivors), len(survivors & recovered))
