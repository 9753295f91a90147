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
    rows = [[c["case"], c["tried"], "held" if c["held"] else "BROKEN", c["records_lost"], f"{c['seconds']:.1f}"]
            for c in cases]
    print_table(["case", "tried", "held", "records lost", "s"], rows)
    held = sum(c["held"] for c in cases)
    lost = sum(c["records_lost"] for c in cases)
    print(f"\n{len(cases)} cases: {held} held, {len(cases) - held} broken, {lost} records lost, {wall:.0f} s")
    write_json("faults", {"cases": cases, "held": held, "broken": len(cases) - held,
                          "records_lost": lost, "wall_s": round(wall, 1)})
    return 0 if held == len(cases) and lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
