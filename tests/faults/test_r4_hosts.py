"""Round 4, results that cross a boundary: another host's records in this host's store (two
real stores standing for two hosts, the second's export carrying its own host id)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from aiot.host.store import open_store
from tests.faults.conftest import count_records
from tests.hosts import SWEEP, two_hosts  # noqa: F401 (a fixture)


def _forge(db, record_id: str, **sets) -> None:
    """Make an imported record claim more than it should (a hostile or careless file that got
    past import: this host's id, a date far ahead)."""
    with sqlite3.connect(db) as conn:
        for path, value in sets.items():
            conn.execute(f"UPDATE runs SET {path} = ? WHERE id = ?", (value, record_id))


@pytest.mark.fault("another host's records complete this host's sweep")
def test_another_hosts_records_never_complete_this_hosts_sweep(cli, fault, two_hosts):
    a, b_records = two_hosts
    assert {r["provenance"]["host"]["id"] for r in b_records} == {"lab-b"}
    before = count_records(a)
    done = cli("--results-dir", str(a), *SWEEP)
    assert "is complete" not in done.output and "1 run(s)" in done.output
    mine = json.loads(cli("--results-dir", str(a), "results", "list", "--host", "lab-a",
                          "--json").stdout)
    assert len(mine) == 1 and mine[0]["status"] == "ok"
    assert mine[0]["sweep_id"] != b_records[0]["sweep_id"]
    # Asked again, the same sweep on the same host resumes from its own run only.
    again = cli("--results-dir", str(a), *SWEEP)
    assert f"sweep {mine[0]['sweep_id']} is complete" in again.output
    fault.records_lost(before + 1, count_records(a))


@pytest.mark.fault("an imported record with this host's sweep id and id completes its sweep")
def test_an_import_claiming_this_host_and_sweep_never_completes_it(cli, fault, two_hosts):
    a, b_records = two_hosts
    mine = json.loads(cli("--results-dir", str(a), *SWEEP, "--json").stdout)[0]
    with sqlite3.connect(a / "aiot.sqlite") as conn:  # this host's own run is gone...
        conn.execute("DELETE FROM runs WHERE id = ?", (mine["id"],))
    # ... and an imported one claims its host, sweep and request: still not a run done here.
    imported = b_records[0]["id"]
    _forge(a / "aiot.sqlite", imported, sweep_id=mine["sweep_id"], spec_json=json.dumps(mine["spec"]),
           provenance_json=json.dumps({**b_records[0]["provenance"], "host": {"id": "lab-a"}}))
    before = count_records(a)
    again = cli("--results-dir", str(a), *SWEEP)
    assert "is complete" not in again.output and "1 run(s)" in again.output
    fault.records_lost(before + 1, count_records(a))


@pytest.mark.fault("imported records dated 9999 displace this host's in prune")
def test_prune_never_lets_an_import_displace_this_hosts_own(cli, fault, two_hosts):
    a, b_records = two_hosts
    cli("--results-dir", str(a), *SWEEP)
    cli("--results-dir", str(a), *SWEEP, "--fresh")  # a second own run of the same key
    db = a / "aiot.sqlite"
    # The imported run claims this host and the newest time: it still ranks after own runs.
    _forge(db, b_records[0]["id"], created_at="9999-12-31T00:00:00+00:00",
           provenance_json=json.dumps({**b_records[0]["provenance"], "host": {"id": "lab-a"}}))
    pruned = cli("--results-dir", str(a), "results", "prune", "--keep", "1")
    assert "of host lab-a (1 measured here, 1 imported)" in pruned.stderr, pruned.output
    with sqlite3.connect(db) as conn:
        left = conn.execute("SELECT host, imported_at IS NULL FROM runs").fetchall()
    assert left == [("lab-a", 1)]
    fault.records_lost(1, sum(own for _host, own in left))


@pytest.mark.fault("an imported record dated 9999 is a device's newest run in the lab view")
def test_the_lab_views_device_row_reads_only_runs_measured_here(cli, fault, two_hosts):
    from aiot.host.labview.sources import _from_store

    a, b_records = two_hosts
    mine = json.loads(cli("--results-dir", str(a), *SWEEP, "--json").stdout)[0]
    _forge(a / "aiot.sqlite", b_records[0]["id"], created_at="9999-12-31T00:00:00+00:00")
    with open_store(a, readonly=True) as store:
        row = _from_store(store, "local")
    assert row["last_run"] == mine["created_at"]
