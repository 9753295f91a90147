"""Two hosts, two real stores: one identity per machine (``AIOT_HOST_ID`` stands each test's
process in for one host or the other), the second's records crossing over by ``results
export`` and ``results import``, and every view saying which host a run came from."""

from __future__ import annotations

import json
import sqlite3

from aiot.host.store import identity
from tests.hosts import SWEEP, two_hosts  # noqa: F401 (a fixture)


def test_the_host_id_is_the_variable_else_the_host_name_and_a_digest(monkeypatch):
    monkeypatch.delenv(identity.HOST_ENV, raising=False)
    mine = identity.this_host()
    name, _, digest = mine.rpartition("-")
    assert name and len(digest) == 6 and int(digest, 16) >= 0
    assert identity.this_host() == mine  # stable
    monkeypatch.setenv(identity.HOST_ENV, "ci-x86-2core")
    assert identity.this_host() == "ci-x86-2core"


def test_a_bad_host_id_is_one_line(cli, monkeypatch):
    monkeypatch.setenv(identity.HOST_ENV, "a b;rm")
    result = cli("results", "list", code=2)
    assert "AIOT_HOST_ID" in result.stderr and "Traceback" not in result.output


def test_views_say_which_host_a_run_came_from(cli, two_hosts):
    a, b_records = two_hosts
    cli("--results-dir", str(a), *SWEEP)
    listed = cli("--results-dir", str(a), "results", "list").stdout
    assert "lab-a" in listed and "lab-b" in listed and "host" in listed
    only_b = cli("--results-dir", str(a), "results", "list", "--host", "lab-b", "--json")
    assert [r["id"] for r in json.loads(only_b.stdout)] == [r["id"] for r in b_records]
    shown = cli("--results-dir", str(a), "results", "show", b_records[0]["id"]).stdout
    assert "lab-b (another host)" in shown
    csv = cli("--results-dir", str(a), "results", "export", "-f", "csv", "--host", "lab-b").stdout
    assert csv.count("\n") == 1 + len(b_records)


def test_two_hosts_local_are_not_comparable(cli, two_hosts):
    a, b_records = two_hosts
    done = cli("--results-dir", str(a), *SWEEP, "--json")
    mine = json.loads(done.stdout)[0]["sweep_id"]
    compared = cli("--results-dir", str(a), "results", "compare", b_records[0]["sweep_id"], mine,
                   "--json", code=3)
    [row] = json.loads(compared.stdout)["rows"]
    assert row["status"] == "not comparable" and "host lab-b vs lab-a" in row["reason"]


def test_prune_by_host_touches_no_other_host(cli, two_hosts):
    a, b_records = two_hosts
    cli("--results-dir", str(a), *SWEEP)
    gone = cli("--results-dir", str(a), "results", "prune", "--older-than", "1h", "--keep", "1",
               "--host", "lab-b", "--dry-run", "--json")
    assert json.loads(gone.stdout)["pruned"] == 0
    report = cli("--results-dir", str(a), "report", "--host", "lab-b", "--json")
    assert json.loads(report.stdout)["runs"] == len(b_records)


def test_a_v6_store_is_migrated_its_facts_keyed_by_host(cli, tmp_path, monkeypatch):
    """An existing store gains the host column and its facts are made again (one pass)."""
    from aiot.host.store import facts, open_store

    monkeypatch.setenv(identity.HOST_ENV, "lab-a")
    cli("--results-dir", str(tmp_path / "r"), *SWEEP)
    db = tmp_path / "r" / "aiot.sqlite"
    with sqlite3.connect(db) as conn:  # back to v6 as it was: no host column, no imported_at
        for name in ("runs_facts_insert", "runs_facts_update", "runs_facts_delete"):
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("DROP INDEX runs_by_host")
        conn.execute("ALTER TABLE runs DROP COLUMN host")
        conn.execute("ALTER TABLE runs DROP COLUMN imported_at")
        conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    with open_store(tmp_path / "r") as store:
        assert facts.disagreement(store._conn) is None
        [record] = store.query(host="lab-a")
    assert identity.key(record).configuration.host == "lab-a"


def test_compare_by_host_compares_one_hosts_runs_of_each_set(cli, two_hosts):
    a, b_records = two_hosts
    both = a.parent / "both.json"
    cli("--results-dir", str(a), *SWEEP)
    cli("--results-dir", str(a), "results", "export", "-o", str(both))
    compared = cli("--results-dir", str(a), "results", "compare", str(both), str(both),
                   "--host", "lab-b", "--json")
    data = json.loads(compared.stdout)
    assert data["passed"] and [r["b_id"] for r in data["rows"]] == [b_records[0]["id"]]
    missing = cli("--results-dir", str(a), "results", "compare", str(both), str(both),
                  "--host", "lab-c", code=2)
    assert "has no runs of host lab-c" in missing.stderr and "lab-a, lab-b" in missing.stderr


def test_prune_asks_with_what_goes_per_host_and_a_no_deletes_nothing(cli, two_hosts):
    from aiot.host.store import open_store
    from aiot.host.store.prune import prune

    a, _b_records = two_hosts
    cli("--results-dir", str(a), *SWEEP)
    cli("--results-dir", str(a), *SWEEP, "--fresh")
    asked = []
    with open_store(a) as store:
        kept = prune(store, keep=1, confirm=lambda s: asked.append(s.host_lines()) or False)
        assert kept.dry_run and len(kept.pruned) == 1 and store.count() == 3
        gone = prune(store, keep=1, confirm=lambda s: True)
        assert not gone.dry_run and len(gone.pruned) == 1 and store.count() == 2
    assert asked == [["would prune 1 of host lab-a (1 measured here, 0 imported)"]]
