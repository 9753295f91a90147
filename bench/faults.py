"""The fault cases of tests/faults as tables, one per round: case, tried, held / partly /
broken, tests passed, records lost.

Runs the fault layer with pytest (each test is one case of bad input, a hostile device,
concurrent use, a full disk, users' code ...; see tests/faults/conftest.py), then prints one
table per round and writes ``bench/out/faults.json``. A case is the tests that share one
``@pytest.mark.fault("case")`` name (its variants): ``held`` when all of them passed,
``partly`` when some did, ``broken`` when none did.

Round 1 is the first reliability round's cases (the files in :data:`ROUND_1`); round 3 the
files ``test_r3_*.py`` (issue 35: hostile model files and devices, bytes that crash a
parser, device output that pins a core, signals and locks, small lies); round 4 the files
``test_r4_*.py`` (issue 49: results that cross a boundary: another host's records, forged
import files, a CI gate on a model that changes); round 2 every other file (issue 28: an
open lab port, full disks, users' code in aiot's process, NaN outputs, multi-file models,
what still lied). Exit status 1 unless every case held with no record lost.

Usage: ``python bench/faults.py [-k EXPR] [--round 1|2|3|4]``
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

#: The first round's case files; ``test_r<N>_*.py`` are round N, every other file round 2.
ROUND_1 = ("test_hostile_device.py", "test_input_faults.py", "test_ssh_faults.py",
           "test_store_faults.py", "test_usability_faults.py")
ROUNDS = (1, 2, 3, 4)


def round_of(test: str) -> int:
    """1 to 4: the round of a test by its file (a pytest node id or a file name)."""
    name = test.split("::")[0].rsplit("/", 1)[-1]
    if name in ROUND_1:
        return 1
    for number in ROUNDS[2:]:
        if name.startswith(f"test_r{number}_"):
            return number
    return 2


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
    parser.add_argument("--round", type=int, choices=ROUNDS, help="only this round's cases")
    args = parser.parse_args()
    cases, wall = run_cases(args.select, args.round)
    if not cases:
        print("no fault case ran", file=sys.stderr)
        return 1
    rounds = {}
    for number in ROUNDS:
        mine = [c for c in cases if round_of(c["test"]) == number]
        if not mine:
            continue
        by_case = group(mine)
        rows = [[c["case"], c["tried"], c["outcome"] if c["held"] else c["outcome"].upper(),
                 f"{c['passed']}/{len(c['tests'])}", c["records_lost"], f"{c['seconds']:.1f}"]
                for c in by_case]
        print(f"\nround {number}")
        print_table(["case", "tried", "outcome", "tests passed", "records lost", "s"], rows)
        rounds[number] = {"cases": by_case, **tally(by_case), "tests": len(mine)}
        print(f"round {number}: {summary(rounds[number])}")
    total = {key: sum(r[key] for r in rounds.values()) for key in ("held", "partly", "broken", "records_lost",
                                                                   "tests")}
    print(f"\nall rounds: {summary(total)}, {wall:.0f} s")
    write_json("faults", {"rounds": {str(k): v for k, v in rounds.items()}, "tests": cases,
                          "held": total["held"], "partly": total["partly"], "broken": total["broken"],
                          "records_lost": total["records_lost"], "wall_s": round(wall, 1)})
    return 0 if total["partly"] == 0 and total["broken"] == 0 and total["records_lost"] == 0 else 1


def group(cases: list[dict]) -> list[dict]:
    """One row per case (its tests are its variants: tried and records lost add up; held only
    if all held, ``outcome`` held / partly / broken by how many of them passed)."""
    rows: dict[str, dict] = {}
    for case in cases:
        row = rows.setdefault(case["case"], {"case": case["case"], "tried": 0, "held": True, "passed": 0,
                                             "records_lost": 0, "seconds": 0.0, "tests": []})
        row["tried"] += case["tried"]
        row["held"] = row["held"] and case["held"]
        row["passed"] += bool(case["held"])
        row["records_lost"] += case["records_lost"]
        row["seconds"] += case["seconds"]
        row["tests"].append(case["test"])
    for row in rows.values():
        row["outcome"] = outcome(row["passed"], len(row["tests"]))
    return list(rows.values())


def outcome(passed: int, tests: int) -> str:
    """``held`` (every test of the case passed), ``partly`` (some did) or ``broken`` (none)."""
    return "held" if passed == tests else "partly" if passed else "broken"


def tally(by_case: list[dict]) -> dict:
    """How many cases held, partly held and broke, and the records they lost."""
    return {"held": sum(c["outcome"] == "held" for c in by_case),
            "partly": sum(c["outcome"] == "partly" for c in by_case),
            "broken": sum(c["outcome"] == "broken" for c in by_case),
            "records_lost": sum(c["records_lost"] for c in by_case)}


def summary(counts: dict) -> str:
    """``12 cases (20 tests): 10 held, 1 partly, 1 broken, 0 records lost``."""
    cases = counts["held"] + counts["partly"] + counts["broken"]
    return (f"{cases} cases ({counts['tests']} tests): {counts['held']} held, {counts['partly']} partly, "
            f"{counts['broken']} broken, {counts['records_lost']} records lost")


if __name__ == "__main__":
    sys.exit(main())
