"""Build a TensorFlow graph from aiot's lowered layers and convert it with LCE.

Runs INSIDE the ``lce`` toolchain environment (TensorFlow 2.16, larq-compute-engine,
NumPy < 2) as a script: ``python build.py GRAPH.json WEIGHTS.npz OUT.tflite [--probe-out
PROBE.tflite]`` (see :func:`main`). It
imports nothing from aiot — only the standard library, NumPy and the toolchain.

The graph keeps PyTorch's NCHW input (one transpose to NHWC at the start), so the same
preprocessed tensors feed PyTorch and the artifact. Binary convolutions are written in the
form LCE's converter pattern-matches into ``LceQuantize``/``LceBconv2d``: the *float* input
padded with the layer's pad value, binarized with ``where(x >= 0, 1, -1)``, then a VALID
``conv2d`` with constant ±alpha filters. Padding before binarizing is also what avoids
LCE's mis-fusion of symmetric explicit padding into SAME for stride-2 convolutions, which
gives wrong results (see the runtimes notes, A.5).
"""

from __future__ import annotations

import json
import sys


def _pad(tf, x, pad, value: float):
    """``pad`` pixels (one int, or ``[height, width]``) of ``value`` on both sides of each axis."""
    height, width = (pad, pad) if isinstance(pad, int) else pad
    if not (height or width):
        return x
    return tf.pad(x, [[0, 0], [height, height], [width, width], [0, 0]], constant_values=value)


def _float_pad(tf, x, pad, stride):
    """Zero padding that LCE's converter cannot mis-fuse into SAME.

    LCE rewrites ``Pad(p, p) → Conv(VALID)`` as SAME whenever the output size equals
    ceil(in / stride), but SAME pads (0, 1) for stride 2 on even sizes, not (1, 1): wrong
    outputs (error 4.9 on a 7x7/2 stem here). Padding one extra row and column in front and
    slicing it off again is the same tensor, but no longer a bare Pad feeding the Conv. At
    stride 1 SAME and symmetric padding agree, so the plain form is kept there.
    """
    if not (pad[0] or pad[1]):
        return x
    if stride == [1, 1] or tuple(stride) == (1, 1):
        return tf.pad(x, [[0, 0], [pad[0], pad[0]], [pad[1], pad[1]], [0, 0]])
    x = tf.pad(x, [[0, 0], [pad[0] + 1, pad[0]], [pad[1] + 1, pad[1]], [0, 0]])
    return x[:, 1:, 1:, :]


def _conv(tf, x, layer, w):
    """Float conv: explicit symmetric padding, then VALID (grouped convs as depthwise)."""
    stride, pad, groups = layer["attrs"]["stride"], layer["attrs"]["padding"], layer["attrs"]["groups"]
    x = _float_pad(tf, x, pad, stride)
    strides = [1, stride[0], stride[1], 1]
    if groups == 1:
        y = tf.nn.conv2d(x, w["weight"].transpose(2, 3, 1, 0), strides, "VALID")
    elif groups == w["weight"].shape[0] and w["weight"].shape[1] == 1:
        y = tf.nn.depthwise_conv2d(x, w["weight"].transpose(2, 3, 0, 1), strides, "VALID")
    else:
        raise ValueError(f"layer {layer['name']}: grouped conv with {groups} groups is not supported")
    return y + w["bias"] if "bias" in w else y


def _bconv(tf, x, layer, w):
    attrs = layer["attrs"]
    if "threshold" in w:  # a float subtraction before the binarization (mean-shifting)
        x = x - w["threshold"]
    x = _pad(tf, x, attrs["pad"], attrs["pad_value"])
    x = tf.where(x >= 0.0, 1.0, -1.0)
    stride = attrs["stride"]
    # ±1 filters times the per-output-channel alpha: still "constant ±alpha", which LCE folds.
    filters = w["weight_sign"].transpose(2, 3, 1, 0) * w.get("alpha", 1.0)
    return tf.nn.conv2d(x, filters.astype("float32"), [1, stride[0], stride[1], 1], "VALID")


def _pool(tf, x, layer, kind: str):
    attrs = layer["attrs"]
    pad = attrs["padding"]
    if pad[0] or pad[1]:
        fill = -3.0e38 if kind == "max" else 0.0
        x = tf.pad(x, [[0, 0], [pad[0], pad[0]], [pad[1], pad[1]], [0, 0]], constant_values=fill)
    if attrs.get("ceil_mode"):  # max pooling only (lce.py refuses it for average pooling)
        extra = [_ceil_extra(int(x.shape[1 + i]), attrs["kernel"][i], attrs["stride"][i], pad[i]) for i in (0, 1)]
        x = tf.pad(x, [[0, 0], [0, extra[0]], [0, extra[1]], [0, 0]], constant_values=-3.0e38)
    op = tf.nn.max_pool2d if kind == "max" else tf.nn.avg_pool2d
    return op(x, attrs["kernel"], attrs["stride"], "VALID")


def _ceil_extra(padded: int, kernel: int, stride: int, pad: int) -> int:
    """Pixels to add at the end of an axis so that a VALID pooling gives PyTorch's ceil_mode
    output size: one more window where the last would overhang, unless it would start in
    the padding only (PyTorch drops that one)."""
    out = -(-(padded - kernel) // stride) + 1
    if (out - 1) * stride >= padded - pad:
        out -= 1
    return max(0, (out - 1) * stride + kernel - padded)


def _flatten(tf, x):
    # PyTorch flattens C, H, W in that order: go back to NCHW before reshaping.
    if len(x.shape) == 4:
        x = tf.transpose(x, [0, 3, 1, 2])
    return tf.reshape(x, [x.shape[0], -1])


def build(tf, graph: dict, weights, probes: dict | None = None):
    """A function NCHW input -> output, evaluating ``graph`` in NHWC.

    ``probes``, when given, receives what each binary conv binarizes (its input minus its
    threshold, before padding), NCHW, by layer name: the parity check's extra outputs.
    """
    params = {}
    for key in weights.files:
        layer, _, field = key.partition("/")
        params.setdefault(layer, {})[field] = weights[key]

    def forward(x):
        values = {}
        for layer in graph["layers"]:
            kind, name = layer["kind"], layer["name"]
            ins = [values[i] for i in layer["inputs"]]
            w = params.get(name, {})
            if kind == "input":
                y = tf.transpose(x, [0, 2, 3, 1])
            elif kind == "conv":
                y = _conv(tf, ins[0], layer, w)
            elif kind == "bconv":
                if probes is not None:
                    pre = ins[0] - w["threshold"] if "threshold" in w else ins[0]
                    probes[name] = tf.transpose(pre, [0, 3, 1, 2])
                y = _bconv(tf, ins[0], layer, w)
            elif kind == "bn":
                y = ins[0] * w["scale"] + w["shift"]
            elif kind == "relu":
                y = tf.nn.relu(ins[0])
            elif kind == "relu6":
                y = tf.nn.relu6(ins[0])
            elif kind == "hardtanh":
                y = tf.clip_by_value(ins[0], layer["attrs"]["min"], layer["attrs"]["max"])
            elif kind == "maxpool":
                y = _pool(tf, ins[0], layer, "max")
            elif kind == "avgpool":
                y = _pool(tf, ins[0], layer, "avg")
            elif kind == "global_avgpool":
                y = tf.reduce_mean(ins[0], axis=[1, 2], keepdims=True)
            elif kind == "flatten":
                y = _flatten(tf, ins[0])
            elif kind == "linear":
                y = tf.matmul(ins[0], w["weight"].T) + w.get("bias", 0.0)
            elif kind == "add":
                y = ins[0] + ins[1]
            elif kind == "concat":
                axis = layer["attrs"]["axis"]
                y = tf.concat(ins, axis=3 if (len(ins[0].shape) == 4 and axis == 1) else axis)
            else:
                raise ValueError(f"layer {name}: kind {kind!r} is not supported")
            values[name] = y
        return values[graph["output"]]

    return forward


def flatbuffer(tf, lce, np, graph: dict, weights_path: str, probe: bool) -> bytes:
    """The LCE flatbuffer of ``graph``; with ``probe``, each binary conv's input (what it
    binarizes) is an extra output ``probe_NNN`` beside ``output_0``: the parity check's probe."""
    import tempfile

    names = [layer["name"] for layer in graph["layers"] if layer["kind"] == "bconv"]

    class Model(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec(graph["input_shape"], tf.float32)])
        def serve(self, x):
            probes = {} if probe else None
            out = {"output_0": build(tf, graph, np.load(weights_path), probes)(x)}
            for i, name in enumerate(names if probe else []):
                out[f"probe_{i:03d}"] = probes[name]
            return out

    with tempfile.TemporaryDirectory() as saved:
        model = Model()
        tf.saved_model.save(model, saved, signatures={"serving_default": model.serve})
        return lce.convert_saved_model(saved)


def main(argv: list[str]) -> int:
    """``GRAPH WEIGHTS OUT [--probe] [--probe-out PROBE]``: the artifact at OUT (the probe
    instead, with ``--probe``), and the probe at PROBE too, from the same graph in the same
    process: TensorFlow is imported once for both."""
    graph_path, weights_path, out_path, *flags = argv
    import larq_compute_engine as lce
    import numpy as np
    import tensorflow as tf

    with open(graph_path, encoding="utf-8") as fh:
        graph = json.load(fh)
    wanted = [(out_path, "--probe" in flags)]
    if "--probe-out" in flags:
        wanted.append((flags[flags.index("--probe-out") + 1], True))
    for path, probe in wanted:
        data = flatbuffer(tf, lce, np, graph, weights_path, probe)
        with open(path, "wb") as fh:
            fh.write(data)
    print(json.dumps({"tensorflow": tf.__version__, "larq_compute_engine": lce.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
