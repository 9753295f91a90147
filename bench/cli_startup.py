"""CLI start-up cost: median wall and CPU time of ``aiot --help`` (target ≤ 0.3 s wall), and
every ``--help`` page's CPU against it (target: each ≤ 2× of ``aiot --help``, issue 53).

Compared in the same run with a bare ``python -c pass`` and ``python -c 'import typer'`` so
machine noise shows up in the baselines too. CPU time (user + system of the child) is what
start-up really costs: on a loaded machine wall time also counts the wait for a core.
``--baseline DIR`` times another aiot source tree in the same run, interleaved with this one
(e.g. a ``git worktree`` of an older commit; DIR is put first on PYTHONPATH, so it needs an
importable ``aiot`` under DIR/src or DIR): the table then says how start-up changed.

Then every help page (the root, each group and each command, found by walking the Click tree
of ``aiot.host.cli.app.app``) is timed ``--page-runs`` times, interleaved, after one untimed
run each; a second table lists each page's median CPU s and its ratio to the median CPU of
``aiot --help`` in those same runs, worst first, and a line says PASS when every page is at
most ``PAGE_RATIO``× (FAIL names the pages over it). ``--page-runs 0`` skips the pages. The
JSON (bench/out/cli_startup.json) holds both: ``results`` and ``pages`` (with ``page_verdict``).
Children run without PYTHONDONTWRITEBYTECODE, as a user's install does: with it, every import
compiles from source and the CPU numbers mean nothing.
Usage: ``python bench/cli_startup.py [--runs N] [--page-runs N] [--baseline DIR]``.
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
PAGE_RATIO = 2.0  # every help page's CPU ≤ this × that of `aiot --help` (issue 53)
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
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's install has .pyc files
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


# Prints every help page's command words, one page a line: the root (an empty line), each
# group and each command, in the order the help lists them.
_PAGES = """
import typer.main
from typer import _click as click
from aiot.host.cli.app import app

def walk(command, words, ctx):
    print(" ".join(words))
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                walk(sub, [*words, name], click.Context(sub, info_name=name, parent=ctx))

root = typer.main.get_command(app)
walk(root, [], click.Context(root, info_name="aiot"))
"""


def help_pages(env: dict) -> list[list[str]]:
    """Every help page's command words (``[]`` for the root), read in a child that imports the
    CLI as the timed runs do."""
    out = subprocess.run([sys.executable, "-c", _PAGES], capture_output=True, env=env,
                         check=True, text=True).stdout
    return [line.split() for line in out.splitlines()]


def time_pages(script: str, env: dict, runs: int) -> dict:
    """Each help page's median CPU s and its ratio to that of ``aiot --help``, worst first."""
    cases = {" ".join(["aiot", *words, "--help"]): ([script, *words, "--help"], env)
             for words in help_pages(env)}
    results = measure(cases, runs)
    base = results["aiot --help"]["median_cpu_s"]
    pages = {label: {"median_cpu_s": r["median_cpu_s"], "min_cpu_s": r["min_cpu_s"],
                     "median_s": r["median_s"], "ratio": r["median_cpu_s"] / base}
             for label, r in sorted(results.items(), key=lambda item: -item[1]["median_cpu_s"])}
    over = [label for label, page in pages.items() if page["ratio"] > PAGE_RATIO]
    return {"base_cpu_s": base, "ratio_target": PAGE_RATIO, "runs": runs,
            "verdict": "FAIL" if over else "PASS", "over": over, "pages": pages}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--page-runs", type=int, default=3,
                        help="timed runs of every help page (0: skip the pages)")
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
    pages = time_pages(script, here, args.page_runs) if args.page_runs > 0 else None
    if pages:
        print()
        print_table(["help page", "median CPU s", "× aiot --help"],
                    [[label, f"{page['median_cpu_s']:.3f}", f"{page['ratio']:.2f}"]
                     for label, page in pages["pages"].items()])
        worst, page = next(iter(pages["pages"].items()))
        print(f"\n{len(pages['pages'])} help pages, the worst {worst} at {page['ratio']:.2f}× of "
              f"aiot --help ({pages['base_cpu_s']:.3f} s CPU), target every page ≤ {PAGE_RATIO}×: "
              f"{pages['verdict']}" + (f" ({', '.join(pages['over'])})" if pages["over"] else ""))
    path = write_json("cli_startup", {"target_s": TARGET_S, "verdict": verdict, "results": results,
                                      "baseline": str(args.baseline) if args.baseline else None,
                                      "page_verdict": pages["verdict"] if pages else None,
                                      "pages": pages})
    print(f"wrote {path}")
    return 0 if verdict == "PASS" and (pages is None or pages["verdict"] == "PASS") else 1


if __name__ == "__main__":
    sys.exit(main())
