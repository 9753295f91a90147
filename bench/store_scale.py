"""The result store and its readers at a lab's scale: 1k, 10k, 100k (and 1M) records.

A lab with 20 phones sweeping 280 keys a night stores about 100,000 records a year. This
builds such stores from a REAL record and measures every reader on them:

1. The template: the newest ok latency record of ``--from DIR`` (default: one real
   ``aiot sweep`` of tiny_cnn on ``local``, run once into the cache).
2. A store of N records: the template written through the store's own ``begin``/``finish``
   (the real write path), then its row copied N-1 times by a bulk insert of the same
   columns, varied as nightly sweeps of 280 keys (20 devices x 7 models x 2 thread counts),
   one sweep a night back in time, each record its own id and median. Built by the aiot
   tree under test (its schema), cached under ``--cache`` (default: the temp folder) by
   schema version and size, so a rerun measures at once.
3. Each command as the user runs it, ``python -m aiot ...``, in its own child process (its
   bytecode cached, as an installed aiot's is; one untimed run first warms it): CPU
   (user + system), wall time and peak RSS from ``os.wait4``; the median of ``--repeat``
   runs (exports and the full check once at 100k and above):

   * ``results compare A B``: the two newest 280-key sweeps (the CI gate);
   * ``results list`` (the default view), ``results top``;
   * ``results export --format csv`` and ``--format json`` (to a file);
   * ``results check`` (every page read, on demand);
   * per key of a sweep (``key`` rows): what a sweep's executor does to the store for each
     run (``begin``, ``finish``, reading its record back by id) over 280 keys, CPU ms per
     key, and the store's open (``open`` rows), compared with an empty store's (size 0).

Usage: ``python bench/store_scale.py [--sizes 1000,10000,100000] [--million]
[--repeat 3] [--tree PATH] [--label after] [--only compare,list]``. ``--tree`` measures
another checkout of aiot (its ``.wtroot`` or ``src`` on PYTHONPATH), e.g. the code before a
change, with stores of its own schema. Writes ``bench/out/store_scale[-LABEL].json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, print_table, write_json  # noqa: E402

HERE = Path(__file__).resolve().parent.parent
DEVICES = [f"phone{i:02d}" for i in range(20)]
MODELS = ["tiny_cnn", "mobilenet_v2", "resnet18", "squeezenet", "efficientnet_b0", "yolo_n",
          "bert_tiny"]
THREADS = [1, 4]
KEYS = len(DEVICES) * len(MODELS) * len(THREADS)  # 280 runs a night
BIG = 100_000
CACHE_PYC = Path(tempfile.gettempdir()) / "aiot-store-scale-pyc"


# -- the child side: building a store, probing a sweep's per-key work ------------------------------

def _keys() -> list[tuple[str, str, int]]:
    return [(d, m, t) for d in DEVICES for m in MODELS for t in THREADS]


def build(folder: Path, count: int, template: dict) -> None:
    """A store of ``count`` records in ``folder``: the template through ``begin``/``finish``,
    then its row copied as nightly sweeps (the newest first)."""
    from aiot.host.store import open_store

    spec, prov, result = (json.loads(template[k]) for k in ("spec_json", "provenance_json",
                                                               "result_json"))
    columns = {k: template[k] for k in ("median_ms", "p90_ms", "load_ms", "size_bytes",
                                        "artifact_sha256", "accuracy", "validity")}
    with open_store(folder) as store:
        first = store.begin("latency", spec, prov, sweep_id="seed", device=template["device"],
                            model=template["model"], format=template["format"],
                            threads=template["threads"])
        store.finish(first.id, "ok", result=result, **columns)
        row = dict(store._conn.execute("SELECT * FROM runs WHERE id = ?", (first.id,)).fetchone())
        names = [c for c in row if c != "id"]
        specs = {}
        for device, model, threads in _keys():
            specs[device, model, threads] = json.dumps({**spec, "device": device, "model": model,
                                                        "threads": threads})
        start = time.time() - (count // KEYS + 2) * 86400
        conn = store._conn
        conn.execute("BEGIN")
        rows, made = [], 1
        night = 0
        while made < count:
            sweep = f"night{night:05d}-{uuid.uuid4().hex[:6]}"
            day = start + night * 86400
            for i, (device, model, threads) in enumerate(_keys()):
                if made >= count:
                    break
                when = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(day + i * 60))
                values = {**row, "sweep_id": sweep, "device": device, "model": model,
                          "threads": threads, "created_at": when, "finished_at": when,
                          "spec_json": specs[device, model, threads],
                          "median_ms": row["median_ms"] * (1 + (made % 7) / 100)}
                rows.append([uuid.uuid4().hex, *(values[c] for c in names)])
                made += 1
                if len(rows) >= 5000:
                    conn.executemany(f"INSERT INTO runs (id, {', '.join(names)}) VALUES "
                                     f"({', '.join('?' * (len(names) + 1))})", rows)
                    rows.clear()
            night += 1
        if rows:
            conn.executemany(f"INSERT INTO runs (id, {', '.join(names)}) VALUES "
                             f"({', '.join('?' * (len(names) + 1))})", rows)
        conn.execute("COMMIT")


def probe(folder: Path) -> dict:
    """What a sweep's executor does to the store per key, over 280 keys: the store's open,
    then ``begin``, ``finish`` and reading the record back by id; the probe's rows are
    deleted afterwards (the cached store stays as built)."""
    from aiot.host.store import open_store

    cpu, wall = time.process_time(), time.perf_counter()
    store = open_store(folder)
    opened = {"open_cpu_s": time.process_time() - cpu, "open_wall_s": time.perf_counter() - wall}
    cpu, wall = time.process_time(), time.perf_counter()
    for device, model, threads in _keys():
        record = store.begin("latency", {"model": model}, {}, sweep_id="probe", device=device,
                             model=model, format="onnx", threads=threads)
        store.finish(record.id, "ok", median_ms=1.0, result={"stats_ms": {"median": 1.0}})
        store.get(record.id)
    per_key = {"key_cpu_ms": (time.process_time() - cpu) * 1000 / KEYS,
               "key_wall_ms": (time.perf_counter() - wall) * 1000 / KEYS}
    store._conn.execute("DELETE FROM runs WHERE sweep_id = 'probe'")
    store.close()
    return {**opened, **per_key}


# -- the parent side -------------------------------------------------------------------------------

def _pythonpath(tree: Path) -> str:
    root = tree / ".wtroot"
    return str(root if root.is_dir() else tree / "src")


def _env(tree: Path, results: Path | None = None) -> dict:
    # Bytecode cached (under the cache folder) as an installed aiot's is: a child compiling
    # every module would add a second of CPU to every command measured.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=_pythonpath(tree), AIOT_LOG="warning",
               PYTHONPYCACHEPREFIX=str(CACHE_PYC / tree.name))
    if results is not None:
        env["AIOT_RESULTS_DIR"] = str(results)
    return env


def _child(args: list[str], env: dict, timeout: float) -> dict:
    """Run ``args``; its CPU seconds, wall seconds, peak RSS (MB) and exit code."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        run = _wait(subprocess.Popen(args, env=env, stdout=out, stderr=err), started, timeout)
        out.seek(0)
        err.seek(0)
        run["stdout"] = out.read()[-4000:].decode(errors="replace")
        run["stderr"] = err.read()[-500:].decode(errors="replace")
    return run


def _wait(proc: subprocess.Popen, started: float, timeout: float) -> dict:
    deadline = started + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            return {"timed_out": True, "wall_s": timeout}
        time.sleep(0.02)
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": time.perf_counter() - started,
            "rss_mb": usage.ru_maxrss / 1024, "code": os.waitstatus_to_exitcode(status)}


def _schema(tree: Path) -> int:
    out = subprocess.run([sys.executable, "-c", "from aiot.host.store.schema import "
                          "SCHEMA_VERSION as v; print(v)"], env=_env(tree), check=True,
                         capture_output=True, text=True).stdout
    return int(out.strip())


def _template(source: Path) -> dict:
    conn = sqlite3.connect(f"file:{source / 'aiot.sqlite'}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        row = conn.execute("SELECT * FROM runs WHERE kind = 'latency' AND status = 'ok' "
                           "AND result_json IS NOT NULL ORDER BY created_at DESC LIMIT 1").fetchone()
    finally:
        conn.close()
    if row is None:
        raise SystemExit(f"no ok latency record in {source}")
    return dict(row)


def _real_store(cache: Path, tree: Path) -> Path:
    """A store holding real records: one small sweep of tiny_cnn on local (once)."""
    folder = cache / "real"
    if not (folder / "aiot.sqlite").exists():
        print("measuring a real template record (aiot sweep -m tiny_cnn -d local) ...", flush=True)
        subprocess.run([sys.executable, "-m", "aiot", "sweep", "-m", "tiny_cnn", "-f", "onnx",
                        "-d", "local", "--threads", "1,2", "--min-runs", "20", "--min-s", "0",
                        "--warmup-min-s", "0", "--cooldown-max-s", "0"],
                       env=_env(tree, folder), check=True, stdout=subprocess.DEVNULL)
    return folder


def _store(cache: Path, tree: Path, schema: int, count: int, template_dir: Path) -> Path:
    folder = cache / f"v{schema}" / str(count)
    if (folder / "aiot.sqlite").exists() and (folder / "built").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    started = time.perf_counter()
    print(f"building a store of {count:,} records in {folder} ...", flush=True)
    subprocess.run([sys.executable, __file__, "--_build", str(folder), str(count),
                    str(template_dir)], env=_env(tree), check=True)
    (folder / "built").write_text(f"{time.perf_counter() - started:.1f}\n")
    return folder


def _sweeps(folder: Path) -> tuple[str, str]:
    """The two newest whole (280-key) nightly sweeps, A the older."""
    conn = sqlite3.connect(f"file:{folder / 'aiot.sqlite'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT sweep_id FROM runs WHERE sweep_id LIKE 'night%' GROUP BY "
                            "sweep_id HAVING COUNT(*) = ? ORDER BY sweep_id DESC LIMIT 2",
                            (KEYS,)).fetchall()
    finally:
        conn.close()
    return rows[1][0], rows[0][0]


def _commands(folder: Path, scratch: Path) -> dict[str, list[str]]:
    commands = {"list": ["results", "list"], "top": ["results", "top"],
                "export-csv": ["results", "export", "--format", "csv", "-o", str(scratch / "x.csv")],
                "export-json": ["results", "export", "--format", "json", "-o", str(scratch / "x.json")],
                "check": ["results", "check"]}
    if folder.name != "0":
        a, b = _sweeps(folder)
        commands = {"compare": ["results", "compare", a, b, "--allow-missing"], **commands}
    return commands


def measure(tree: Path, folder: Path, count: int, repeat: int, only: set[str] | None) -> list[dict]:
    rows = []
    scratch = Path(tempfile.mkdtemp(prefix="aiot-scale-out-"))
    try:
        names = ["key", *_commands(folder, scratch)]
        for name in names:
            if only and name not in only and not (name == "key" and "open" in only):
                continue
            times = 1 if count >= BIG and name in ("export-csv", "export-json", "check") else repeat
            runs = []
            if name != "key":  # untimed: compiles the modules it imports once
                _child([sys.executable, "-m", "aiot", *_commands(folder, scratch)[name][:2],
                        "--help"], _env(tree, folder), 300)
            for _ in range(times):
                if name == "key":
                    run = _child([sys.executable, __file__, "--_probe", str(folder)], _env(tree), 600)
                    run.update(json.loads(run["stdout"].strip().splitlines()[-1]))
                else:
                    args = [sys.executable, "-m", "aiot", *_commands(folder, scratch)[name]]
                    run = _child(args, _env(tree, folder), 900)
                runs.append(run)
                if run.get("timed_out"):
                    break
            rows.append(_summary(name, count, runs))
            print(_line(rows[-1]), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return rows


def _summary(name: str, count: int, runs: list[dict]) -> dict:
    done = [r for r in runs if not r.get("timed_out")]
    row = {"command": name, "records": count, "runs": len(runs),
           "timed_out": len(done) < len(runs)}
    for key in ("cpu_s", "wall_s", "rss_mb", "key_cpu_ms", "key_wall_ms", "open_cpu_s",
                "open_wall_s"):
        values = [r[key] for r in done if key in r]
        if values:
            row[key] = median(values)
    codes = sorted({r.get("code") for r in done})
    row["exit_codes"] = codes
    if any(c not in (0, 1) for c in codes):
        row["stderr"] = done[-1].get("stderr", "")
    return row


def _line(row: dict) -> str:
    extra = ""
    if "key_cpu_ms" in row:
        extra = (f" per key {row['key_cpu_ms']:.2f} ms CPU {row['key_wall_ms']:.2f} ms wall; "
                 f"open {row['open_cpu_s'] * 1000:.0f} ms CPU {row['open_wall_s'] * 1000:.0f} ms wall")
    return (f"  {row['records']:>9,} {row['command']:<12} cpu {row.get('cpu_s', 0):7.2f} s  wall "
            f"{row.get('wall_s', 0):7.2f} s  rss {row.get('rss_mb', 0):7.0f} MB  exit "
            f"{row['exit_codes']}{' TIMED OUT' if row['timed_out'] else ''}{extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--million", action="store_true", help="also 1,000,000 records (slow)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tree", type=Path, default=HERE, help="the aiot checkout measured")
    parser.add_argument("--from", dest="source", type=Path, help="a store with real records")
    parser.add_argument("--cache", type=Path,
                        default=Path(tempfile.gettempdir()) / "aiot-store-scale")
    parser.add_argument("--label", default="")
    parser.add_argument("--only", help="comma list of commands (key, compare, list, top, "
                                       "export-csv, export-json, check)")
    parser.add_argument("--_build", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--_probe", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._build:
        folder, count, source = args._build
        build(Path(folder), int(count), _template(Path(source)))
        return
    if args._probe:
        print(json.dumps(probe(Path(args._probe))))
        return
    tree = args.tree.resolve()
    sizes = [0, *(int(s) for s in args.sizes.split(","))] + ([1_000_000] if args.million else [])
    schema = _schema(tree)
    source = args.source or _real_store(args.cache, tree)
    template = _template(source)
    rows = []
    for count in sizes:
        folder = _store(args.cache, tree, schema, count, source) if count else \
            _empty(args.cache, schema, tree)
        size_mb = (folder / "aiot.sqlite").stat().st_size / 1e6
        print(f"{count:,} records ({size_mb:,.0f} MB store, schema v{schema}, tree {tree}):",
              flush=True)
        for row in measure(tree, folder, count, args.repeat,
                           set(args.only.split(",")) if args.only else None):
            rows.append({**row, "store_mb": round(size_mb, 1)})
    _report(rows, tree, schema, template, args.label)


def _empty(cache: Path, schema: int, tree: Path) -> Path:
    folder = cache / f"v{schema}" / "0"
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; from "
                    "aiot.host.store import open_store; open_store(Path(sys.argv[1])).close()",
                    str(folder)], env=_env(tree), check=True)
    return folder


def _report(rows: list[dict], tree: Path, schema: int, template: dict, label: str) -> None:
    print()
    headers = ["records", "command", "CPU s", "wall s", "peak RSS MB", "per key CPU ms",
               "open wall ms", "x vs 10x fewer"]
    by = {(r["command"], r["records"]): r for r in rows}
    table = []
    for r in rows:
        smaller = by.get((r["command"], r["records"] // 10)) if r["records"] >= 10 else None
        metric = "key_cpu_ms" if r["command"] == "key" else "cpu_s"
        ratio = (f"{r[metric] / smaller[metric]:.1f}x" if smaller and smaller.get(metric)
                 and r.get(metric) is not None else "")
        table.append([f"{r['records']:,}", r["command"] + (" (timed out)" if r["timed_out"] else ""),
                      f"{r.get('cpu_s', 0):.2f}", f"{r.get('wall_s', 0):.2f}",
                      f"{r.get('rss_mb', 0):.0f}",
                      f"{r['key_cpu_ms']:.2f}" if "key_cpu_ms" in r else "",
                      f"{r['open_wall_s'] * 1000:.0f}" if "open_wall_s" in r else "", ratio])
    print_table(headers, table)
    name = "store_scale" + (f"-{label}" if label else "")
    path = write_json(name, {"tree": tree.name, "schema": schema, "keys_per_sweep": KEYS,
                             "template_record_bytes": sum(len(str(v or "")) for v in template.values()),
                             "rows": rows})
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
