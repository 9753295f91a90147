"""Parity of an 8-bit LSQ model's integer artifacts with the fake-quantized PyTorch model, per
runtime, on many real test images: what ``aiot convert``'s top-1 rule samples, measured wide.

For each format (onnx: ONNX Runtime's QDQ integer kernels; executorch: XNNPACK QS8; tflite:
int8 CONV_2D), the model is converted as ``aiot convert MODEL -f FORMAT`` does (the same
weights choice: ``--weights``, else the newest ``aiot train`` of it in the weights folder) and
convert's own verdict is kept (its rule: top-1 agreement ≥ ``QDQ_MIN_TOP1`` on the test images
``parity_image_count`` gives it, 300). A format convert refuses is exported again without that
check, so that it is measured all the same. Each artifact then runs through the device
agent's backend (the code a device runs), one image at a time, on ``--images`` Fashion-MNIST
test images, against the fake-quantized model; the PyTorch Q/DQ rewrite of each format (the
graph that was exported, run in PyTorch) is measured too. Per row: top-1 agreement, max and
mean abs error of the logits, each side's accuracy on the labels, and the fake-quantized
model's top-2 logit margin on the images where they disagree (a level boundary moved by the
int kernels' int32 bias flips only images whose margin is small), with the agreement on the
images whose margin is above ``--margin``.

Usage: ``python bench/quant_parity.py [--model resnet18_mnist_lsq8] [--weights FILE]
[--formats onnx,executorch,tflite] [--images 1000] [--margin 0.2] [--artifacts DIR]
[--out quant-parity]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_json  # noqa: E402


def convert(ref, fmt: str, out: Path, weights: Path | None) -> tuple[Path, dict, dict]:
    """``(artifact, convert's verdict, the converter's facts)``: the artifact ``aiot convert``
    writes; where its parity rule refuses it, the same export without the check (the bench
    measures it anyway)."""
    from aiot.converters import api
    from aiot.core.errors import AccuracyMismatch

    started = time.perf_counter()
    try:
        result = api.convert_model(ref, fmt, out, weights=weights)
        data = result.parity["dataset"]
        verdict = {"status": result.parity["verdict"], "n": data["n"],
                   "top1_agreement": data["top1_agreement"], "cached": result.cached}
        artifact, facts = result.artifact, result.facts["converter"]
    except AccuracyMismatch as exc:
        data = exc.report.get("dataset") or exc.report
        verdict = {"status": "refused", "n": data["n"], "top1_agreement": data["top1_agreement"],
                   "reason": exc.message}
        plan = api._plan(ref, fmt, out, weights, None, None, None)  # noqa: SLF001 - the same export
        exported = api._export_artifact(plan)  # noqa: SLF001 - minus the check that refused it
        artifact, facts = plan.artifact, exported.facts
    verdict["seconds"] = round(time.perf_counter() - started, 1)
    return artifact, verdict, facts


def integer_convs(fmt: str, artifact: Path, facts: dict) -> dict:
    """The artifact's convolutions, int8 and float, counted from the file where it can be read:
    ONNX Runtime's optimized graph (QLinearConv), the TFLite file's CONV_2D tensors (int8
    weights); ExecuTorch's ``.pte`` by the converter's ``facts`` (counted on the lowered graph)."""
    if fmt == "onnx":
        import onnx
        import onnxruntime as ort

        with tempfile.TemporaryDirectory() as tmp:
            options = ort.SessionOptions()
            options.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
            ort.InferenceSession(str(artifact), options, providers=["CPUExecutionProvider"])
            ops = [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]
        return {"int8": ops.count("QLinearConv"), "float": ops.count("Conv") + ops.count("FusedConv")}
    if fmt == "tflite":
        import numpy as np
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        interpreter = Interpreter(model_path=str(artifact), experimental_op_resolver_type=
                                  OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
        convs = [op for op in interpreter._get_ops_details() if "CONV_2D" in op["op_name"]]  # noqa: SLF001
        int8 = sum(tensors[op["inputs"][1]]["dtype"] == np.int8 for op in convs)
        return {"int8": int(int8), "float": len(convs) - int(int8)}
    return dict(facts.get("delegated_convs") or {})


def margins(logits):
    """Each row's top-1 minus top-2 logit."""
    import numpy as np

    top2 = np.sort(logits, axis=1)[:, -2:]
    return top2[:, 1] - top2[:, 0]


def compare(name: str, reference, actual, labels, margin: float) -> dict:
    """One row: the artifact's (or rewrite's) outputs against the fake-quantized model's."""
    import numpy as np

    ref_top, act_top = reference.argmax(1), actual.argmax(1)
    agree = ref_top == act_top
    ref_margin = margins(reference)
    wide = ref_margin >= margin
    flipped = ref_margin[~agree]
    return {"runtime": name, "n": len(reference), "agree": int(agree.sum()),
            "top1_agreement": float(agree.mean()),
            "max_abs": float(np.abs(reference - actual).max()),
            "mean_abs": float(np.abs(reference - actual).mean()),
            "accuracy": float((act_top == labels).mean()),
            "reference_accuracy": float((ref_top == labels).mean()),
            "disagreement_margins": sorted(round(float(m), 4) for m in flipped),
            "wide_margin": margin, "wide_n": int(wide.sum()),
            "wide_top1_agreement": float(agree[wide].mean()) if wide.any() else None}


def main() -> int:
    import numpy as np
    import torch

    from aiot.converters.base import get_converter
    from aiot.converters.parity import run_artifact
    from aiot.converters.qdq import build_quantized_source, qdq_model
    from aiot.host.engine.weights import choose_weights
    from aiot.models.datasets import load_dataset
    from aiot.models.model_ref import resolve_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18_mnist_lsq8")
    parser.add_argument("--weights", type=Path, default=None)
    parser.add_argument("--formats", default="onnx,executorch,tflite")
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--margin", type=float, default=0.2)
    parser.add_argument("--artifacts", type=Path, default=None,
                        help="where to convert (default: a temporary folder)")
    parser.add_argument("--out", default="quant-parity")
    args = parser.parse_args()
    ref = resolve_model(args.model, quantized_ok=True)
    weights = choose_weights(ref, args.weights).path
    if weights is None:
        print(f"{args.model} has no trained weights: aiot train it first (or --weights FILE)")
        return 2
    spec, model = build_quantized_source(ref, weights)
    x, y = load_dataset("fashion-mnist", spec.input, split="test", limit=args.images, seed=1)
    with torch.no_grad():
        reference = model(torch.from_numpy(x)).numpy().astype(np.float64)
    rows, verdicts = [], {}
    with tempfile.TemporaryDirectory(prefix="aiot-bench-qdq-") as tmp:
        out = args.artifacts or Path(tmp)
        for fmt in args.formats.split(","):
            with torch.no_grad():
                rewrite = qdq_model(model, fmt)(torch.from_numpy(x)).numpy().astype(np.float64)
            rows.append(compare(f"{fmt}: PyTorch Q/DQ rewrite", reference, rewrite, y, args.margin))
            artifact, verdicts[fmt], facts = convert(ref, fmt, out, weights)
            converter = get_converter(fmt)
            started = time.perf_counter()
            actual = np.asarray(run_artifact(converter.backend, artifact, x), dtype=np.float64)
            rows.append({**compare(f"{fmt}: {converter.backend}", reference, actual, y, args.margin),
                         "artifact": artifact.name, "size_bytes": artifact.stat().st_size,
                         "convs": integer_convs(fmt, artifact, facts),
                         "run_seconds": round(time.perf_counter() - started, 1),
                         "convert": verdicts[fmt]})
            print(f"{rows[-1]['runtime']}: {rows[-1]['top1_agreement']:.1%}", flush=True)
    write_json(args.out, {"model": args.model, "weights": weights.name, "images": args.images,
                          "dataset": "fashion-mnist test (class-balanced subset, seed 1)",
                          "rows": rows, "convert": verdicts})
    print_table(["runtime", "top-1 agree", "max abs", "mean abs", "acc", "fake-quant acc",
                 f"agree (margin ≥ {args.margin})", "flipped margins", "int8/float convs",
                 "convert"],
                [[r["runtime"], f"{r['top1_agreement']:.1%} ({r['agree']}/{r['n']})",
                  f"{r['max_abs']:.3f}", f"{r['mean_abs']:.4f}", f"{r['accuracy']:.1%}",
                  f"{r['reference_accuracy']:.1%}",
                  "—" if r["wide_top1_agreement"] is None else
                  f"{r['wide_top1_agreement']:.1%} of {r['wide_n']}",
                  "—" if not r["disagreement_margins"] else
                  f"≤ {max(r['disagreement_margins']):.3f}",
                  "" if "convs" not in r else f"{r['convs'].get('int8')}/{r['convs'].get('float')}",
                  _verdict(r.get("convert"))]
                 for r in rows])
    return 0


def _verdict(verdict: dict | None) -> str:
    if verdict is None:
        return ""
    return f"{verdict['status']} ({verdict['top1_agreement']:.1%} of {verdict['n']})"


if __name__ == "__main__":
    sys.exit(main())
