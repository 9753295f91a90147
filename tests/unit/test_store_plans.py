"""Every query a hot path makes is answered from an index (SQLite's own query plan says so),
and a store's pages are read in full only after an unclean stop, a foreign change or on demand."""

import os
import sqlite3
import subprocess
import sys

import pytest

from aiot.host.store import integrity, open_store
from aiot.host.labview.sources import _from_store
from aiot.host.store.compare import resolve_set
from aiot.host.store.damage import StoreDamaged
from aiot.host.store.queries import Filters
from aiot.host.store.store import Push


def _seed(store, n=30):
    ids = []
    for i in range(n):
        rec = store.begin("latency", {"model": "m"}, {}, sweep_id=f"night{i % 3}",
                          device=f"phone{i % 2}", model="m", format="onnx", threads=1 + i % 2)
        store.finish(rec.id, "ok", median_ms=1.0 + i, result={"stats_ms": {"median": 1.0 + i}})
        ids.append(rec.id)
    return ids


def _plans(store, action) -> dict[str, list[str]]:
    """Each statement ``action(store)`` ran, with its query plan's lines."""
    statements = []
    store._conn.set_trace_callback(statements.append)
    try:
        action(store)
    finally:
        store._conn.set_trace_callback(None)
    plans = {}
    for sql in statements:
        if sql.split()[0].upper() not in ("SELECT", "UPDATE", "DELETE", "INSERT"):
            continue
        conn = sqlite3.connect(store.path)
        try:
            plans[sql] = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]
        finally:
            conn.close()
    return plans


HOT = {
    "a run reads its own record": lambda s, ids: s.get(ids[5]),
    "a record by prefix": lambda s, ids: s.get(ids[5][:8]),
    "a run's record finished": lambda s, ids: s.finish(ids[5], "ok", median_ms=2.0),
    "a sweep's newest restart": lambda s, ids: s.latest_sweep("night1"),
    "a sweep's records": lambda s, ids: s.query(sweep_id="night1"),
    "list: the newest N": lambda s, ids: list(s.records(Filters(), newest_first=True, limit=51)),
    "list: a later page": lambda s, ids: list(s.records(Filters(), newest_first=True, limit=51,
                                                        offset=50)),
    "list: by device": lambda s, ids: list(s.records(Filters(device="phone1"), newest_first=True,
                                                     limit=51)),
    "list: a time range": lambda s, ids: list(s.records(
        Filters(since="2000-01-01T00:00:00+00:00", until="2999-01-01T00:00:00+00:00"),
        newest_first=True, limit=51)),
    "export: every record, streamed": lambda s, ids: list(s.records(Filters())),
    "compare: a sweep set": lambda s, ids: resolve_set("night1", s),
    "compare: a sweep prefix": lambda s, ids: s.sweep_ids("nig"),
    "compare: record ids": lambda s, ids: resolve_set(f"{ids[1][:6]},{ids[2][:6]}", s),
    "a campaign reaps what killed processes left": lambda s, ids: s.reap_stale(),
    "a cancelled sweep's pending records": lambda s, ids: s.fail_pending("stop", sweep_id="night1"),
    "preflight: the last push": lambda s, ids: s.last_push("phone1"),
    "check: the record count": lambda s, ids: s.count(),
    "lab view: a device's newest records": lambda s, ids: _from_store(s, "phone1"),
    "lab view: a running sweep's progress": lambda s, ids: (s.sweep_counts("night1"),
                                                            s.sweep_failures("night1", 10)),
    "lab view: recent sweeps": lambda s, ids: s.recent_sweeps(limit=15),
}


@pytest.mark.parametrize("name", list(HOT))
def test_hot_queries_never_scan_the_runs_table(tmp_path, name):
    with open_store(tmp_path) as store:
        ids = _seed(store)
        store.record_push(Push("phone1", "m", "onnx", "m", None, None, "0" * 64, "/tmp/m"))
        plans = _plans(store, lambda s: HOT[name](s, ids))
    assert plans, "the action ran no query"
    for sql, plan in plans.items():
        scans = [line for line in plan if line.startswith("SCAN") and "USING" not in line
                 and "(subquery" not in line]  # a subquery is bounded by its own LIMIT
        assert not scans, f"{name}: {sql} scans a whole table: {plan}"


def _checks(monkeypatch) -> list:
    """The full page checks that run from now on."""
    ran = []
    real = integrity.check_integrity
    monkeypatch.setattr(integrity, "check_integrity",
                        lambda *a, **k: (ran.append(a[1]), real(*a, **k))[1])
    return ran


def test_a_cleanly_closed_store_is_not_read_in_full_again(tmp_path, monkeypatch):
    with open_store(tmp_path) as store:
        _seed(store, 5)
    ran = _checks(monkeypatch)
    for readonly in (True, False, True):
        with open_store(tmp_path, readonly=readonly) as store:
            assert store.count() == 5
    assert ran == []


def test_a_store_changed_by_something_else_is_checked_and_named_damaged(tmp_path, monkeypatch):
    with open_store(tmp_path) as store:
        _seed(store, 400)
    path = tmp_path / "aiot.sqlite"
    size = path.stat().st_size
    with open(path, "r+b") as fh:  # same size, other bytes: a stray write
        fh.seek(size // 2)
        fh.write(b"\xde\xad\xbe\xef" * 4096)
    ran = _checks(monkeypatch)
    with pytest.raises(StoreDamaged, match="is damaged"):
        open_store(tmp_path, readonly=True)
    with pytest.raises(StoreDamaged, match="is damaged"):
        open_store(tmp_path)
    assert len(ran) == 2  # each open checked it: a failed check leaves no stamp


def test_a_truncated_store_is_named_at_open_without_a_full_read(tmp_path, monkeypatch):
    with open_store(tmp_path) as store:
        _seed(store, 400)
    path = tmp_path / "aiot.sqlite"
    os.truncate(path, path.stat().st_size // 2)
    ran = _checks(monkeypatch)
    monkeypatch.setattr(integrity, "why_check", lambda path: None)  # as if the stamp matched
    with pytest.raises(StoreDamaged, match="truncated"):
        open_store(tmp_path)
    assert ran == []


_KILLED = """
import os, sys
from pathlib import Path
from aiot.host.store import open_store
store = open_store(Path(sys.argv[1]))
store.finish(store.begin("latency", {}, {}).id, "ok")
os._exit(0)  # killed: the store is never closed, its log never folded into the file
"""


def test_a_store_left_by_a_killed_process_is_checked_at_the_next_open(tmp_path, monkeypatch):
    with open_store(tmp_path) as store:
        _seed(store, 3)
    subprocess.run([sys.executable, "-c", _KILLED, str(tmp_path)], check=True,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert (tmp_path / "aiot.sqlite-wal").stat().st_size > 0
    ran = _checks(monkeypatch)
    with open_store(tmp_path) as store:
        assert store.count() == 4
    assert len(ran) == 1
    with open_store(tmp_path, readonly=True) as store:  # closed cleanly since: no check
        assert store.count() == 4
    assert len(ran) == 1


def test_results_check_reads_every_page_on_demand(cli, monkeypatch):
    from pathlib import Path

    results = Path(os.environ["AIOT_RESULTS_DIR"])
    with open_store(results) as store:
        _seed(store, 3)
    ran = _checks(monkeypatch)
    done = cli("results", "check")
    assert "is whole: 3 records" in done.stderr and len(ran) == 1
    cli("results", "check", "--full")
    assert len(ran) == 2


def test_a_store_found_damaged_in_use_is_not_stamped_whole_at_close(tmp_path, monkeypatch):
    with open_store(tmp_path) as store:
        _seed(store, 3)
    store = open_store(tmp_path)
    monkeypatch.setattr(store, "_conn", _Failing(store._conn))
    with pytest.raises(StoreDamaged):
        store.count()
    store.close()  # a writing process's last connection: a clean close, yet no stamp
    assert not integrity.stamp_path(tmp_path / "aiot.sqlite").exists()
    assert integrity.why_check(tmp_path / "aiot.sqlite") == "never checked"


class _Failing:
    """A connection whose reads fail as SQLite's do on a damaged page."""

    def __init__(self, conn):
        self._real = conn

    def execute(self, sql, *args):
        if sql.startswith("SELECT"):
            raise sqlite3.DatabaseError("database disk image is malformed")
        return self._real.execute(sql, *args)

    def close(self):
        self._real.close()


@pytest.mark.parametrize("sweep", [None, "night1"])
def test_the_report_of_a_large_store_reads_facts_and_records_by_primary_key(tmp_path, monkeypatch,
                                                                           sweep):
    """A summarised report reads the compact facts table (a pass over ~100 bytes a record)
    and whole records only by primary key, never scanning ``runs``."""
    from aiot.host.report import scale

    monkeypatch.setattr(scale, "DETAIL_LIMIT", 5)
    with open_store(tmp_path) as store:
        _seed(store)
        plans = _plans(store, lambda s: scale.report_of(s, "results", sweep=sweep))
    lines = [line for plan in plans.values() for line in plan]
    assert any("run_facts" in line for line in lines)
    for sql, plan in plans.items():
        for line in plan:
            words = line.split()
            if words[0] == "SCAN" and words[1] == "runs":
                assert "COVERING INDEX" in line, f"{sql} reads every record: {plan}"
            if words[:2] == ["SEARCH", "runs"]:  # a record by its id, or a count from an index
                assert ("sqlite_autoindex_runs_1 (id=?)" in line
                        or "COUNT(*)" in sql and "COVERING INDEX" in line), f"{sql}: {plan}"
