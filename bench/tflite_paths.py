"""TFLite from litert-torch vs TFLite from the other public path (ONNX → onnx2tf), same runtime.

For each model: aiot's TFLite artifact (litert-torch, NCHW input kept by one TRANSPOSE) and
onnx2tf 1.29's float32 TFLite made from aiot's ONNX artifact (NHWC input), both run by
LiteRT through the device agent's backend in this process. Reports each file's parity with
PyTorch (max abs error, inputs transposed for onnx2tf), op count and size, and the median
``invoke`` latency at 1 thread over interleaved rounds, as the ratio onnx2tf / litert-torch.

Needs the ``onnx2tf`` toolchain (``aiot toolchains install onnx2tf``, ~2.6 GB: TensorFlow 2.19).
Usage: ``python bench/tflite_paths.py [--models tiny_cnn,resnet18_mnist,...] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_json  # noqa: E402

CALIBRATION = "calibration_image_sample_data_20x128x128x3_float32.npy"


def onnx2tf_tflite(onnx_path: Path, work: Path) -> Path:
    """onnx2tf's float32 ``.tflite`` for ``onnx_path`` (run in its toolchain, offline)."""
    import numpy as np

    from aiot.core import toolchains

    # onnx2tf 1.x downloads this calibration file at conversion time for 3-channel inputs and
    # crashes offline; a local file of the expected shape is used instead (only for int8).
    np.save(work / CALIBRATION, np.random.default_rng(0).random((20, 128, 128, 3), dtype=np.float32))
    out = work / "onnx2tf"
    toolchains.run_python("onnx2tf", ["-m", "onnx2tf", "-i", str(onnx_path), "-o", str(out), "-n"],
                          cwd=work, timeout=1800, what="onnx2tf")
    return next(out.glob("*_float32.tflite"))


def median_invoke_ms(session, x, iterations: int) -> float:
    session.set_input(x)
    samples = []
    for _ in range(iterations):
        t0 = time.perf_counter_ns()
        session.invoke()
        samples.append((time.perf_counter_ns() - t0) / 1e6)
    return statistics.median(samples)


def compare(model: str, work: Path, rounds: int) -> dict:
    import numpy as np
    import torch

    from aiot.converters.api import build_source_model, convert_model
    from aiot.converters.tflite import tflite_ops
    from aiot.device_agent.backends import litert_backend

    ours = convert_model(model, "tflite", work).artifact
    onnx = convert_model(model, "onnx", work).artifact
    started = time.perf_counter()
    theirs = onnx2tf_tflite(onnx, work)
    onnx2tf_s = time.perf_counter() - started
    spec, net = build_source_model(model)
    x = spec.example_input(batch=1, seed=3)
    with torch.no_grad():
        ref = net.eval()(x).numpy()
    a = litert_backend.open(str(ours), 1)
    b = litert_backend.open(str(theirs), 1)
    xa = x.numpy()
    xb = np.ascontiguousarray(xa.transpose(0, 2, 3, 1)) if tuple(b.input_shape) != tuple(a.input_shape) else xa
    err_a = float(np.abs(a.run(xa).reshape(ref.shape) - ref).max())
    err_b = float(np.abs(b.run(xb).reshape(ref.shape) - ref).max())
    iterations = max(5, int(0.5 / max(median_invoke_ms(a, xa, 3) / 1e3, 1e-4)))
    ma, mb = [], []
    for _ in range(rounds):  # interleaved: machine noise hits both files alike
        ma.append(median_invoke_ms(a, xa, iterations))
        mb.append(median_invoke_ms(b, xb, iterations))
    return {"model": model, "litert_torch": {"size_bytes": ours.stat().st_size, "max_abs": err_a,
                                             "ops": len(tflite_ops(ours)), "median_ms": statistics.median(ma),
                                             "input_shape": list(a.input_shape)},
            "onnx2tf": {"size_bytes": theirs.stat().st_size, "max_abs": err_b, "ops": len(tflite_ops(theirs)),
                        "median_ms": statistics.median(mb), "input_shape": list(b.input_shape),
                        "convert_s": onnx2tf_s},
            "ratio_onnx2tf_over_litert_torch": statistics.median(mb) / statistics.median(ma),
            "rounds": rounds, "iterations_per_round": iterations}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny_cnn,resnet18_mnist,mobilenet_v2_mnist")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="aiot-bench-tflite-") as tmp:
        for model in [m.strip() for m in args.models.split(",") if m.strip()]:
            work = Path(tmp) / model
            work.mkdir()
            print(f"  {model}…", file=sys.stderr, flush=True)
            rows.append(compare(model, work, args.rounds))
    print_table(["model", "path", "input", "ops", "size MB", "max abs", "median ms", "onnx2tf / litert-torch"],
                [[r["model"], path, "x".join(map(str, r[path]["input_shape"])), r[path]["ops"],
                  f"{r[path]['size_bytes'] / 1e6:.2f}", f"{r[path]['max_abs']:.1e}", f"{r[path]['median_ms']:.3f}",
                  f"{r['ratio_onnx2tf_over_litert_torch']:.2f}" if path == "onnx2tf" else ""]
                 for r in rows for path in ("litert_torch", "onnx2tf")])
    print(f"\nwrote {write_json('tflite_paths', {'models': [r['model'] for r in rows], 'results': rows})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
