"""The daBNN emitter: aiot's layer list → daBNN layers and tensors (see :mod:`aiot.converters.dabnn`).

Split from the converter so each stays readable: this module owns the mapping, BatchNorm
rewrites, sign-of-zero handling and the in-place/ARM checks; the converter owns options,
files and verification.
"""

from __future__ import annotations

import logging
import math

from aiot.converters.graph import bn_scale_shift, pair
from aiot.host.errors import ConversionError

log = logging.getLogger(__name__)

FORMAT = "dabnn"
MODEL_VERSION = 2  # BNN_LATEST_MODEL_VERSION in daBNN's common/macros.h
SIGN_SHIFT = 2.0 ** -126  # smallest normal float32: survives flush-to-zero, moves no normal value
LAYOUT = "NHWC"
_STANDARD = "pick a model built from layers daBNN has"


def emit(graph):
    """``(dab_schema.Model, sidecar facts)`` for a lowered graph.

    Raises:
        ConversionError: (stage "lower") the model breaks a daBNN rule; the message names
            the layer.
    """
    from aiot.converters.dab_schema import Model
    from aiot.converters.dabnn_reference import in_place_hazards

    if not any(layer.kind == "bconv" for layer in graph.layers):  # before any per-layer refusal
        raise ConversionError(FORMAT, "lower", "this model has no binary convolutions",
                              "daBNN is for binarized models: use tiny_bnn")
    emitter = _Emitter(graph)
    for layer in graph.layers:
        getattr(emitter, f"_{layer.kind}")(layer)
    output = emitter.dab[graph.output]
    if emitter.layers[-1].params["output"] != output:
        raise ConversionError(FORMAT, "lower", f"the model returns '{graph.output}', which is "
                              "not its last layer; daBNN files name no outputs",
                              "return the last layer's result")
    model = Model(emitter.layers, emitter.tensors, emitter.inputs, MODEL_VERSION)
    hazards = in_place_hazards(model, frozenset(emitter.shifts))
    if hazards:
        raise ConversionError(FORMAT, "lower", f"{hazards[0]} (daBNN runs Affine, Relu and Add "
                              "in place)", "avoid reading a tensor after BatchNorm/ReLU/add "
                              "reuses it, e.g. pre-activation shortcuts")
    emitter.warnings += _float_row_warnings(emitter, output)
    return model, {
        "ops": sorted({layer.type for layer in model.layers}), "layers": len(model.layers),
        "binary_convs": len(emitter.binary), "dab_version": MODEL_VERSION, "layout": LAYOUT,
        "input": model.inputs[0].name, "output": output, "sign_shifts": len(emitter.shifts),
        "sign_nudged_channels": emitter.nudged, "device_warnings": emitter.warnings,
    }


def _float_row_warnings(emitter, output: str) -> list[str]:
    """daBNN's Mat asserts 16-byte rows (W*C % 4 == 0) wherever a layer indexes a float map."""
    return [f"tensor '{name}' has rows of {w * c} floats (not a multiple of 4): daBNN's "
            f"Mat::point asserts 16-byte aligned rows" for name, (_h, w, c) in emitter.hwc.items()
            if name != output and (w * c) % 4 and w * c != 1]


def keep_signs(a, b, coef, shift, taps: int):
    """``b`` (float32) nudged so daBNN's binarization of ``a*p + b`` matches PyTorch's.

    For every popcount ``p`` in ``0..taps``, PyTorch's BatchNorm output is
    ``coef*(taps - 2p) + shift`` and sign(0) is +1; daBNN's bit is ``a*p + b > 0``. Channels
    where some ``p`` lands within two float32 ulps of the wrong side (the exact zeros of a
    default-initialised BatchNorm, for instance) get ``b`` moved just past that margin, which
    also covers FMA or non-FMA evaluation on the device.

    Returns:
        ``(new b, number of channels changed)``.
    """
    import numpy as np

    pops = np.arange(taps + 1, dtype=np.float64)
    want = coef[:, None] * (taps - 2 * pops) + shift[:, None] >= 0
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    margin = 2 * np.spacing((np.abs(a) * taps + np.abs(b)).astype(np.float32)).astype(np.float64)
    ap = a64[:, None] * pops
    low = np.where(want, margin[:, None] - ap, -np.inf).max(axis=1)
    high = np.where(want, np.inf, -margin[:, None] - ap).min(axis=1)
    fix = ((b64 < low) | (b64 > high)) & (low <= high)
    new = b.astype(np.float32).copy()
    moved = np.clip(b64[fix], low[fix], high[fix]).astype(np.float32)
    moved = np.where(moved < low[fix], np.nextafter(moved, np.float32(np.inf)), moved)
    moved = np.where(moved > high[fix], np.nextafter(moved, np.float32(-np.inf)), moved)
    new[fix] = moved
    return new, int(fix.sum())


class _Emitter:
    """Walks the lowered layers in order, appending daBNN layers and initializers.

    ``dab`` maps graph names to daBNN tensor names (flatten adds no layer); ``hwc`` keeps
    each daBNN tensor's (H, W, C), which a linear layer needs to permute its weights.
    """

    def __init__(self, graph) -> None:
        self.graph = graph
        self.nodes = graph.by_name()
        self.layers: list = []
        self.tensors: list = []
        self.inputs: list = []
        self.taken = {layer.name for layer in graph.layers}
        self.dab: dict[str, str] = {}
        self.hwc: dict[str, tuple[int, int, int]] = {}
        self.binary: dict[str, tuple[int, object]] = {}  # bconv -> (taps, alpha or None)
        self.shifted: dict[str, str] = {}  # tensor -> its sign-shifted alias
        self.shifts: list[str] = []
        self.nudged = 0
        self.warnings: list[str] = []
        self.last_read = _last_reads(graph)
        self.position = {layer.name: index for index, layer in enumerate(graph.layers)}
        self.non_negative = _non_negative(graph)

    # --- helpers --------------------------------------------------------------------------

    def refuse(self, layer, why: str, hint: str = _STANDARD):
        """Raise the ConversionError that names ``layer``."""
        raise ConversionError(FORMAT, "lower", f"layer '{layer.name}' ({layer.kind}): {why}", hint)

    def unique(self, name: str) -> str:
        """``name``, suffixed until no layer or initializer has it."""
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name

    def weight(self, name: str, values, bits: bool = False) -> str:
        """Add an initializer (float32, or bit-packed ±1 OHWC); return its name."""
        import numpy as np

        from aiot.converters.dab_schema import Tensor, pack_bits

        name = self.unique(name)
        values = np.asarray(values)
        if bits:
            align = values.shape[3] != 64  # onnx2bnn: align_hwc_to_128 = (C != 64)
            self.tensors.append(Tensor(name, values.shape, "Bit", bin_data=pack_bits(values, align),
                                       align_hwc_to_128=align))
        else:
            self.tensors.append(Tensor(name, values.shape, float32_data=values.astype(np.float32)))
        return name

    def add(self, kind: str, layer, params: dict, output: str | None = None) -> str:
        """Append a daBNN layer writing ``output`` (default: the graph layer's name)."""
        from aiot.converters.dab_schema import Layer

        output = output or layer.name
        params["output"] = output
        self.layers.append(Layer(kind, params, name=output))
        if layer is not None and output == layer.name:
            self.dab[layer.name] = output
            self.hwc[output] = _hwc(layer.shape)
        return output

    def src(self, layer, index: int = 0) -> str:
        """The daBNN tensor of ``layer``'s ``index``-th input."""
        return self.dab[layer.inputs[index]]

    def square(self, layer, what: str, value) -> int:
        """One size for both axes, or a refusal."""
        both = pair(value)
        if both[0] != both[1]:
            self.refuse(layer, f"its {what} {both} differs between height and width; daBNN's "
                        "kernels take one value for both", f"use a square {what}")
        return both[0]

    def feeds_sign(self, name: str) -> bool:
        """Whether ``name`` reaches a binary conv through value-preserving layers only."""
        for consumer in self.graph.consumers(name):
            if consumer.kind == "bconv" or (consumer.kind in ("maxpool", "concat")
                                            and self.feeds_sign(consumer.name)):
                return True
        return False

    # --- one method per layer kind --------------------------------------------------------

    def _input(self, layer) -> None:
        from aiot.converters.dab_schema import Input

        if self.inputs or len(layer.shape) != 4:
            self.refuse(layer, "daBNN models take exactly one NCHW image input")
        _n, channels, height, width = layer.shape
        if height != width:
            self.refuse(layer, f"the input is {height}x{width}; daBNN's runtime mixes up height "
                        "and width of non-square maps", "use a square input size")
        self.inputs.append(Input(layer.name, (1, height, width, channels)))
        self.dab[layer.name] = layer.name
        self.hwc[layer.name] = (height, width, channels)

    def _conv(self, layer) -> None:
        conv = layer.module
        if conv.groups != 1:
            self.refuse(layer, f"groups={conv.groups}; daBNN's FpConv2D has no groups",
                        "use ordinary (groups=1) convolutions")
        if pair(conv.dilation) != (1, 1) or conv.padding_mode != "zeros":
            self.refuse(layer, "dilated or non-zero padded; daBNN runs plain convolutions only")
        if isinstance(conv.padding, str):
            pad = 0 if conv.padding == "valid" else (conv.kernel_size[0] - 1) // 2
            if conv.padding == "same" and conv.kernel_size[0] % 2 == 0:
                self.refuse(layer, "padding='same' with an even kernel pads unevenly")
        else:
            pad = self.square(layer, "padding", conv.padding)
        self.square(layer, "kernel", conv.kernel_size)  # daBNN reads it from the weight's shape
        stride = self.square(layer, "stride", conv.stride)
        weight = conv.weight.detach().numpy().transpose(0, 2, 3, 1)  # OIHW -> OHWI
        params = {"input": self.src(layer), "weight": self.weight(f"{layer.name}_weight", weight),
                  "pads": [pad] * 4, "strides": [stride] * 2, "dilations": [1, 1]}
        if conv.bias is not None:
            params["bias"] = self.weight(f"{layer.name}_bias", conv.bias.detach().numpy())
        self.add("FpConv2D", layer, params)

    def _bconv(self, layer) -> None:
        conv = layer.module
        channels = conv.in_channels
        if conv.groups != 1:
            self.refuse(layer, f"groups={conv.groups}; daBNN's BinConv2D has no groups",
                        "use groups=1")
        if channels % 64:
            self.refuse(layer, f"{channels} input channels; daBNN packs binary activations 64 "
                        "channels to a word, so it needs a multiple of 64",
                        "give every binary convolution a multiple of 64 input channels")
        if conv.pad_value != -1:
            self.refuse(layer, f"pads with {conv.pad_value:+g}; daBNN pads binary convolutions "
                        "with -1 (a 0 bit)", "build the layer with pad_value=-1")
        if pair(conv.dilation) != (1, 1):
            self.refuse(layer, "dilated; daBNN runs binary convolutions undilated")
        consumers = [c.kind for c in self.graph.consumers(layer.name)]
        if consumers != ["bn"]:
            self.refuse(layer, f"is followed by {', '.join(consumers) or 'nothing'}; daBNN's "
                        "binary convolution outputs a popcount that only a BatchNorm directly "
                        "after it (and nothing else) can rescale",
                        "put a BatchNorm2d right after every binary convolution")
        kernel = self.square(layer, "kernel", conv.kernel_size)
        stride = self.square(layer, "stride", conv.stride)
        source = self.sign_input(layer)
        bits = conv.binary_weight().detach().numpy().transpose(0, 2, 3, 1)  # OIHW -> OHWI
        alpha = conv.alpha()
        self.binary[layer.name] = (channels * kernel * kernel,
                                   None if alpha is None else alpha.detach().double().numpy())
        pad = conv.binary_padding
        self.add("BinConv2D", layer, {
            "input": source, "weight": self.weight(f"{layer.name}_weight", bits, bits=True),
            "pads": [pad] * 4, "strides": [stride] * 2, "dilations": [1, 1]})
        self.warnings += _arm64_warnings(layer, channels, kernel, self.hwc[source][1])

    def sign_input(self, layer) -> str:
        """The binary conv's input, behind a sign shift when it is ReLU-derived (>= 0)."""
        import numpy as np

        source = self.src(layer)
        if not self.non_negative[layer.inputs[0]]:
            return source
        if source not in self.shifted:
            channels = self.hwc[source][2]
            shifted = self.unique(f"{source}_sign_shift")
            self.add("Affine", None, {
                "input": source, "a": self.weight(f"{shifted}_a", np.ones(channels)),
                "b": self.weight(f"{shifted}_b", np.full(channels, SIGN_SHIFT))}, shifted)
            self.hwc[shifted] = self.hwc[source]
            self.shifted[source] = shifted
            self.shifts.append(shifted)
        return self.shifted[source]

    def _bn(self, layer) -> None:
        import numpy as np

        bn = layer.module
        if bn.running_mean is None or bn.running_var is None:
            self.refuse(layer, "uses batch statistics at inference (track_running_stats=False)",
                        "use BatchNorm2d with running statistics")
        scale, shift = bn_scale_shift(bn)
        producer = layer.inputs[0]
        if producer in self.binary:
            taps, alpha = self.binary[producer]
            coef = scale if alpha is None else scale * alpha
            a = (-2 * coef).astype(np.float32)
            b = (shift + taps * coef).astype(np.float32)
            if self.feeds_sign(layer.name):
                b, count = keep_signs(a, b, coef, shift, taps)
                self.nudged += count
        else:
            a, b = scale.astype(np.float32), shift.astype(np.float32)
            if self.feeds_sign(layer.name):  # BN(0) == 0 exactly: keep PyTorch's +1
                self.nudged += int((b == 0).sum())
                b = np.where(b == 0, np.float32(SIGN_SHIFT), b)
        self.add("Affine", layer, {"input": self.src(layer), "a": self.weight(f"{layer.name}_a", a),
                                   "b": self.weight(f"{layer.name}_b", b)})

    def _relu(self, layer) -> None:
        self.add("Relu", layer, {"input": self.src(layer)})

    def _relu6(self, layer) -> None:
        self.refuse(layer, "daBNN has no ReLU6 (clip) layer", "use ReLU")

    def _maxpool(self, layer) -> None:
        self.add("MaxPool", layer, self.pool_params(layer))

    def _avgpool(self, layer) -> None:
        params = self.pool_params(layer)
        if params["pads"][0]:
            self.refuse(layer, "padded average pooling; daBNN's 2x2 kernel counts the padding "
                        "and its generic kernel does not", "use padding=0")
        self.add("AvePool", layer, params)

    def pool_params(self, layer) -> dict:
        """MaxPool/AvePool parameters of a pooling layer (floor mode, square)."""
        if layer.attrs["ceil_mode"]:
            self.refuse(layer, "ceil_mode pooling; daBNN sizes pooling outputs by flooring",
                        "use ceil_mode=False")
        kernel = self.square(layer, "kernel", layer.attrs["kernel"])
        return {"input": self.src(layer), "kernel_shape": [kernel] * 2,
                "pads": [self.square(layer, "padding", layer.attrs["padding"])] * 4,
                "strides": [self.square(layer, "stride", layer.attrs["stride"])] * 2}

    def _global_avgpool(self, layer) -> None:
        height, width, _ = self.hwc[self.src(layer)]
        self.add("AvePool", layer, {"input": self.src(layer), "kernel_shape": [height, width],
                                    "pads": [0] * 4, "strides": [1, 1]})

    def _flatten(self, layer) -> None:
        if layer.attrs["start_dim"] != 1:
            self.refuse(layer, "flattens the batch dimension", "flatten from dimension 1")
        self.dab[layer.name] = self.src(layer)  # NHWC memory is already flat; nothing to run

    def _linear(self, layer) -> None:
        linear, source = layer.module, self.src(layer)
        if len(self.nodes[layer.inputs[0]].shape) != 2:
            self.refuse(layer, "applies to the last axis of a 4-D tensor", "flatten first")
        height, width, channels = self.hwc[source]
        # PyTorch flattened (C, H, W); daBNN's memory is (H, W, C): permute the weights so an
        # FpConv2D with a whole-map kernel computes the same sums
        weight = (linear.weight.detach().numpy().reshape(-1, channels, height, width)
                  .transpose(0, 2, 3, 1))
        params = {"input": source, "weight": self.weight(f"{layer.name}_weight", weight),
                  "pads": [0] * 4, "strides": [1, 1], "dilations": [1, 1]}
        if linear.bias is not None:
            params["bias"] = self.weight(f"{layer.name}_bias", linear.bias.detach().numpy())
        self.add("FpConv2D", layer, params)

    def _add(self, layer) -> None:
        shapes = {tuple(self.nodes[name].shape) for name in layer.inputs}
        if len(layer.inputs) != 2 or len(shapes) != 1:
            self.refuse(layer, "only the sum of two tensors of one shape is supported (no "
                        "broadcast)")
        first, second = layer.inputs
        index = self.position[layer.name]
        if not self.free(first, index) and self.free(second, index):
            first, second = second, first  # Add overwrites input1: give it the dead operand
        self.add("Add", layer, {"input1": self.dab[first], "input2": self.dab[second]})

    def free(self, name: str, index: int) -> bool:
        """Whether nothing after graph layer ``index`` reads ``name``."""
        return self.last_read.get(name, -1) <= index

    def _concat(self, layer) -> None:
        shapes = [tuple(self.nodes[name].shape) for name in layer.inputs]
        if len(shapes) != 2 or layer.attrs["axis"] % 4 != 1 or shapes[0] != shapes[1]:
            self.refuse(layer, "daBNN's Concat joins exactly two tensors of equal shape on the "
                        "channel axis")
        self.add("Concat", layer, {"inputs": [self.src(layer, 0), self.src(layer, 1)], "axis": 3})


def _hwc(shape) -> tuple[int, int, int]:
    """NCHW (or (N, F)) graph shape → daBNN's (H, W, C)."""
    return (shape[2], shape[3], shape[1]) if len(shape) == 4 else (1, 1, int(math.prod(shape[1:])))


def _last_reads(graph) -> dict[str, float]:
    """Graph name → index of the last layer reading it (the output: never dead)."""
    last: dict[str, float] = {}
    for index, layer in enumerate(graph.layers):
        for name in layer.inputs:
            last[name] = index
    last[graph.output] = math.inf
    return last


def _non_negative(graph) -> dict[str, bool]:
    """Graph name → whether its values are >= 0 by construction (ReLU and what keeps that)."""
    keeps = ("maxpool", "avgpool", "global_avgpool", "flatten", "concat", "add")
    result: dict[str, bool] = {}
    for layer in graph.layers:
        result[layer.name] = layer.kind == "relu" or (
            layer.kind in keeps and all(result[name] for name in layer.inputs))
    return result


def _arm64_warnings(layer, channels: int, kernel: int, width: int) -> list[str]:
    """Shapes daBNN's ARMv8 kernels assert on (``BinConv::method``, ``dabnn/bconv.h``)."""
    _n, out_channels, out_h, out_w = layer.shape
    name, notes = layer.name, []
    if kernel == 3 and channels == 64 and ((out_h * out_w) % 2 or out_channels % 2):
        notes.append(f"binary conv '{name}': daBNN's ARMv8 3x3 kernel for 64 input channels "
                     f"(bconv_3x3_64_opt4) asserts an even output pixel count and channel count, "
                     f"here {out_h}x{out_w}x{out_channels}")
    if kernel == 3 and channels in (128, 256, 512, 1024) and out_channels % 128:
        notes.append(f"binary conv '{name}': daBNN's ARMv8 3x3 kernel asserts a multiple of 128 "
                     f"output channels, here {out_channels}")
    if kernel != 3 and channels == 64 and (kernel * kernel) % 2:
        notes.append(f"binary conv '{name}': daBNN's ARMv8 binary GEMM asserts an even number "
                     f"of 64-bit words per filter, here {kernel * kernel}")
    if channels == 64 and width % 2:
        notes.append(f"binary conv '{name}': a 64-channel binary map of odd width {width} breaks "
                     "daBNN's 16-byte row alignment assertion")
    return notes

