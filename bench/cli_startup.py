"""CLI start-up time: median wall time of ``aiot --help`` (target ≤ 0.3 s).

Compared in the same run with a bare ``python -c pass`` and ``python -c 'import typer'`` so
machine noise shows up in the baselines too. Usage: ``python bench/cli_startup.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, print_table, write_json  # noqa: E402

TARGET_S = 0.3


def time_command(argv: list[str], runs: int) -> list[float]:
    """Wall times of ``runs`` executions (after one untimed run to warm the page cache)."""
    env = {**os.environ, "NO_COLOR": "1", "TERMINAL_WIDTH": "100"}
    subprocess.run(argv, capture_output=True, env=env, check=True)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, capture_output=True, env=env, check=True)
        times.append(time.perf_counter() - t0)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    script = shutil.which("aiot", path=str(Path(sys.executable).parent)) or "aiot"
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import typer'": [sys.executable, "-c", "import typer"],
        "aiot --help": [script, "--help"],
        "aiot convert --help": [script, "convert", "--help"],
    }
    rows, results = [], {}
    for label, argv in cases.items():
        times = time_command(argv, args.runs)
        results[label] = {"median_s": median(times), "min_s": min(times), "max_s": max(times), "runs": len(times)}
        rows.append([label, f"{median(times):.3f}", f"{min(times):.3f}", f"{max(times):.3f}"])
    print_table(["command", "median s", "min s", "max s"], rows)
    help_median = results["aiot --help"]["median_s"]
    verdict = "PASS" if help_median <= TARGET_S else "FAIL"
    print(f"\naiot --help median {help_median:.3f} s, target ≤ {TARGET_S} s: {verdict}")
    path = write_json("cli_startup", {"target_s": TARGET_S, "verdict": verdict, "results": results})
    print(f"wrote {path}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
