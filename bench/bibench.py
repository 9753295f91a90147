"""BiBench on this machine: accuracy and training time per algorithm, deployed accuracy on
LCE and daBNN, and LCE binarized vs FP32 TFLite latency per thread count (OM_infer).

Part 1 (accuracy track): ``tiny_vgg`` in full precision and binarized with each of the eight
algorithms, trained on a class-balanced Fashion-MNIST subset (``--limit``) for ``--epochs``
with BiBench's recipe (Adam, cosine; binarized runs fine-tune the FP model), evaluated on the
full 10,000-image test split. Seconds per epoch are the median over epochs; cached runs
report the time of their original training.

Part 2 (deployment): the trained BNN and ReActNet models converted to LCE and daBNN. The LCE
accuracy is measured through the same agent path as ``aiot run --dataset`` on ``local``;
daBNN has no x86 runtime, so its accuracy is that of aiot's NumPy executor of daBNN's
semantics (the artifact's parity reference), labelled as such. Both are compared with
PyTorch's accuracy on the same 10,000 images.

Part 3 (hardware inference): FP32 TFLite (XNNPACK) against LCE BNN and ReActNet on ``local``
for each thread count, in interleaved rounds (median per cell), for the trained tiny_vgg
and, with random weights (timing only), BiBench's VGG-Small and ResNet-18 at 28 px. Speedup
T_fp32/T_bin, compression S_fp32/S_bin and OM_infer are computed as ``aiot score om-infer``
does. LCE's optimized kernels target ARM; on x86 it runs portable code, so this part measures
this machine, not BiBench's phones.

Usage: ``python bench/bibench.py [--limit 10000] [--epochs 3] [--threads 1,2,4] [--rounds 3]
[--timing-models tiny_vgg,vgg_small_mnist,resnet18_mnist] [--skip-training]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_json

MODEL = "tiny_vgg"
DEPLOYED = ("bnn", "reactnet")


def train_all(limit: int, epochs: int) -> dict[str | None, dict]:
    """Part 1: FP32 and every algorithm; returns rows keyed by algorithm (None: FP32)."""
    from aiot.host.training.trainer import TrainConfig, train
    from aiot.models.bibench import ALGORITHMS

    rows = {}
    for algorithm in (None, *ALGORITHMS.names()):
        config = TrainConfig(model=MODEL, dataset="fashion-mnist", epochs=epochs, limit=limit,
                             binarize=algorithm)
        started = time.perf_counter()
        result = train(config)
        per_epoch = statistics.median(h["seconds"] for h in result.history)
        rows[algorithm] = {"algorithm": algorithm or "fp32", "test_accuracy": result.test_accuracy,
                           "s_per_epoch": per_epoch, "epochs": result.epochs_run,
                           "cached": result.cached, "weights": str(result.weights_path),
                           "wall_s": time.perf_counter() - started}
        print(f"  {algorithm or 'fp32'}: {result.test_accuracy:.2%} ({per_epoch:.1f} s/epoch"
              f"{', cached' if result.cached else ''})", file=sys.stderr, flush=True)
    return rows


def _test_split():
    import torch

    from aiot.models import get_model_spec
    from aiot.models.datasets import load_dataset

    x, y = load_dataset("fashion-mnist", get_model_spec(MODEL).input, "test")
    return torch.from_numpy(x), torch.from_numpy(y)


def deploy(trained: dict, results_dir: Path) -> list[dict]:
    """Part 2: PyTorch vs LCE (agent on local) vs daBNN (reference executor) accuracy."""
    import numpy as np

    from aiot.converters import get_converter
    from aiot.converters.api import convert_model
    from aiot.host.engine.campaign import run_sweep
    from aiot.host.engine.runs import MeasureParams, RunRequest
    from aiot.host.engine.workspace import Workspace
    from aiot.host.store import open_store
    from aiot.host.training.trainer import evaluate
    from aiot.models import get_model_spec
    from aiot.models.bibench import build_binarized

    x, y = _test_split()
    rows = []
    params = MeasureParams(warmup_runs=1, warmup_min_s=0.0, min_runs=5, min_s=0.0, max_s=10.0)
    with open_store(results_dir) as store:
        for algorithm in DEPLOYED:
            weights = Path(trained[algorithm]["weights"])
            torch_acc = evaluate(build_binarized(get_model_spec(MODEL), algorithm, weights), x, y)
            request = RunRequest("local", MODEL, "lce", 1, weights=weights, dataset="fashion-mnist",
                                 params=params, binarize=algorithm)
            (record,) = run_sweep([request], Workspace(results_dir))
            lce_acc = record.accuracy if record.status == "ok" else None
            dab = convert_model(MODEL, "dabnn", results_dir / "artifacts", weights=weights,
                                binarize=algorithm)
            logits = np.concatenate([get_converter("dabnn").reference_outputs(dab.artifact, x[i:i + 500].numpy())
                                     for i in range(0, len(y), 500)])
            dab_acc = float((logits.argmax(1) == y.numpy()).mean())
            rows.append({"algorithm": algorithm, "pytorch": torch_acc, "lce": lce_acc,
                         "lce_status": record.status, "lce_reason": record.reason,
                         "dabnn_reference": dab_acc, "lce_size": record.size_bytes,
                         "dabnn_size": dab.size_bytes})
            print(f"  {algorithm}: torch {torch_acc:.2%}, lce {lce_acc}, dabnn(ref) {dab_acc:.2%}",
                  file=sys.stderr, flush=True)
    return rows


def latency(trained: dict | None, models: list[str], threads: list[int], rounds: int,
            results_dir: Path, algorithms: tuple[str, ...] = DEPLOYED) -> list[dict]:
    """Part 3: median latency per (model, runtime, threads) over interleaved rounds, FP32
    TFLite and LCE for each of ``algorithms``."""
    from aiot.host.engine.campaign import run_sweep
    from aiot.host.engine.runs import MeasureParams, RunRequest
    from aiot.host.engine.workspace import Workspace
    from aiot.host.store import open_store

    params = MeasureParams(warmup_runs=5, warmup_min_s=0.2, min_runs=30, min_s=0.5, max_s=30.0)
    requests = []
    for model in models:
        weights = {None: None, **{a: None for a in algorithms}}
        if model == MODEL and trained:
            weights = {a: Path(trained[a]["weights"]) for a in (None, *algorithms)}
        for t in threads:
            requests.append(RunRequest("local", model, "tflite", t, weights=weights[None], params=params))
            for algorithm in algorithms:
                requests.append(RunRequest("local", model, "lce", t, weights=weights[algorithm],
                                           params=params, binarize=algorithm))
    samples: dict[tuple, list[float]] = {}
    sizes: dict[tuple, int] = {}
    with open_store(results_dir) as store:
        workspace = Workspace(results_dir)
        for round_index in range(rounds):
            print(f"  round {round_index + 1}/{rounds}", file=sys.stderr, flush=True)
            for record in run_sweep(requests, workspace):
                key = (record.model, record.spec.get("binarize") or "fp32", record.format, record.threads)
                if record.status != "ok":
                    print(f"  {key}: {record.reason}", file=sys.stderr)
                    continue
                samples.setdefault(key, []).append(record.median_ms)
                sizes[key] = record.size_bytes
    return [{"model": k[0], "algorithm": k[1], "format": k[2], "threads": k[3],
             "median_ms": statistics.median(v), "rounds": len(v), "size_bytes": sizes[k]}
            for k, v in sorted(samples.items())]


def om_infer_rows(timings: list[dict]) -> tuple[list[dict], list[dict]]:
    """Speedup/compression per (model, algorithm, threads) and OM_infer per algorithm."""
    from aiot.host.scores.om_infer import om_infer_value

    fp = {(r["model"], r["threads"]): r for r in timings if r["algorithm"] == "fp32"}
    pairs = []
    for r in timings:
        base = fp.get((r["model"], r["threads"]))
        if r["algorithm"] == "fp32" or base is None:
            continue
        pairs.append({"model": r["model"], "algorithm": r["algorithm"], "threads": r["threads"],
                      "fp32_ms": base["median_ms"], "bin_ms": r["median_ms"],
                      "speedup": base["median_ms"] / r["median_ms"],
                      "compression": base["size_bytes"] / r["size_bytes"]})
    scores = []
    for algorithm in DEPLOYED:
        mine = [p for p in pairs if p["algorithm"] == algorithm]
        if mine:
            s = statistics.mean(p["speedup"] for p in mine)
            c = statistics.mean(p["compression"] for p in mine)
            scores.append({"algorithm": algorithm, "pairs": len(mine), "speedup": s,
                           "compression": c, "om_infer": om_infer_value(s, c)})
    return pairs, scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=10000, help="training images (class-balanced)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", default="1,2,4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timing-models", default=f"{MODEL},vgg_small_mnist,resnet18_mnist")
    parser.add_argument("--skip-training", action="store_true", help="parts 1-2 skipped; random weights")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    trained, deployed = None, []
    with tempfile.TemporaryDirectory(prefix="aiot-bibench-") as tmp:
        results_dir = Path(tmp)
        if not args.skip_training:
            print("part 1: training on Fashion-MNIST", file=sys.stderr)
            trained = train_all(args.limit, args.epochs)
            print("part 2: deployed accuracy", file=sys.stderr)
            deployed = deploy(trained, results_dir)
        print("part 3: latency", file=sys.stderr)
        timings = latency(trained, args.timing_models.split(","), threads, args.rounds, results_dir)
    pairs, scores = om_infer_rows(timings)
    if trained:
        print(f"\nAccuracy on Fashion-MNIST ({MODEL}, {args.limit} training images, {args.epochs} epochs, "
              "10,000 test images)")
        print_table(["algorithm", "test top-1", "s/epoch", "cached"],
                    [[r["algorithm"], f"{r['test_accuracy']:.2%}", f"{r['s_per_epoch']:.1f}", r["cached"]]
                     for r in trained.values()])
        print("\nDeployed accuracy (10,000 test images)")
        print_table(["algorithm", "PyTorch", "LCE (agent, local)", "daBNN (reference executor)", "max |Δ| pp"],
                    [[r["algorithm"], f"{r['pytorch']:.2%}",
                      "failed" if r["lce"] is None else f"{r['lce']:.2%}", f"{r['dabnn_reference']:.2%}",
                      f"{100 * max(abs((r['lce'] or 0) - r['pytorch']), abs(r['dabnn_reference'] - r['pytorch'])):.2f}"]
                     for r in deployed])
    print("\nLatency on local (median over rounds): FP32 TFLite vs LCE")
    print_table(["model", "algorithm", "threads", "fp32 ms", "binarized ms", "speedup", "compression"],
                [[p["model"], p["algorithm"], p["threads"], f"{p['fp32_ms']:.3f}", f"{p['bin_ms']:.3f}",
                  f"{p['speedup']:.2f}x", f"{p['compression']:.1f}x"] for p in pairs])
    print_table(["algorithm", "pairs", "speedup", "compression", "OM_infer"],
                [[s["algorithm"], s["pairs"], f"{s['speedup']:.2f}x", f"{s['compression']:.1f}x",
                  f"{s['om_infer']:.2f}"] for s in scores])
    path = write_json("bibench", {"limit": args.limit, "epochs": args.epochs, "threads": threads,
                                  "rounds": args.rounds, "training": list((trained or {}).values()),
                                  "deployed": deployed, "timings": timings, "pairs": pairs,
                                  "om_infer": scores})
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
