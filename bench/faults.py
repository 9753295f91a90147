"""The fault cases of tests/faults as a table: case, tried, held, records lost.

Runs the fault layer with pytest (each test is one case of bad input, a hostile device or
concurrent use; see tests/faults/conftest.py), then prints one row per case and writes
``bench/out/faults.json``. Exit status 1 unless every case held with no record lost.

Usage: ``python bench/faults.py [-k EXPR]``
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


def run_cases(select: str | None) -> tuple[list[dict], float]:
    """Every case's outcome as the fault layer reported it, and the wall time of the run."""
    with tempfile.TemporaryDirectory(prefix="aiot-bench-faults-") as tmp:
        report = Path(tmp) / "faults.json"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "-m", "slow or not slow", str(ROOT / "tests" / "faults")]
        if select:
            command += ["-k", select]
        started = time.perf_counter()
        subprocess.run(command, cwd=ROOT, env={**os.environ, "AIOT_FAULTS_REPORT": str(report)}, check=False)
        wall = time.perf_counter() - started
        return (json.loads(report.read_text()) if report.exists() else []), wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="select", help="only the cases whose test matches (pytest -k)")
    args = parser.parse_args()
    cases, wall = run_cases(args.select)
    if not cases:
        print("no fault case ran", file=sys.stderr)
        return 1
    by_case = group(cases)
    rows = [[c["case"], c["tried"], "held" if c["held"] else "BROKEN", c["records_lost"], f"{c['seconds']:.1f}"]
            for c in by_case]
    print_table(["case", "tried", "held", "records lost", "s"], rows)
    held = sum(c["held"] for c in by_case)
    lost = sum(c["records_lost"] for c in by_case)
    print(f"\n{len(by_case)} cases ({len(cases)} tests): {held} held, {len(by_case) - held} broken, "
          f"{lost} records lost, {wall:.0f} s")
    write_json("faults", {"cases": by_case, "tests": cases, "held": held, "broken": len(by_case) - held,
                          "records_lost": lost, "wall_s": round(wall, 1)})
    return 0 if held == len(by_case) and lost == 0 else 1


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
