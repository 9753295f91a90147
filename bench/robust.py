"""The robustness suites in full on this machine: Fashion-MNIST FP32 and BNN, and EfficientNet-Lite0.

Models: ``tiny_vgg`` trained on Fashion-MNIST (``--train-limit`` images, ``--epochs``, BiBench's
recipe as ``bench/bibench.py``; cached) in full precision, deployed as TFLite, and binarized
with BNN, deployed as LCE; ``efficientnet_lite0`` with its packaged ImageNet weights on the
unlabelled photo set (flip rate and top-1 agreement only), deployed as TFLite. Every suite runs
through ``aiot robust … --json`` against ``--device`` (default ``local``), so what is measured
is exactly what the CLI stores; the records land in a temporary result store and the
``aiot report`` of them is written to ``bench/out/robust-report/``.

Suites: ``sysnoise`` (all types; the platform type on every ``--device``), ``corrupt`` (15 x 5,
flip probability; the FP32 model with ``--compare-binarized bnn`` for OM_robust), ``attack``
(white-box and transfer on ``--attack-limit`` images, black-box with their query budgets on
``--blackbox-limit`` images).

Usage: ``python bench/robust.py [--limit 1000] [--attack-limit 100] [--blackbox-limit 10]
[--queries N] [--device local[,D2]] [--skip-efficientnet] [--suites sysnoise,corrupt,attack]
[--name robust]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import OUT_DIR, print_table, write_json

MODEL = "tiny_vgg"


def trained_weights(train_limit: int, epochs: int) -> dict[str | None, str]:
    """FP32 and BNN weights of tiny_vgg (trained once, then cached)."""
    from aiot.host.training.trainer import TrainConfig, train

    weights = {}
    for algorithm in (None, "bnn"):
        result = train(TrainConfig(model=MODEL, dataset="fashion-mnist", epochs=epochs, limit=train_limit,
                                   binarize=algorithm))
        print(f"  {algorithm or 'fp32'}: {result.test_accuracy:.2%} test top-1"
              f"{' (cached)' if result.cached else ''}", file=sys.stderr, flush=True)
        weights[algorithm] = str(result.weights_path)
    return weights


def aiot(results: Path, *args: str) -> dict:
    """``aiot --results-dir RESULTS ARGS --json`` → its JSON, with the wall time added."""
    command = [sys.executable, "-m", "aiot", "--results-dir", str(results), *args, "--json"]
    print("$ aiot " + " ".join(args), file=sys.stderr, flush=True)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        print(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}",
              file=sys.stderr)
        return {"failed": done.stderr.strip()[-2000:], "seconds": seconds}
    return {**json.loads(done.stdout), "seconds": seconds}


def suites(args, weights: dict) -> list[dict]:
    """Every (label, suite, CLI arguments) the benchmark runs."""
    fp = ["--model", MODEL, "--weights", weights[None]]
    bnn = ["--model", MODEL, "--weights", weights["bnn"], "--binarize", "bnn"]
    where = ["--device", args.device]
    labelled = ["--dataset", "fashion-mnist", "--seed", "0"]
    queries = ["--queries", str(args.queries)] if args.queries else []
    runs = [
        ("fp32", "sysnoise", [*fp, "--format", "tflite", *where, *labelled, "--limit", str(args.limit)]),
        ("bnn", "sysnoise", [*bnn, "--format", "lce", *where, *labelled, "--limit", str(args.limit)]),
        ("fp32 vs bnn", "corrupt", [*fp, "--format", "tflite", "--device", args.device.split(",")[0],
                                    *labelled, "--limit", str(args.limit), "--compare-binarized", "bnn",
                                    "--compare-weights", weights["bnn"]]),
    ]
    for label, model, fmt in (("fp32", fp, "tflite"), ("bnn", bnn, "lce")):
        first = ["--format", fmt, "--device", args.device.split(",")[0], *labelled]
        runs.append((label, "attack", [*model, *first, "--limit", str(args.attack_limit),
                                       "--attacks", "white-box,transfer", "--source-weights",
                                       weights["bnn" if label == "fp32" else None],
                                       *(["--source-binarize", "bnn"] if label == "fp32" else []),
                                       "--eps-curve", args.eps_curve]))
        runs.append((label, "attack", [*model, *first, "--limit", str(args.blackbox_limit),
                                       "--attacks", "black-box", *queries]))
    if not args.skip_efficientnet:
        photos = ["--model", "efficientnet_lite0", "--dataset", "photos"]
        runs += [
            ("efficientnet_lite0", "sysnoise", [*photos, "--format", "tflite", *where,
                                                "--types", "decoder,resize,colour,variants,platform"]),
            ("efficientnet_lite0", "corrupt", [*photos, "--format", "tflite", "--device",
                                               args.device.split(",")[0]]),
        ]
    return runs


def _summary_rows(runs: list[dict]) -> list[list]:
    rows = []
    for run in runs:
        data = run["output"]
        if "failed" in data:
            rows.append([run["label"], run["suite"], "failed", "", f"{data['seconds']:.0f}"])
            continue
        summary = data.get("summary") or {}
        shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in list(summary.items())[:8])
        clean = data.get("clean_accuracy")
        rows.append([run["label"], run["suite"], "ok", "—" if clean is None else f"{clean:.2%}",
                     f"{data['seconds']:.0f}", shown])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=1000, help="test images for sysnoise and corrupt")
    parser.add_argument("--attack-limit", type=int, default=100, help="images for white-box/transfer attacks")
    parser.add_argument("--blackbox-limit", type=int, default=10, help="images for black-box attacks")
    parser.add_argument("--queries", type=int, default=None, help="query budget override for black-box attacks")
    parser.add_argument("--eps-curve", default="0,0.01,0.02,0.03,0.05", help="L-inf budgets of the accuracy curve")
    parser.add_argument("--device", default="local", help="devices, comma-separated (the first runs corrupt/attack)")
    parser.add_argument("--train-limit", type=int, default=10000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--skip-efficientnet", action="store_true")
    parser.add_argument("--suites", default="sysnoise,corrupt,attack", help="suites to run, comma-separated")
    parser.add_argument("--name", default="robust", help="bench/out/NAME.json and NAME-report/")
    args = parser.parse_args()
    print("training (cached after the first time)", file=sys.stderr)
    weights = trained_weights(args.train_limit, args.epochs)
    settings = {"suites": args.suites, "limit": args.limit, "attack_limit": args.attack_limit,
                "blackbox_limit": args.blackbox_limit, "queries": args.queries, "eps_curve": args.eps_curve,
                "device": args.device, "train_limit": args.train_limit, "epochs": args.epochs}
    runs = []
    with tempfile.TemporaryDirectory(prefix="aiot-bench-robust-") as tmp:
        results = Path(tmp)
        chosen = set(args.suites.split(","))
        for label, suite, cli_args in [r for r in suites(args, weights) if r[1] in chosen]:
            runs.append({"label": label, "suite": suite, "args": cli_args,
                         "output": aiot(results, "robust", suite, *cli_args)})
            # after every suite: an interrupted benchmark keeps what it measured
            write_json(args.name, {**settings, "complete": False, "runs": runs})
        report = OUT_DIR / f"{args.name}-report"
        shutil.rmtree(report, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "aiot", "--results-dir", str(results), "report",
                        "--out", str(report), "--format", "md"], check=False, capture_output=True)
    print("\nRobustness suites (summary; full tables in the JSON and the report)")
    print_table(["model", "suite", "status", "clean top-1", "seconds", "summary"], _summary_rows(runs))
    path = write_json(args.name, {**settings, "complete": True, "runs": runs})
    print(f"\nwrote {path} and {OUT_DIR / (args.name + '-report')}")


if __name__ == "__main__":
    main()
