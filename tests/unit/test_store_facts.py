"""Each record's facts (``run_facts``, what the report of a large store reads): written with
the record by every write path, removed with it, built once for an older store, and checked
against the records (a store whose facts disagree never gives a wrong report)."""

import json
import os
import sqlite3

import pytest

from aiot.core.errors import StoreError
from aiot.host.report import scale
from aiot.host.store import facts, identity, open_store
from aiot.host.store.importing import import_records
from aiot.host.store.prune import prune
from aiot.host.store.recover import recover_store
from aiot.host.store.schema import MIGRATIONS
from tests.unit.test_report import add


def _facts(store) -> dict[str, tuple]:
    """id → (status, latency, load, validity, key, device state) of every fact, in order."""
    texts = facts.texts(store)
    rows = store._read("SELECT id, status, latency_ms, load_ms, validity, key_id, state "
                       "FROM run_facts ORDER BY seq")
    return {r[0]: (r[1], r[2], r[3], r[4], facts.key_of(texts[r[5]]), r[6]) for r in rows}


def _agree(store) -> None:
    assert facts.problem(store._conn) is None
    assert facts.differences(store._conn) == 0


def test_a_run_begun_and_finished_has_its_facts(tmp_path):
    with open_store(tmp_path) as store:
        rec = store.begin("latency", {"model": "m", "binarize": "xnor", "via": "app",
                                      "options": {"quant": "int8"}}, {"device": {"name": "p"}},
                          device="p", model="m", format="tflite", threads=4)
        assert _facts(store)[rec.id][:4] == ("pending", None, None, None)
        store.finish(rec.id, "ok", result={"stats_ms": {"mean": 2.5}}, median_ms=2.0,
                     load_ms=7.0, validity="INVALID")
        status, ms, load, validity, key, _state = _facts(store)[rec.id]
        stored = store.get(rec.id)
        assert (status, ms, load, validity) == ("ok", identity.latency_ms(stored), 7.0, "INVALID")
        assert key == identity.key(stored) and key.configuration.via == "app"
        mean_only = add(store, result={"stats_ms": {"mean": 4.0}}, temp=51.0)
        store._conn.execute("UPDATE runs SET median_ms = NULL WHERE id = ?", (mean_only,))
        assert _facts(store)[mean_only][1] == 4.0  # no median: the mean, as identity says
        assert json.loads(_facts(store)[mean_only][5])[1] == 51.0  # its telemetry
        failed = add(store, status="failed", reason="crash")
        assert _facts(store)[failed][:2] == ("failed", None)
        _agree(store)


def test_failing_pending_runs_updates_their_facts(tmp_path):
    with open_store(tmp_path) as store:
        rec = store.begin("latency", {}, {}, sweep_id="s")
        store.fail_pending("stopped", sweep_id="s")
        assert _facts(store)[rec.id][0] == "failed"
        _agree(store)


def test_import_and_merge_write_facts_and_prune_removes_them(tmp_path):
    with open_store(tmp_path / "a") as store:
        ids = [add(store, threads=t, median=10.0 / t) for t in (1, 2, 4)]
        ids.append(add(store, status="failed"))
        export = tmp_path / "a.json"
        export.write_text(json.dumps([r.to_dict() for r in store.query()]))
    for source in (export, tmp_path / "a" / "aiot.sqlite"):
        into = tmp_path / f"into-{source.suffix}"
        with open_store(into) as store:
            import_records(store, source)
            import_records(store, source)  # again: nothing added, facts unchanged
            assert list(_facts(store)) == ids
            _agree(store)
            summary = prune(store, keep=1)
            assert summary.pruned
            left = {r[0] for r in store._read("SELECT id FROM runs")}
            assert set(_facts(store)) == left and len(left) < len(ids)
            _agree(store)


def test_a_recovered_store_has_the_facts_of_its_records(tmp_path):
    with open_store(tmp_path) as store:
        for i in range(300):
            add(store, threads=1 + i % 3, median=5.0 + i, load=1.0)
    path = tmp_path / "aiot.sqlite"
    os.truncate(path, path.stat().st_size * 2 // 3)
    done = recover_store(tmp_path)
    assert 0 < done.recovered < 300
    with open_store(tmp_path) as store:
        assert len(_facts(store)) == done.recovered == store.count()
        _agree(store)


def _v5_store(folder, n: int) -> list[str]:
    """A store as aiot wrote it before the facts (schema v5) with ``n`` records."""
    conn = sqlite3.connect(folder / "aiot.sqlite", isolation_level=None)
    conn.execute("BEGIN")
    for version in range(5):
        MIGRATIONS[version](conn)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '5')")
    ids = []
    for i in range(n):
        rid = f"{i:032x}"[::-1]  # rowid order is not id order
        conn.execute(
            "INSERT INTO runs (id, kind, status, created_at, device, model, format, threads, "
            "median_ms, load_ms, validity, spec_json, result_json, provenance_json) VALUES "
            "(?, 'latency', 'ok', ?, 'p', 'm', 'onnx', ?, ?, 2.0, 'VALID', ?, ?, ?)",
            (rid, f"2026-01-{1 + i % 28:02d}T00:00:00+00:00", 1 + i % 2, 1.0 + i,
             json.dumps({"model": "m"}), json.dumps({"stats_ms": {"mean": 1.0}}),
             json.dumps({"aiot_version": "0.1.0"})))
        ids.append(rid)
    conn.execute("COMMIT")
    conn.close()
    return ids


def test_an_older_store_gets_its_facts_built_once_in_record_order(tmp_path, caplog):
    ids = _v5_store(tmp_path, 50)
    with caplog.at_level("WARNING", logger="aiot.host.store.facts"):
        with open_store(tmp_path) as store:
            assert list(_facts(store)) == ids
            _agree(store)
    assert "making the report's facts of 50 records" in caplog.text
    caplog.clear()
    with open_store(tmp_path) as store:  # once only
        assert store.count() == 50
    assert "making" not in caplog.text


def test_facts_that_disagree_are_refused_by_the_report_and_made_again_by_check(tmp_path, cli,
                                                                             monkeypatch):
    monkeypatch.setattr(scale, "DETAIL_LIMIT", 3)
    results = tmp_path / "results"
    with open_store(results) as store:
        for t in (1, 2, 4, 8):
            add(store, threads=t, median=10.0 / t)
    conn = sqlite3.connect(results / "aiot.sqlite")
    conn.execute("DELETE FROM run_facts WHERE seq = 2")  # a change aiot did not make
    conn.commit()
    conn.close()
    with open_store(results, readonly=True) as store:
        with pytest.raises(StoreError, match="facts its report reads disagree.*3 facts for 4"):
            scale.report_of(store, "results")
    said = cli("--results-dir", str(results), "report", "-o", str(tmp_path / "out"), code=1)
    assert "disagree" in said.stderr and "aiot results check" in said.stderr
    assert said.stderr.startswith("error:") and "Traceback" not in said.stderr
    done = cli("--results-dir", str(results), "results", "check")
    assert "made again" in done.stderr + done.stdout
    with open_store(results, readonly=True) as store:
        _agree(store)
        assert scale.report_of(store, "results").tally.count == 4


def test_a_changed_fact_is_found_by_a_full_check(tmp_path):
    with open_store(tmp_path) as store:
        rid = add(store, median=3.0)
        store._conn.execute("UPDATE run_facts SET latency_ms = 99 WHERE id = ?", (rid,))
        assert facts.problem(store._conn) is None  # counts agree: only a full check sees it
        assert store.verify() == 1  # made again
        assert _facts(store)[rid][1] == 3.0
        assert store.verify() is None


def test_facts_whose_triggers_were_dropped_are_made_again_whole(tmp_path):
    with open_store(tmp_path) as store:
        rid = add(store, median=3.0)
        store._conn.execute("DROP VIEW run_facts_new")
        store._conn.execute("DROP TRIGGER runs_facts_update")
        assert "triggers" in facts.problem(store._conn)
        assert store.verify() == 1
        _agree(store)
        store.finish(rid, "failed", reason="again")  # kept again
        assert _facts(store)[rid][0] == "failed"
