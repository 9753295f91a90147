"""A NumPy executor of Caffe2 NetDef semantics, for exactly the operators aiot's emitter writes.

No Caffe2 runtime can be installed any more, so this is what checks a ``caffe2`` artifact: it
parses both files back with the message classes that wrote them (the bytes round-trip), checks
the structure (every operator's inputs exist when it runs, fills match their shapes) and runs
the net on NCHW float32 input, accumulating in float64.

The semantics follow Caffe2's CPU operators (``caffe2/operators/conv_pool_op_base.h``,
``pool_op.cc``): ``pads`` is ``[top, left, bottom, right]``; ``legacy_pad=3``
(CAFFE_LEGACY_POOLING) sizes a pooling output Caffe-style, rounding up, and grows the tail
padding to fit; pooling windows are clipped to the image, and AveragePool divides by the full
kernel area only with ``count_include_pad=1``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

from aiot.converters.caffe2.proto import parse_net
from aiot.converters.windows import window_taps
from aiot.core.errors import ArtifactError

INPUT_BLOB = "data"
LEGACY_NOTSET, LEGACY_CAFFE_POOLING = 0, 3
_FILL = "GivenTensorFill"
_REGENERATE = "re-convert it: aiot convert MODEL --format caffe2 --fresh"


@dataclass
class LoadedNet:
    """A predict net with the weights its init net fills, ready to run."""

    predict: object  # caffe2.NetDef
    params: dict  # blob name -> float64 ndarray

    def op_types(self) -> list[str]:
        """Sorted operator types of the predict net."""
        return sorted({op.type for op in self.predict.op})


def read_net(path: Path, role: str):
    """The ``caffe2.NetDef`` in ``path``.

    Raises:
        ArtifactError: the file is missing or not a NetDef.
    """
    from google.protobuf.message import DecodeError

    try:
        return parse_net(Path(path).read_bytes())
    except FileNotFoundError:
        raise ArtifactError(f"caffe2 {role} net {path} does not exist", _REGENERATE) from None
    except DecodeError as exc:
        raise ArtifactError(f"caffe2 {role} net {path} is not a NetDef: {exc}",
                            _REGENERATE) from None


def arguments(op) -> dict:
    """An operator's arguments as ``{name: int | float | bytes | sequence}``.

    Repeated values stay protobuf containers: copying millions of weights into a list
    would cost more than the whole forward pass.
    """
    values = {}
    for arg in op.arg:
        for repeated in ("ints", "floats", "strings"):
            if len(getattr(arg, repeated)):
                values[arg.name] = getattr(arg, repeated)
                break
        else:
            for single in ("i", "f", "s"):
                if arg.HasField(single):
                    values[arg.name] = getattr(arg, single)
                    break
    return values


def _fill(op, path: Path):
    """``(blob name, float64 array)`` of one GivenTensorFill, checked against its shape."""
    import numpy as np

    args = arguments(op)
    if op.type != _FILL or len(op.output) != 1 or "shape" not in args or "values" not in args:
        raise ArtifactError(f"caffe2 init net {path}: operator {op.type or '?'} is not a "
                            f"{_FILL} with shape and values", _REGENERATE)
    shape = [int(d) for d in args["shape"]]
    values = np.array(args["values"], dtype=np.float32)
    if values.size != math.prod(shape):
        raise ArtifactError(f"caffe2 init net {path}: blob '{op.output[0]}' has {values.size} "
                            f"values for shape {shape}", _REGENERATE)
    return op.output[0], values.reshape(shape).astype(np.float64)


def load_net(predict_path: Path, init_path: Path) -> LoadedNet:
    """Both nets of an artifact, parsed and structurally checked.

    Raises:
        ArtifactError: a file is missing or corrupt, or the nets do not fit together.
    """
    init = read_net(init_path, "init")
    params = dict(_fill(op, init_path) for op in init.op)
    predict = read_net(predict_path, "predict")
    check_structure(predict, params, predict_path)
    return LoadedNet(predict, params)


def check_structure(predict, params: dict, path: Path) -> None:
    """Every operator is known and reads blobs that exist by then; the outputs get produced.

    Raises:
        ArtifactError: naming the first operator or blob that breaks the rule.
    """
    def fail(message: str):
        return ArtifactError(f"caffe2 predict net {path}: {message}", _REGENERATE)

    if list(predict.external_input[:1]) != [INPUT_BLOB]:
        raise fail(f"its first external input is not '{INPUT_BLOB}'")
    missing = sorted(set(predict.external_input[1:]) - set(params))
    if missing:
        raise fail(f"external inputs {', '.join(missing[:3])} are not filled by the init net")
    if not predict.op or not predict.external_output:
        raise fail("it has no operators or no external output")
    known = {INPUT_BLOB, *params}
    for index, op in enumerate(predict.op):
        if op.type not in _OPS:
            raise fail(f"operator {index} has type '{op.type}', which aiot does not emit")
        absent = [blob for blob in op.input if blob not in known]
        if absent or not op.output:
            raise fail(f"operator {index} ({op.type}) reads undefined blob '{absent[0]}'" if absent
                       else f"operator {index} ({op.type}) has no output")
        known.update(op.output)
    unproduced = [blob for blob in predict.external_output if blob not in known]
    if unproduced:
        raise fail(f"external output '{unproduced[0]}' is never produced")


def run_net(net: LoadedNet, inputs, keep_blobs: bool = False):
    """Run the predict net on ``inputs`` (N, C, H, W).

    Returns:
        The first external output as float32, or with ``keep_blobs`` every blob (float64).

    Raises:
        ArtifactError: an operator cannot run on what it is given (shapes, arguments).
    """
    import numpy as np

    blobs = {**net.params, INPUT_BLOB: np.asarray(inputs, dtype=np.float64)}
    for index, op in enumerate(net.predict.op):
        try:
            results = _OPS[op.type]([blobs[name] for name in op.input], arguments(op))
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ArtifactError(f"caffe2 operator {index} ({op.type} -> {op.output[0]}) cannot "
                                f"run: {type(exc).__name__}: {exc}", _REGENERATE) from None
        blobs.update(zip(op.output, results))
    if keep_blobs:
        return blobs
    return blobs[net.predict.external_output[0]].astype(np.float32)


# --- operators: each takes (input arrays, arguments) and returns its outputs -----------------


def _order(args: dict) -> None:
    if args.get("order", b"NCHW") != b"NCHW":
        raise ValueError(f"order {args['order']!r} is not supported (only NCHW)")


def _size_and_pads(size: int, kernel: int, stride: int, dilation: int, head: int, tail: int,
                   legacy: int) -> tuple[int, int]:
    """Output size and the tail padding Caffe2 actually uses (ConvPoolOpBase::ComputeSizeAndPad)."""
    span = dilation * (kernel - 1) + 1
    if legacy == LEGACY_NOTSET:
        if size + head + tail < span:
            raise ValueError(f"window {span} is larger than padded input {size + head + tail}")
        return (size + head + tail - span) // stride + 1, tail
    if legacy != LEGACY_CAFFE_POOLING:
        raise ValueError(f"legacy_pad={legacy} is not supported (only 0 and 3)")
    out = math.ceil((size + 2 * head - kernel) / stride + 1)
    if head > 0 and (out - 1) * stride >= size + head:
        out -= 1  # Caffe: the last window must start inside the image or its head padding
    standard = (size + 2 * head - kernel) // stride + 1
    return out, head + stride * (out - standard)


def _geometry(x, args: dict):
    """``(kernel, stride, dilation, head pads, tail pads, output size)`` per spatial axis."""
    kernel = [int(k) for k in args["kernels"]]
    stride = [int(s) for s in args.get("strides", [1, 1])]
    dilation = [int(d) for d in args.get("dilations", [1, 1])]
    pads = [int(p) for p in args.get("pads", [0, 0, 0, 0])]
    legacy = int(args.get("legacy_pad", LEGACY_NOTSET))
    if len(kernel) != 2 or len(stride) != 2 or len(dilation) != 2 or len(pads) != 4:
        raise ValueError("kernels, strides, dilations need 2 values and pads 4")
    outs, tails = zip(*(_size_and_pads(x.shape[2 + axis], kernel[axis], stride[axis],
                                       dilation[axis], pads[axis], pads[2 + axis], legacy)
                        for axis in range(2)))
    return kernel, stride, dilation, pads[:2], list(tails), list(outs)


def _taps(x, args: dict, fill: float):
    """One ``(N, C, OH, OW)`` view of ``x`` (padded with ``fill``) per kernel position."""
    import numpy as np

    _order(args)
    kernel, stride, dilation, head, tail, out = _geometry(x, args)
    pads = ((0, 0), (0, 0), (head[0], tail[0]), (head[1], tail[1]))
    padded = np.pad(x, pads, constant_values=fill) if any(head + tail) else x
    return window_taps(padded, kernel, stride, out, dilation), kernel


def _conv(inputs, args):
    import numpy as np

    x, weight = inputs[0], inputs[1]
    group = int(args.get("group", 1))
    taps, kernel = _taps(x, args, 0.0)
    n, channels, oh, ow = taps[0].shape
    out_channels = weight.shape[0]
    if channels % group or out_channels % group or weight.shape[1] * group != channels:
        raise ValueError(f"filter {weight.shape} does not fit {channels} channels "
                         f"in {group} groups")
    if list(weight.shape[2:]) != kernel:
        raise ValueError(f"filter {weight.shape} does not match kernels {kernel}")
    if group == channels == out_channels:
        y = _depthwise(taps, weight)
    else:
        # im2col as (N, G, C/G * KH*KW, OH*OW): channel-major, kernel position minor, like
        # the filter's (O, C/G, KH, KW) layout, so one batched matmul yields NCHW directly. A
        # single tap (a 1x1 kernel) needs no stacking: copying the input into a new array
        # took three quarters of EfficientNet-Lite0's time.
        cols = (taps[0][:, :, None] if len(taps) == 1 else np.stack(taps, axis=2))
        cols = cols.reshape(n, group, -1, oh * ow)
        y = np.matmul(weight.reshape(group, out_channels // group, -1), cols)
        y = y.reshape(n, out_channels, oh, ow)
    if len(inputs) > 2:
        y += inputs[2].reshape(1, -1, 1, 1)
    return [y]


def _depthwise(taps, weight):
    """A depthwise convolution (one filter per channel): each tap times its per-channel
    weight, summed. The same sums as the im2col matmul, without its (N, C, KH*KW, OH*OW) copy."""
    per_tap = weight.reshape(weight.shape[0], -1)
    y = taps[0] * per_tap[:, 0].reshape(1, -1, 1, 1)
    for k in range(1, len(taps)):
        y += taps[k] * per_tap[:, k].reshape(1, -1, 1, 1)
    return y


def _max_pool(inputs, args):
    import numpy as np

    if int(args.get("global_pooling", 0)):
        return [inputs[0].max(axis=(2, 3), keepdims=True)]
    taps, _ = _taps(inputs[0], args, -np.inf)  # padding never wins a max
    return [functools.reduce(np.maximum, taps)]


def _average_pool(inputs, args):
    import numpy as np

    x = inputs[0]
    if int(args.get("global_pooling", 0)):
        return [x.mean(axis=(2, 3), keepdims=True)]
    taps, kernel = _taps(x, args, 0.0)
    total = functools.reduce(np.add, taps)
    if int(args.get("count_include_pad", 0)):
        return [total / (kernel[0] * kernel[1])]
    # divide by the number of real pixels under each window (Caffe2's default)
    count = functools.reduce(np.add, _taps(np.ones((1, 1, *x.shape[2:])), args, 0.0)[0])
    return [total / count]


def _spatial_bn(inputs, args):
    x, scale, bias, mean, var = inputs
    _order(args)
    if not int(args.get("is_test", 0)):
        raise ValueError("only is_test=1 (inference statistics) is supported")
    eps = float(args.get("epsilon", 1e-5))
    shape = (1, -1, 1, 1)
    # Caffe2's own inference form (spatial_batch_norm_op.h): Y = X * alpha + beta
    alpha = scale / (var + eps) ** 0.5
    y = x * alpha.reshape(shape)
    y += (bias - mean * alpha).reshape(shape)
    return [y]


def _fc(inputs, args):
    x, weight, bias = inputs
    axis = int(args.get("axis", 1))
    rows = x.reshape(math.prod(x.shape[:axis]), -1)
    return [rows @ weight.T + bias]


def _add(inputs, args):
    a, b = inputs
    if a.shape != b.shape and not int(args.get("broadcast", 0)):
        raise ValueError(f"shapes {a.shape} and {b.shape} differ and broadcast is off")
    return [a + b]


def _concat(inputs, args):
    import numpy as np

    if "axis" in args and "order" in args:
        raise ValueError("Concat takes axis or order, not both")
    axis = int(args.get("axis", 1))
    sizes = np.array([blob.shape[axis] for blob in inputs], dtype=np.int32)
    return [np.concatenate(inputs, axis=axis), sizes]  # Caffe2's second output: split_info


def _flatten(inputs, args):
    x = inputs[0]
    axis = int(args.get("axis", 1))
    return [x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))]


def _clip(inputs, args):
    import numpy as np

    low, high = float(args.get("min", -np.inf)), float(args.get("max", np.inf))
    return [np.clip(inputs[0], low, high)]


def _relu(inputs, args):
    import numpy as np

    return [np.maximum(inputs[0], 0.0)]


_OPS = {
    "Conv": _conv, "SpatialBN": _spatial_bn, "Relu": _relu, "Clip": _clip,
    "MaxPool": _max_pool, "AveragePool": _average_pool, "FC": _fc, "Add": _add,
    "Concat": _concat, "Flatten": _flatten,
}
