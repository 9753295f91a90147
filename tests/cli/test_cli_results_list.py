"""``results list``: the newest N by default, pages and filters; ``export`` streamed, the same
bytes as the whole-list form that ``compare`` and ``import`` read."""

import csv
import io
import json
import os
from pathlib import Path

from aiot.host.store import open_store
from aiot.host.cli.record_view import to_csv


def _seed(n: int) -> list[str]:
    ids = []
    with open_store(Path(os.environ["AIOT_RESULTS_DIR"])) as store:
        for i in range(n):
            rec = store.begin("latency", {"model": "m"}, {}, sweep_id=f"s{i % 2}",
                              device=f"phone{i % 3}", model="m", format="onnx", threads=1)
            store.finish(rec.id, "ok", median_ms=1.0 + i, result={"stats_ms": {"median": 1.0 + i}})
            ids.append(rec.id)
        store._conn.execute("UPDATE runs SET created_at = printf('2026-05-%02dT00:00:00+00:00', "
                            "1 + rowid % 28)")  # spread over a month (ordered as rowid % 28)
    return ids


def test_list_shows_the_newest_records_and_pages_to_older_ones(cli):
    _seed(60)
    newest = cli.json("results", "list", "--limit", "20")
    older = cli.json("results", "list", "--limit", "20", "--page", "2")
    days = [r["created_at"] for r in newest]
    assert len(newest) == len(older) == 20 and days == sorted(days)  # oldest first in a page
    assert max(r["created_at"] for r in older) <= min(days)
    assert not {r["id"] for r in newest} & {r["id"] for r in older}
    table = cli("results", "list")
    assert "--page 2" in table.stderr  # 60 records: the newest 50 shown, and how to see more
    assert len(cli.json("results", "list")) == 60  # --json without --limit: every record


def test_list_filters_by_device_sweep_and_time(cli):
    _seed(60)
    by_device = cli.json("results", "list", "--device", "phone1", "--sweep", "s0")
    assert by_device and {(r["device"], r["sweep_id"]) for r in by_device} == {("phone1", "s0")}
    ranged = cli.json("results", "list", "--since", "2026-05-10", "--until", "2026-05-12")
    assert ranged and {r["created_at"][:10] for r in ranged} == {"2026-05-10", "2026-05-11"}
    bad = cli("results", "list", "--since", "last tuesday", code=2)
    assert "is not a date or time" in bad.stderr


def test_export_streams_the_same_json_and_csv(cli, tmp_path):
    _seed(7)
    with open_store(Path(os.environ["AIOT_RESULTS_DIR"]), readonly=True) as store:
        records = store.query()
    wanted = json.dumps([r.to_dict() for r in records], indent=2, sort_keys=True) + "\n"
    assert cli("results", "export", "--format", "json").stdout == wanted
    cli("results", "export", "--format", "json", "-o", str(tmp_path / "all.json"))
    assert (tmp_path / "all.json").read_text() == wanted
    cli("results", "export", "--format", "csv", "-o", str(tmp_path / "all.csv"))
    text = (tmp_path / "all.csv").read_text()
    assert text == to_csv(records) and len(list(csv.DictReader(io.StringIO(text)))) == 7
    assert cli("results", "export", "--format", "json", "--sweep", "none").stdout == "[]\n"
