"""A NumPy executor of daBNN's runtime semantics, for the layers aiot's emitter writes.

daBNN's kernels are ARM assembly and its project is unmaintained, so no runtime can run a
``.dab`` file on a workstation; this is what checks one. It parses the file back with
:mod:`aiot.converters.dabnn.schema` (so the bytes themselves are verified), checks the
structure the way ``dabnn/net.cpp`` reads it, and executes each layer as the runtime does
(JDAI-CV/dabnn at d93aa95, ``dabnn/layers/*``):

* activations are NHWC float32 (batch 1 on a device; batches here are independent images);
* ``BinConv2D`` binarizes its float input itself (``pack_64_bitfield``: bit 1 iff x > 0, so
  0 becomes -1), pads the *bits* with 0 (= -1), and outputs ``popcount(input XOR weight)``
  over each output channel's bit row, the 128-bit alignment padding included: a count of
  mismatches, not a dot product, which the following ``Affine`` rescales. Its ``bias`` field
  is never read by the runtime, so it is ignored here as well;
* ``FpConv2D`` pads with zeros and takes OHWI weights and an optional bias;
* ``Affine`` (``a * x + b`` per channel), ``Relu`` and ``Add`` (into ``input1``) run in
  place: their output names the input's buffer, so anything that reads that input later
  sees the new values. This is modelled (see :func:`in_place_hazards`);
* ``MaxPool`` pads with -FLT_MAX; ``AvePool`` must be unpadded (its 2x2 NEON kernel counts
  padding and its generic one does not); ``Concat`` joins two tensors of equal channels on
  axis 3.

Refused: ``FC``, ``Softmax`` and ``Binarize`` (in the schema, but ``net.cpp`` has no case for
them and throws "Not supported op"), global pooling written as kernel -1 (the generic kernel
gets stride 0 and reads the kernel as a size_t), and layers the emitter never writes (Split,
Shuffle, PRelu).
Only square kernels, strides and paddings are run: the runtime's ``Mat`` keeps height in the
field it reads as width, which is only harmless when both agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aiot.converters.dabnn.schema import Model, Tensor, parse_model, unpack_bits
from aiot.converters.windows import window_taps
from aiot.core.errors import ArtifactError

MODEL_VERSION = 2  # BNN_LATEST_MODEL_VERSION (common/macros.h); net.cpp refuses any other
FLT_MAX = 3.4028234663852886e38
IN_PLACE = {"Affine": "input", "Relu": "input", "Add": "input1", "PRelu": "input",
            "Shuffle": "input"}  # layer type -> the field whose buffer it overwrites
NOT_IN_RUNTIME = ("FC", "Softmax", "Binarize")
_ACTIVATIONS = ("input", "input1", "input2")
_WEIGHTS = {"FpConv2D": {"weight": ("Float32", 4), "bias": ("Float32", 1)},
            "BinConv2D": {"weight": ("Bit", 4)},
            "Affine": {"a": ("Float32", 1), "b": ("Float32", 1)}}
# Fields the runtime dereferences unconditionally (a missing vector is a null pointer there)
_CONV = ("input", "weight", "pads", "strides", "dilations", "output")
_POOL = ("input", "kernel_shape", "pads", "strides", "output")
_REQUIRED = {"FpConv2D": _CONV, "BinConv2D": _CONV, "Affine": ("input", "a", "b", "output"),
             "Relu": ("input", "output"), "Add": ("input1", "input2", "output"),
             "MaxPool": _POOL, "AvePool": _POOL, "Concat": ("inputs", "output")}
_REGENERATE = "re-convert it: aiot convert MODEL --format dabnn --fresh"
_CHUNK = 16  # images per pass: bounds the im2col buffers of large models


@dataclass
class LoadedModel:
    """A parsed, structurally checked model ready to run."""

    model: Model
    tensors: dict  # initializer name -> Tensor
    label: str

    @property
    def input(self):
        """The input daBNN feeds (the first one; the runtime ignores any other)."""
        return self.model.inputs[0]

    @property
    def output(self) -> str:
        """The tensor a caller reads: the last layer's output (daBNN files list no outputs)."""
        return self.model.layers[-1].params["output"]


def reads(layer) -> list[str]:
    """Activation tensors ``layer`` reads (weights excluded)."""
    names = [layer.params[key] for key in _ACTIVATIONS if key in layer.params]
    return names + list(layer.params.get("inputs", []))


def load_model(path: Path) -> LoadedModel:
    """Parse and check ``path``.

    Raises:
        ArtifactError: the file is missing, corrupt, or not something daBNN can run.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ArtifactError(f"dabnn model {path} does not exist", _REGENERATE) from None
    return check_model(parse_model(data, path.name), path.name)


def check_model(model: Model, label: str) -> LoadedModel:
    """Check ``model`` the way ``Net::prepare`` reads it.

    Raises:
        ArtifactError: naming the first layer or tensor that breaks a rule.
    """
    def fail(message: str) -> ArtifactError:
        return ArtifactError(f"dabnn model {label}: {message}", _REGENERATE)

    if model.version != MODEL_VERSION:
        raise fail(f"version {model.version}, but daBNN only loads version {MODEL_VERSION}")
    if not model.inputs or len(model.inputs[0].shape) != 4 or model.inputs[0].shape[0] != 1:
        raise fail("it has no NHWC input of batch 1")
    if not model.layers:
        raise fail("it has no layers")
    tensors = _tensors(model, fail)
    known = {model.inputs[0].name}
    for index, layer in enumerate(model.layers):
        where = f"layer {index} ({layer.type})"
        if layer.type not in _REQUIRED:
            why = ("which daBNN's runtime has no case for" if layer.type in NOT_IN_RUNTIME
                   else "which aiot does not emit or execute")
            raise fail(f"{where} has type {layer.type}, {why}")
        missing = [key for key in _REQUIRED[layer.type] if key not in layer.params]
        if missing:
            raise fail(f"{where} lacks {', '.join(missing)}")
        absent = [name for name in reads(layer) if name not in known]
        if absent:
            raise fail(f"{where} reads '{absent[0]}', which no earlier layer produces")
        for key, (kind, ndim) in _WEIGHTS.get(layer.type, {}).items():
            if key in layer.params:
                _check_weight(tensors.get(layer.params[key]), layer.params[key], kind, ndim,
                              f"{where} {key}", fail)
        if layer.params["output"] in known:
            raise fail(f"{where} writes '{layer.params['output']}', which already exists")
        known.add(layer.params["output"])
    return LoadedModel(model, tensors, label)


def _tensors(model: Model, fail) -> dict:
    import math

    tensors: dict[str, Tensor] = {}
    for tensor in model.initializers:
        if tensor.name in tensors:
            raise fail(f"initializer '{tensor.name}' is defined twice")
        if tensor.data_type == "Float32":
            size = 0 if tensor.float32_data is None else tensor.float32_data.size
            if size != math.prod(tensor.shape) or not tensor.shape:
                raise fail(f"initializer '{tensor.name}' has {size} floats for shape "
                           f"{tensor.shape}")
        elif tensor.bin_data is None or len(tensor.shape) != 4:
            raise fail(f"bit initializer '{tensor.name}' has no data or no OHWC shape")
        tensors[tensor.name] = tensor
    return tensors


def _check_weight(tensor, name: str, kind: str, ndim: int, where: str, fail) -> None:
    if tensor is None:
        raise fail(f"{where} names initializer '{name}', which does not exist")
    if tensor.data_type != kind or len(tensor.shape) != ndim:
        raise fail(f"{where} '{name}' is a {len(tensor.shape)}-D {tensor.data_type} tensor, "
                   f"not {ndim}-D {kind}")


def in_place_hazards(model: Model, benign: frozenset = frozenset()) -> list[str]:
    """Reads of a tensor after an in-place layer overwrote its buffer (one line each).

    Args:
        benign: names of in-place layers whose change is known not to matter to other
            readers (aiot's sign shifts add 2**-126).
    """
    buffer: dict[str, int] = {inp.name: i for i, inp in enumerate(model.inputs)}
    made = dict.fromkeys(buffer, 0)
    version: dict[int, int] = dict.fromkeys(buffer.values(), 0)
    writer: dict[int, str] = {}
    hazards = []
    for layer in model.layers:
        label = layer.name or layer.params.get("output", layer.type)
        for name in reads(layer):
            bid = buffer.get(name)
            if bid is not None and made[name] != version[bid]:
                hazards.append(f"layer '{label}' reads '{name}' after '{writer[bid]}' "
                               f"overwrote it in place")
        output = layer.params.get("output")
        if output is None:
            continue
        if layer.type in IN_PLACE and layer.params.get(IN_PLACE[layer.type]) in buffer:
            bid = buffer[layer.params[IN_PLACE[layer.type]]]
            if label not in benign:
                version[bid] += 1
                writer[bid] = label
        else:
            bid = len(version)
            version[bid] = 0
        buffer[output], made[output] = bid, version[bid]
    return hazards


# --- execution -----------------------------------------------------------------------------


class _Buffers:
    """Tensor names over buffers, so in-place layers are seen by every alias."""

    def __init__(self) -> None:
        self.buffer: dict[str, int] = {}
        self.values: dict[int, object] = {}

    def get(self, name: str):
        return self.values[self.buffer[name]]

    def new(self, name: str, value) -> None:
        self.buffer[name] = len(self.values)
        self.values[len(self.values)] = value

    def overwrite(self, source: str, name: str, value) -> None:
        self.buffer[name] = self.buffer[source]
        self.values[self.buffer[source]] = value


def run_model(loaded: LoadedModel, inputs, keep_tensors: bool = False):
    """Run the model on ``inputs`` (N, C, H, W) float32.

    Returns:
        ``(N, outputs)`` float32, the last layer's output in NCHW order (as PyTorch flattens
        it), or with ``keep_tensors`` every tensor (NHWC) of the first 16 images.

    Raises:
        ArtifactError: the input does not fit, or a layer cannot run on what it is given.
    """
    import numpy as np

    x = np.asarray(inputs, dtype=np.float32)
    _, height, width, channels = loaded.input.shape
    if x.ndim != 4 or x.shape[1:] != (channels, height, width):
        raise ArtifactError(f"dabnn model {loaded.label} takes (N, {channels}, {height}, "
                            f"{width}) input, got {x.shape}", "resize the input")
    outputs = []
    for start in range(0, len(x), _CHUNK):
        buffers = _run_chunk(loaded, x[start: start + _CHUNK].transpose(0, 2, 3, 1))
        if keep_tensors:
            return {name: buffers.get(name) for name in buffers.buffer}
        y = buffers.get(loaded.output)
        outputs.append(y.transpose(0, 3, 1, 2).reshape(len(y), -1))
    return np.concatenate(outputs).astype(np.float32)


def _run_chunk(loaded: LoadedModel, x) -> _Buffers:
    import numpy as np

    buffers = _Buffers()
    buffers.new(loaded.input.name, np.ascontiguousarray(x, dtype=np.float32))
    for index, layer in enumerate(loaded.model.layers):
        try:
            _LAYERS[layer.type](buffers, layer.params, loaded.tensors)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ArtifactError(f"dabnn model {loaded.label}: layer {index} ({layer.type} -> "
                                f"{layer.params.get('output')}) cannot run: {exc}",
                                _REGENERATE) from None
    return buffers


def _square(params: dict, key: str, size: int, default: int) -> int:
    """One value for both axes of ``params[key]`` (``size`` long), else ValueError."""
    values = [int(v) for v in params.get(key, [default] * size)]
    if len(values) != size or len(set(values)) != 1:
        raise ValueError(f"{key} {values} is not one value for all sides")
    return values[0]


def _window(params: dict, kernel: int) -> tuple[int, int]:
    """``(stride, pad)`` of a conv or pool, refusing what the runtime does not do."""
    if [int(d) for d in params.get("dilations", [1, 1])] != [1, 1]:
        raise ValueError(f"dilations {params['dilations']}: daBNN runs every layer undilated")
    return _square(params, "strides", 2, 1), _square(params, "pads", 4, 0)


def _im2col(x, kernel: int, stride: int, pad: int, fill: float):
    """``(N, OH, OW, kernel*kernel*C)`` windows of NHWC ``x`` in (kh, kw, c) order."""
    import numpy as np

    n, height, width, _ = x.shape
    out_h = (height + 2 * pad - kernel) // stride + 1
    out_w = (width + 2 * pad - kernel) // stride + 1
    if out_h < 1 or out_w < 1 or kernel < 1:
        raise ValueError(f"window {kernel} does not fit a {height}x{width} map padded by {pad}")
    padded = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)), constant_values=fill)
    taps = window_taps(padded, (kernel, kernel), (stride, stride), (out_h, out_w), axes=(1, 2))
    return np.stack(taps, axis=3).reshape(n, out_h, out_w, -1)


def _rows_times(cols, weight):
    """``cols @ weight.T`` for ``(N, OH, OW, K)`` windows and an ``(O, K)`` filter, as one 2-D
    product: NumPy runs a 4-D ``@`` as one small product per image row, tens of times slower."""
    n, out_h, out_w, k = cols.shape
    return (cols.reshape(n * out_h * out_w, k) @ weight.T).reshape(n, out_h, out_w, -1)


def _kernel(weight: Tensor, x) -> int:
    _out, kh, kw, channels = weight.shape
    if kh != kw:
        raise ValueError(f"kernel {kh}x{kw} is not square")
    if channels != x.shape[3]:
        raise ValueError(f"weight '{weight.name}' takes {channels} channels, the input has "
                         f"{x.shape[3]}")
    return kh


def _fp_conv(buffers: _Buffers, params: dict, tensors: dict) -> None:
    import numpy as np

    x, weight = buffers.get(params["input"]), tensors[params["weight"]]
    kernel = _kernel(weight, x)
    stride, pad = _window(params, kernel)
    cols = _im2col(x, kernel, stride, pad, 0.0)
    w = weight.float32_data.reshape(weight.shape[0], -1).astype(np.float64)
    y = _rows_times(cols.astype(np.float64), w)
    if "bias" in params:
        y += tensors[params["bias"]].float32_data
    buffers.new(params["output"], y.astype(np.float32))


def _bin_conv(buffers: _Buffers, params: dict, tensors: dict) -> None:
    import numpy as np

    x, weight = buffers.get(params["input"]), tensors[params["weight"]]
    kernel = _kernel(weight, x)
    if x.shape[3] % 64:
        raise ValueError(f"{x.shape[3]} input channels: binary inputs are packed 64 to a word")
    stride, pad = _window(params, kernel)
    w_bits = unpack_bits(weight.bin_data, weight.shape, weight.align_hwc_to_128).astype(np.float32)
    # bit 1 iff x > 0; padding bits are 0 (-1); alignment bits are 0 in input and weight alike
    cols = _im2col((x > 0).astype(np.float32), kernel, stride, pad, 0.0)
    cols = np.pad(cols, ((0, 0), (0, 0), (0, 0), (0, w_bits.shape[1] - cols.shape[3])))
    # popcount(a XOR w) over 0/1 vectors = sum a + sum w - 2 a.w, exact in float32 (< 2**24)
    mismatches = cols.sum(axis=3, keepdims=True) + w_bits.sum(axis=1) - 2 * _rows_times(cols, w_bits)
    buffers.new(params["output"], mismatches.astype(np.float32))


def _affine(buffers: _Buffers, params: dict, tensors: dict) -> None:
    x = buffers.get(params["input"])
    a, b = tensors[params["a"]].float32_data, tensors[params["b"]].float32_data
    if a.size != x.shape[3] or b.size != x.shape[3]:
        raise ValueError(f"a and b have {a.size} and {b.size} values for {x.shape[3]} channels")
    buffers.overwrite(params["input"], params["output"], a * x + b)  # float32 throughout


def _relu(buffers: _Buffers, params: dict, tensors: dict) -> None:
    import numpy as np

    x = buffers.get(params["input"])
    buffers.overwrite(params["input"], params["output"], np.maximum(x, np.float32(0)))


def _add(buffers: _Buffers, params: dict, tensors: dict) -> None:
    a, b = buffers.get(params["input1"]), buffers.get(params["input2"])
    if a.shape != b.shape:  # add_inplace walks both with one pointer: no broadcasting
        raise ValueError(f"shapes {a.shape[1:]} and {b.shape[1:]} differ")
    buffers.overwrite(params["input1"], params["output"], a + b)


def _pool(buffers: _Buffers, params: dict, fill: float):
    x = buffers.get(params["input"])
    kernel = _square(params, "kernel_shape", 2, 0)
    if kernel < 1:
        raise ValueError(f"kernel_shape {params['kernel_shape']}: daBNN's pooling kernels "
                         f"cannot run global (-1) pooling")
    stride, pad = _window(params, kernel)
    cols = _im2col(x, kernel, stride, pad, fill)
    return cols.reshape(*cols.shape[:3], kernel * kernel, x.shape[3]), pad


def _max_pool(buffers: _Buffers, params: dict, tensors: dict) -> None:
    windows, _ = _pool(buffers, params, -FLT_MAX)  # the runtime pads with -FLT_MAX
    buffers.new(params["output"], windows.max(axis=3))


def _ave_pool(buffers: _Buffers, params: dict, tensors: dict) -> None:
    import numpy as np

    windows, pad = _pool(buffers, params, 0.0)
    if pad:
        raise ValueError("padded average pooling: daBNN's kernels disagree on the divisor")
    buffers.new(params["output"], windows.mean(axis=3, dtype=np.float64).astype(np.float32))


def _concat(buffers: _Buffers, params: dict, tensors: dict) -> None:
    import numpy as np

    names = params["inputs"]
    if len(names) != 2 or params.get("axis", 0) != 3:
        raise ValueError(f"{len(names)} inputs on axis {params.get('axis', 0)}: daBNN joins "
                         f"exactly two on axis 3 (channels)")
    a, b = buffers.get(names[0]), buffers.get(names[1])
    if a.shape != b.shape:  # Concat asserts equal channels; it copies rows of both
        raise ValueError(f"shapes {a.shape[1:]} and {b.shape[1:]} differ")
    buffers.new(params["output"], np.concatenate([a, b], axis=3))


_LAYERS = {"FpConv2D": _fp_conv, "BinConv2D": _bin_conv, "Affine": _affine, "Relu": _relu,
           "Add": _add, "MaxPool": _max_pool, "AvePool": _ave_pool, "Concat": _concat}
