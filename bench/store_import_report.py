"""``aiot results import`` and ``aiot report`` at a lab's scale (issue 37's targets: import of
100k records ≤ 60 s; report ≤ 30 s, ≤ 1 GB peak RSS, ≤ 10 MB of HTML).

The store is built from one real record: a real ``aiot run`` of tiny_cnn (onnx) on the
``local`` device (or ``--from STORE``, any aiot store, its newest ok latency record), whose
row is copied with new ids as a lab's year of nightly sweeps: 20 devices × 7 models × 2
thread counts (280 keys a night), one night after another, latencies varied. Its
``samples_ns`` is cut to ``--samples`` values so a row is ~8 KB, the size the issue measured
(830 MB for 100k records); ``--samples 0`` keeps the real record whole.

Steps (``--steps``, each a fresh ``aiot`` process timed for CPU, wall and peak RSS, but
``export``): ``export`` writes the store's records as an export file (see ``write_export``),
``import`` imports that file into an empty store, ``reimport`` imports it again (everything
already present), ``merge`` imports the store file itself into another empty store,
``report`` writes the HTML report of the whole store.

Usage: ``python bench/store_import_report.py [--records 100000] [--steps import,report]
[--work DIR] [--keep]``; writes ``bench/out/store_import_report.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_json  # noqa: E402

AIOT = [str(Path(sys.executable).with_name("aiot"))]  # the aiot of this interpreter's env
TARGETS = {"import": {"wall_s": 60}, "merge": {"wall_s": 60},
           "report": {"wall_s": 30, "rss_mb": 1024, "html_mb": 10}}
DEVICES, MODELS, THREADS = 20, 7, (1, 4)
#: The statistics of ``stats_ms`` that are latencies (scaled with a record's median).
_LATENCY_STATS = ("min", "max", "mean", "median", "p90", "p99", "q1", "q3", "std", "iqr", "mad",
                  "trimmed_mean")


def timed(argv: list[str], env: dict, logs: Path) -> dict:
    """CPU (user + system), wall and peak RSS of one child process (``os.wait4``: its own)."""
    with (logs / "stdout").open("w+b") as out, (logs / "stderr").open("w+b") as errs:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=errs)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        errs.seek(0)
        said = (out.read().decode(errors="replace").strip()
                or errs.read().decode(errors="replace").strip())
    return {"wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "rss_mb": round(usage.ru_maxrss / 1024, 1), "rc": os.waitstatus_to_exitcode(status),
            "says": said.splitlines()[-1][:200] if said else ""}


def real_record(work: Path, source: Path | None, env: dict) -> sqlite3.Row:
    """The row of a real record: a real run on the local device, or ``source``'s newest."""
    if source is None:
        results = work / "real"
        subprocess.run([*AIOT, "--results-dir", str(results), "run", "-m", "tiny_cnn", "-f", "onnx",
                        "-d", "local"], env=env, check=True, capture_output=True)
        source = results / "aiot.sqlite"
    conn = sqlite3.connect(source)
    conn.row_factory = sqlite3.Row
    row = conn.execute("SELECT * FROM runs WHERE kind = 'latency' AND status = 'ok' "
                       "ORDER BY created_at DESC LIMIT 1").fetchone()
    conn.close()
    if row is None:
        raise SystemExit(f"no ok latency record in {source}")
    return row


def build_store(folder: Path, row: sqlite3.Row, records: int, samples: int, env: dict) -> Path:
    """A store of ``records`` copies of ``row`` as a year of nightly sweeps (see the doc)."""
    subprocess.run([*AIOT, "--results-dir", str(folder), "results", "list", "--limit", "1"],
                   env=env, check=True, capture_output=True)  # the store, made by aiot itself
    data = dict(row)
    result = json.loads(data["result_json"])
    if samples:
        result["samples_ns"] = result.get("samples_ns", [])[:samples]
    data["writer_json"] = None
    data.pop("host", None)  # a generated column (schema v7): made from the provenance
    stats = result.get("stats_ms") or {}
    columns = list(data)
    rng = random.Random(37)
    keys = [(d, m, t) for d in range(DEVICES) for m in range(MODELS) for t in THREADS]
    # Nights that ended before now: an import refuses records dated in the future.
    start = (datetime.now(UTC) - timedelta(days=records // len(keys) + 2)).replace(
        hour=1, minute=0, second=0, microsecond=0)
    conn = sqlite3.connect(folder / "aiot.sqlite", isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    batch = []
    for i in range(records):
        night, (device, model, threads) = divmod(i, len(keys))[0], keys[i % len(keys)]
        when = start + timedelta(days=night, seconds=i % len(keys) * 20)
        scale = (1 + model) / threads * rng.uniform(0.95, 1.05)
        median = data["median_ms"] * scale
        # An import checks that the columns are the record's own statistics: all scaled alike.
        scaled = {k: v * scale if k in _LATENCY_STATS and isinstance(v, float) else v
                  for k, v in stats.items()}
        if isinstance(stats.get("median_ci"), dict):
            scaled["median_ci"] = {**stats["median_ci"], "low": stats["median_ci"]["low"] * scale,
                                   "high": stats["median_ci"]["high"] * scale}
        batch.append({**data, "id": f"{rng.getrandbits(128):032x}", "sweep_id": f"night-{night:04d}",
                      "result_json": json.dumps({**result, "stats_ms": scaled}),
                      "created_at": when.isoformat(timespec="seconds"),
                      "finished_at": (when + timedelta(seconds=15)).isoformat(timespec="microseconds"),
                      "device": f"phone{device:02d}", "model": f"model{model}", "threads": threads,
                      "median_ms": median, "p90_ms": data["p90_ms"] * scale})
        if len(batch) == 5000 or i == records - 1:
            conn.executemany(f"INSERT INTO runs ({', '.join(columns)}) VALUES "
                             f"({', '.join('?' * len(columns))})",
                             [[r[c] for c in columns] for r in batch])
            batch = []
    conn.execute("COMMIT")
    conn.close()
    return folder / "aiot.sqlite"


def write_export(store: Path, out: Path) -> None:
    """The store's records as an export file: a JSON list of ``RunRecord.to_dict()``, the
    JSON ``results export --format json`` writes, less its indentation; made by SQLite
    (``json_object``) one record at a time, so building it takes seconds, not minutes."""
    from aiot.host.store.store import RunRecord

    fields = [f"'{name}', {name}" for name in RunRecord.__dataclass_fields__
              if name not in ("spec", "result", "provenance")]
    fields += [f"'{name}', json({name}_json)" for name in ("spec", "result", "provenance")]
    part = out.with_name(out.name + ".part")  # whole or absent: a later run reuses it
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    with part.open("w") as fh:
        fh.write("[")
        cursor = conn.execute(f"SELECT json_object({', '.join(fields)}) FROM runs ORDER BY rowid")
        for n, (text,) in enumerate(cursor):
            fh.write(("," if n else "") + "\n" + text)
        fh.write("\n]\n")
    conn.close()
    part.replace(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=180)
    parser.add_argument("--steps", default="import,reimport,merge,report")
    parser.add_argument("--from", dest="source", type=Path)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args()
    env = {**os.environ, "NO_COLOR": "1", "AIOT_NO_PROGRESS": "1", "TERMINAL_WIDTH": "120"}
    work = args.work or Path(tempfile.mkdtemp(prefix="aiot-store-scale-"))
    steps = args.steps.split(",")
    try:
        source = work / f"store-{args.records}" / "aiot.sqlite"
        t0 = time.perf_counter()
        if not source.exists():
            build_store(source.parent, real_record(work, args.source, env), args.records,
                        args.samples, env)
        export = work / f"export-{args.records}.json"
        if not export.exists() and {"export", "import", "reimport"} & set(steps):
            write_export(source, export)
        built = time.perf_counter() - t0
        rows, results = [], {}
        for step in (s for s in steps if s != "export"):  # export: only write the file
            target = work / f"into-{step}"
            if step != "reimport":
                shutil.rmtree(target, ignore_errors=True)
            if step == "report":
                argv = [*AIOT, "--results-dir", str(source.parent), "report", "-o", str(target)]
            else:
                folder = work / "into-import" if step == "reimport" else target
                what = source if step == "merge" else export
                argv = [*AIOT, "--results-dir", str(folder), "results", "import", str(what)]
            got = timed(argv, env, work)
            if step == "report" and (target / "index.html").exists():
                got["html_mb"] = round((target / "index.html").stat().st_size / 2**20, 2)
            results[step] = got
            verdict = all(got.get(k, 0) <= v for k, v in TARGETS.get(step, {}).items())
            rows.append([step, got["wall_s"], got["cpu_s"], got["rss_mb"], got.get("html_mb", "—"),
                         got["rc"], "ok" if verdict and got["rc"] == 0 else "MISSED",
                         got["says"][:70]])
        print(f"{args.records} records, store {source.stat().st_size / 2**20:.0f} MB"
              + (f", export {export.stat().st_size / 2**20:.0f} MB" if export.exists() else "")
              + f" (built in {built:.0f} s)")
        if rows:
            print_table(["step", "wall s", "CPU s", "peak RSS MB", "HTML MB", "rc", "target", "says"],
                        rows)
        path = write_json("store_import_report", {
            "records": args.records, "store_mb": round(source.stat().st_size / 2**20, 1),
            "export_mb": round(export.stat().st_size / 2**20, 1) if export.exists() else None,
            "targets": TARGETS, "steps": results})
        print(f"wrote {path}")
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
