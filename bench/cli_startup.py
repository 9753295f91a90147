"""CLI start-up cost: median wall and CPU time of ``aiot --help`` (target ≤ 0.3 s wall).

Compared in the same run with a bare ``python -c pass`` and ``python -c 'import typer'`` so
machine noise shows up in the baselines too. CPU time (user + system of the child) is what
start-up really costs: on a loaded machine wall time also counts the wait for a core.
``--baseline DIR`` times another aiot source tree in the same run, interleaved with this one
(e.g. a ``git worktree`` of an older commit; DIR is put first on PYTHONPATH, so it needs an
importable ``aiot`` under DIR/src or DIR): the table then says how start-up changed.
Usage: ``python bench/cli_startup.py [--runs N] [--baseline DIR]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, print_table, write_json  # noqa: E402

TARGET_S = 0.3
ROOT = Path(__file__).resolve().parents[1]


def run_once(argv: list[str], env: dict) -> tuple[float, float]:
    """``(wall s, CPU s)`` of one execution; CPU is the child's user + system time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, capture_output=True, env=env, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def environment(source: Path | None) -> dict:
    env = {**os.environ, "NO_COLOR": "1", "TERMINAL_WIDTH": "100"}
    if source is not None:
        root = source / "src" if (source / "src" / "aiot").is_dir() else source
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    return env


def measure(cases: dict[str, tuple[list[str], dict]], runs: int) -> dict[str, dict]:
    """Every case ``runs`` times, interleaved (after one untimed run each to warm the page
    cache), so a burst of load on the machine hits all of them alike."""
    for argv, env in cases.values():
        subprocess.run(argv, capture_output=True, env=env, check=True)
    samples: dict[str, list[tuple[float, float]]] = {label: [] for label in cases}
    for _ in range(runs):
        for label, (argv, env) in cases.items():
            samples[label].append(run_once(argv, env))
    results = {}
    for label, pairs in samples.items():
        walls, cpus = [w for w, _ in pairs], [c for _, c in pairs]
        results[label] = {"median_s": median(walls), "min_s": min(walls), "max_s": max(walls),
                          "median_cpu_s": median(cpus), "min_cpu_s": min(cpus), "runs": len(pairs)}
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--baseline", type=Path, help="another aiot source tree, timed alongside")
    args = parser.parse_args()
    script = shutil.which("aiot", path=str(Path(sys.executable).parent)) or "aiot"
    here = environment(ROOT if (ROOT / "src" / "aiot" / "host").is_dir() else None)
    cases = {
        "python -c pass": ([sys.executable, "-c", "pass"], here),
        "python -c 'import typer'": ([sys.executable, "-c", "import typer"], here),
        "aiot --help": ([script, "--help"], here),
        "aiot convert --help": ([script, "convert", "--help"], here),
    }
    if args.baseline:
        base = environment(args.baseline.resolve())
        cases["baseline: aiot --help"] = ([script, "--help"], base)
        cases["baseline: aiot convert --help"] = ([script, "convert", "--help"], base)
    results = measure(cases, args.runs)
    rows = [[label, f"{r['median_s']:.3f}", f"{r['min_s']:.3f}", f"{r['max_s']:.3f}",
             f"{r['median_cpu_s']:.3f}"] for label, r in results.items()]
    print_table(["command", "median s", "min s", "max s", "median CPU s"], rows)
    help_median = results["aiot --help"]["median_s"]
    verdict = "PASS" if help_median <= TARGET_S else "FAIL"
    print(f"\naiot --help median {help_median:.3f} s, target ≤ {TARGET_S} s: {verdict}")
    if args.baseline:
        for command in ("aiot --help", "aiot convert --help"):
            now, then = results[command]["median_cpu_s"], results[f"baseline: {command}"]["median_cpu_s"]
            print(f"{command}: CPU {then:.3f} s (baseline) → {now:.3f} s ({now / then:.2f}×)")
    path = write_json("cli_startup", {"target_s": TARGET_S, "verdict": verdict, "results": results,
                                      "baseline": str(args.baseline) if args.baseline else None})
    print(f"wrote {path}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
