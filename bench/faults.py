"""The fault cases of tests/faults as tables, one per round: case, tried, held, records lost.

Runs the fault layer with pytest (each test is one case of bad input, a hostile device,
concurrent use, a full disk, users' code ...; see tests/faults/conftest.py), then prints one
table per round and writes ``bench/out/faults.json``. Round 1 is the first reliability round's
cases (the files in :data:`ROUND_1`); round 2 every case added since (issue 28: an open lab
port, full disks, users' code in aiot's process, NaN outputs, multi-file models, what still
lied). Exit status 1 unless every case held with no record lost.

Usage: ``python bench/faults.py [-k EXPR] [--round 1|2]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FAULTS = ROOT / "tests" / "faults"

#: The first round's case files; every other file of tests/faults is round 2.
ROUND_1 = ("test_hostile_device.py", "test_input_faults.py", "test_ssh_faults.py",
           "test_store_faults.py", "test_usability_faults.py")


def round_of(test: str) -> int:
    """1 or 2: the round of a test by its file (a pytest node id)."""
    return 1 if test.split("::")[0].rsplit("/", 1)[-1] in ROUND_1 else 2


def run_cases(select: str | None, only_round: int | None = None) -> tuple[list[dict], float]:
    """Every case's outcome as the fault layer reported it, and the wall time of the run."""
    files = sorted(str(p) for p in FAULTS.glob("test_*.py")
                   if only_round is None or round_of(p.name) == only_round)
    with tempfile.TemporaryDirectory(prefix="aiot-bench-faults-") as tmp:
        report = Path(tmp) / "faults.json"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "-m", "slow or not slow", *files]
        if select:
            command += ["-k", select]
        started = time.perf_counter()
        subprocess.run(command, cwd=ROOT, env={**os.environ, "AIOT_FAULTS_REPORT": str(report)}, check=False)
        wall = time.perf_counter() - started
        return (json.loads(report.read_text()) if report.exists() else []), wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="select", help="only the cases whose test matches (pytest -k)")
    parser.add_argument("--round", type=int, choices=(1, 2), help="only this round's cases")
    args = parser.parse_args()
    cases, wall = run_cases(args.select, args.round)
    if not cases:
        print("no fault case ran", file=sys.stderr)
        return 1
    rounds = {}
    for number in (1, 2):
        mine = [c for c in cases if round_of(c["test"]) == number]
        if not mine:
            continue
        by_case = group(mine)
        rows = [[c["case"], c["tried"], "held" if c["held"] else "BROKEN", c["records_lost"],
                 f"{c['seconds']:.1f}"] for c in by_case]
        print(f"\nround {number}")
        print_table(["case", "tried", "held", "records lost", "s"], rows)
        held = sum(c["held"] for c in by_case)
        lost = sum(c["records_lost"] for c in by_case)
        print(f"round {number}: {len(by_case)} cases ({len(mine)} tests): {held} held, "
              f"{len(by_case) - held} broken, {lost} records lost")
        rounds[number] = {"cases": by_case, "held": held, "broken": len(by_case) - held,
                          "records_lost": lost, "tests": len(mine)}
    held = sum(r["held"] for r in rounds.values())
    broken = sum(r["broken"] for r in rounds.values())
    lost = sum(r["records_lost"] for r in rounds.values())
    print(f"\nall rounds: {held + broken} cases ({len(cases)} tests): {held} held, {broken} broken, "
          f"{lost} records lost, {wall:.0f} s")
    write_json("faults", {"rounds": {str(k): v for k, v in rounds.items()}, "tests": cases,
                          "held": held, "broken": broken, "records_lost": lost,
                          "wall_s": round(wall, 1)})
    return 0 if broken == 0 and lost == 0 else 1


def group(cases: list[dict]) -> list[dict]:
    """One row per case (its tests are its variants: tried adds up, held only if all held)."""
    rows: dict[str, dict] = {}
    for case in cases:
        row = rows.setdefault(case["case"], {"case": case["case"], "tried": 0, "held": True,
                                             "records_lost": 0, "seconds": 0.0, "tests": []})
        row["tried"] += case["tried"]
        row["held"] = row["held"] and case["held"]
        row["records_lost"] += case["records_lost"]
        row["seconds"] += case["seconds"]
        row["tests"].append(case["test"])
    return list(rows.values())


if __name__ == "__main__":
    sys.exit(main())
