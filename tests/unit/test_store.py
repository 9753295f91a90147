import sqlite3

import pytest

from aiot.core.errors import StoreError
from aiot.host.store import open_store
from aiot.host.store.schema import SCHEMA_VERSION


def _begin(store, **cols):
    return store.begin("latency", {"model": "m"}, {"aiot_version": "x"}, device="local", model="m",
                       format="onnx", threads=1, **cols)


def test_pending_then_ok_round_trip(tmp_path):
    with open_store(tmp_path) as store:
        rec = _begin(store, sweep_id="s1")
        assert store.get(rec.id).status == "pending"
        store.finish(rec.id, "ok", result={"stats_ms": {"median": 1.5}}, median_ms=1.5, accuracy=0.9)
        got = store.get(rec.id[:6])
    assert got.status == "ok" and got.median_ms == 1.5 and got.accuracy == 0.9
    assert got.result == {"stats_ms": {"median": 1.5}} and got.spec == {"model": "m"}
    assert got.finished_at is not None


def test_finished_at_has_sub_second_precision(tmp_path):
    from datetime import datetime, timezone

    with open_store(tmp_path) as store:
        rec = _begin(store)
        before = datetime.now(timezone.utc)
        store.finish(rec.id, "ok")
        after = datetime.now(timezone.utc)
        finished = datetime.fromisoformat(store.get(rec.id).finished_at)
    # Microseconds are kept, so this brackets the write instead of rounding it to a second.
    assert before <= finished <= after


def test_query_filters_and_limit(tmp_path):
    with open_store(tmp_path) as store:
        ids = [_begin(store, sweep_id="a" if i < 3 else "b").id for i in range(5)]
        store.finish(ids[0], "failed", reason="boom")
        assert [r.id for r in store.query(sweep_id="a")] == ids[:3]
        assert [r.id for r in store.query(status="failed")] == [ids[0]]
        assert [r.id for r in store.query(limit=2)] == ids[3:]


def test_fail_pending_marks_only_that_sweep(tmp_path):
    with open_store(tmp_path) as store:
        a, b = _begin(store, sweep_id="a"), _begin(store, sweep_id="b")
        assert store.fail_pending("interrupted by user", sweep_id="a") == 1
        assert store.get(a.id).status == "failed" and store.get(a.id).reason == "interrupted by user"
        assert store.get(b.id).status == "pending"


def test_schema_version_is_recorded_and_reopen_keeps_data(tmp_path):
    with open_store(tmp_path) as store:
        rec_id = _begin(store).id
    conn = sqlite3.connect(tmp_path / "aiot.sqlite")
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    conn.close()
    with open_store(tmp_path) as store:
        assert store.get(rec_id).model == "m"


def test_newer_schema_is_refused(tmp_path):
    open_store(tmp_path).close()
    conn = sqlite3.connect(tmp_path / "aiot.sqlite")
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="schema v99"):
        open_store(tmp_path)


def test_not_a_database_is_a_clear_error(tmp_path):
    (tmp_path / "aiot.sqlite").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not an aiot result store"):
        open_store(tmp_path)


def test_unknown_and_ambiguous_ids(tmp_path):
    with open_store(tmp_path) as store:
        with pytest.raises(StoreError, match="too short"):
            store.get("ab")
        with pytest.raises(StoreError, match="no record"):
            store.get("ffffffff")


def test_finish_rejects_bad_status_and_columns(tmp_path):
    with open_store(tmp_path) as store:
        rec = _begin(store)
        with pytest.raises(ValueError):
            store.finish(rec.id, "pending")
        with pytest.raises(ValueError):
            store.finish(rec.id, "ok", not_a_column=1)
        assert store.get(rec.id).status == "pending"


def test_a_v1_store_is_migrated_in_place_keeping_its_runs(tmp_path):
    import json
    import sqlite3

    from aiot.host.store.schema import MIGRATIONS

    conn = sqlite3.connect(tmp_path / "aiot.sqlite", isolation_level=None)
    conn.execute("BEGIN")
    MIGRATIONS[0](conn)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    conn.execute("INSERT INTO runs (id, kind, status, created_at, spec_json, provenance_json) "
                 "VALUES ('abcd1234', 'latency', 'ok', '2026-01-01T00:00:00Z', ?, '{}')",
                 (json.dumps({"model": "m"}),))
    conn.execute("COMMIT")
    conn.close()
    with open_store(tmp_path) as store:
        old = store.get("abcd")
        assert old.validity is None and old.spec == {"model": "m"}
        new = store.begin("latency", {}, {})
        store.finish(new.id, "ok", validity="VALID")
        assert store.get(new.id).validity == "VALID"
