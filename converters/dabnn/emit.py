"""The daBNN emitter: aiot's layer list → daBNN layers and tensors (see :mod:`aiot.converters.dabnn.converter`).

Split from the converter so each stays readable: this module owns the mapping, BatchNorm
rewrites, sign-of-zero handling and the in-place/ARM checks; the converter owns options,
files and verification.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

from aiot.converters.dabnn.reference import in_place_hazards
from aiot.converters.dabnn.schema import Input, Model, Tensor, pack_bits
from aiot.converters.dabnn.schema import Layer as DabLayer
from aiot.converters.graph import Layer, bn_scale_shift, pair
from aiot.core.errors import ConversionError

log = logging.getLogger(__name__)

FORMAT = "dabnn"
MODEL_VERSION = 2  # BNN_LATEST_MODEL_VERSION in daBNN's common/macros.h
SIGN_SHIFT = 2.0 ** -126  # smallest normal float32: survives flush-to-zero, moves no normal value
LAYOUT = "NHWC"
_STANDARD = "pick a model built from layers daBNN has"


def emit(graph, precision: str = "bnn"):
    """``(schema.Model, sidecar facts)`` for a lowered graph.

    ``precision="fp32"`` writes a full-precision network in daBNN's float layers (FpConv2D,
    Affine, Relu, pooling, Add): the FP32 column of BiBench's daBNN tables, the baseline its
    BNN is compared with in the same library.

    Raises:
        ConversionError: (stage "lower") the model breaks a daBNN rule; the message names
            the layer.
    """
    binary = any(layer.kind == "bconv" for layer in graph.layers)
    if precision == "fp32" and binary:
        raise ConversionError(FORMAT, "lower", "precision=fp32 writes a full-precision network, "
                              "but this model has binary convolutions",
                              "convert the model without --binarize for daBNN's FP32 form")
    if precision != "fp32" and not binary:  # before any per-layer refusal
        raise ConversionError(FORMAT, "lower", "this model has no binary convolutions",
                              "daBNN is for binarized models: use tiny_bnn, or --opt "
                              "precision=fp32 for daBNN's float form of a full-precision model")
    emitter = _Emitter(graph)
    for layer in graph.layers:
        if layer.name in emitter.plan.refusals:
            emitter.refuse(layer, *emitter.plan.refusals[layer.name])
        emit = getattr(emitter, f"_{layer.kind}", None)
        if emit is None:
            emitter.refuse(layer, "daBNN has no such layer")
        emit(layer)
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
        "dropped_clamps": len(emitter.plan.dropped), "folded_thresholds": emitter.folded,
        "constant_sign_channels": emitter.constant, "precision": precision,
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
        self.plan = _sign_plan(graph)
        self.folded = 0  # channels whose binarization threshold became part of an Affine's b
        self.constant = 0  # channels a clamp binarizes to one sign whatever the input

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
        output = output or layer.name
        params["output"] = output
        self.layers.append(DabLayer(kind, params, name=output))
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
            if consumer.kind == "bconv" or (consumer.kind in ("maxpool", "concat", "hardtanh")
                                            and self.feeds_sign(consumer.name)):
                return True
        return False

    # --- one method per layer kind --------------------------------------------------------

    def _input(self, layer) -> None:
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
        pad = self.square(layer, "padding", conv.binary_padding)
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
        fold = self.plan.folds.get(layer.name)
        fixed = np.zeros(len(scale), bool)  # channels whose sign a clamp decides (see _Fold)
        if fold is not None:  # the binary convs it feeds binarize bn(x) - t: fold the -t in
            shift = shift - fold.threshold
            fixed = fold.constant != 0
            self.folded += int((fold.threshold != 0).sum())
            self.constant += int(fixed.sum())
        live = ~fixed
        producer = layer.inputs[0]
        if producer in self.binary:
            taps, alpha = self.binary[producer]
            coef = scale if alpha is None else scale * alpha
            a = (-2 * coef).astype(np.float32)
            b = (shift + taps * coef).astype(np.float32)
            if self.feeds_sign(layer.name):
                b[live], count = keep_signs(a[live], b[live], coef[live], shift[live], taps)
                self.nudged += count
        else:
            a, b = scale.astype(np.float32), shift.astype(np.float32)
            if self.feeds_sign(layer.name):  # BN(0) == 0 exactly: keep PyTorch's +1
                zero = (b == 0) & live
                self.nudged += int(zero.sum())
                b[zero] = np.float32(SIGN_SHIFT)
        if fixed.any():  # a = 0, b = +-1: daBNN's bit (a*x + b > 0) is the decided sign
            a[fixed] = 0
            b[fixed] = fold.constant[fixed]
        self.add("Affine", layer, {"input": self.src(layer), "a": self.weight(f"{layer.name}_a", a),
                                   "b": self.weight(f"{layer.name}_b", b)})

    def _relu(self, layer) -> None:
        self.add("Relu", layer, {"input": self.src(layer)})

    def _hardtanh(self, layer) -> None:
        # dropped (see _sign_plan, which refused it if anything but a binary conv reads it):
        # the binary convs binarize the unclamped tensor, with their thresholds folded
        self.dab[layer.name] = self.src(layer)

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
    alias: dict[str, str] = {}  # layers that emit nothing read (and are read as) their input
    for index, layer in enumerate(graph.layers):
        if layer.kind in _ALIASES:
            alias[layer.name] = alias.get(layer.inputs[0], layer.inputs[0])
        for name in layer.inputs:
            last[name] = index
            last[alias.get(name, name)] = index
    last[graph.output] = last[alias.get(graph.output, graph.output)] = math.inf
    return last


_ALIASES = ("flatten", "hardtanh")  # graph kinds the emitter writes no daBNN layer for
_SIGN_PATH = ("maxpool", "hardtanh")  # between a BatchNorm and the binary convs it is folded for
_CLAMP = "daBNN has no clamp operator"
_SHIFT = ("binarizes x - threshold (ReActNet's activation mean-shifting), and daBNN cannot shift "
          "activations before binarizing (BiBench Table 4: no mean-shifting); aiot folds the "
          "threshold into the BatchNorm before the layer only when that BatchNorm feeds binary "
          "convolutions with the same threshold and nothing else (max-pools and Hardtanh may "
          "sit between)")
_SHIFT_HINT = ("give every thresholded binary convolution a BatchNorm2d of its own right before "
               "it, or deploy ReActNet with LCE, which runs the shift")


@dataclass
class _Fold:
    """What a BatchNorm's Affine absorbs for the binary convolutions it feeds, per channel.

    ``threshold`` is subtracted from its shift (0: none); ``constant`` is 0, or +1/-1 where a
    clamp on the way decides the binary conv's sign for every input (the Affine then
    writes that constant: ``a = 0``, ``b = ±1``).
    """

    threshold: object  # float64 (C,)
    constant: object  # int8 (C,)

    def trivial(self) -> bool:
        return not (self.threshold.any() or self.constant.any())

    def same(self, other: _Fold) -> bool:
        import numpy as np

        return (np.array_equal(self.threshold, other.threshold)
                and np.array_equal(self.constant, other.constant))


@dataclass
class _SignPlan:
    """Which clamps are dropped, which BatchNorms absorb thresholds, and what is refused.

    ``refusals`` maps a layer name to ``(why, hint)``, raised when the emitter reaches it.
    """

    dropped: set = field(default_factory=set)
    folds: dict = field(default_factory=dict)
    refusals: dict = field(default_factory=dict)


def _sign_plan(graph) -> _SignPlan:
    """Drop every hardtanh and fold every binarization threshold, or say why not.

    A hardtanh ``clamp(v, lo, hi)`` read only by binary convs (through max-pools, which
    commute with any monotone function and with per-channel shifts) is dropped: the binary
    conv's sign of ``clamp(v) - t`` equals that of ``v - t`` when ``lo < t <= hi``, is +1 for
    every ``v`` when ``t <= lo`` and -1 when ``t > hi`` (a sign(v >= t) fact, exact in
    float32: ``a - t`` keeps the sign of ``a`` against ``t`` under gradual underflow). Chained
    clamps compose into one. Thresholds and decided signs (``t`` outside the band) are folded
    into the BatchNorm that starts the chain: ``b -= t``, or ``a = 0, b = ±1``.
    """
    import numpy as np

    plan = _SignPlan()
    nodes = graph.by_name()
    readers: dict[str, list] = {layer.name: [] for layer in graph.layers}
    for layer in graph.layers:
        for name in layer.inputs:
            readers[name].append(layer)

    def reached(name: str) -> tuple[list, list]:
        """(binary convs, other readers) that ``name`` reaches through max-pools/clamps."""
        convs, others, stack = [], [], [name]
        if name == graph.output:
            others.append(None)
        while stack:
            for reader in readers[stack.pop()]:
                if reader.kind in _SIGN_PATH:
                    stack.append(reader.name)
                    if reader.name == graph.output:
                        others.append(None)
                elif reader.kind == "bconv":
                    convs.append(reader)
                else:
                    others.append(reader)
        return convs, others

    def named(reader) -> str:
        return "the model's output" if reader is None else f"'{reader.name}' ({reader.kind})"

    for layer in graph.layers:
        if layer.kind != "hardtanh":
            continue
        _convs, others = reached(layer.name)
        if others:
            reader = ("the model returns the clamped values" if others[0] is None
                      else f"{named(others[0])} reads the clamped values too")
            why = (f"{_CLAMP}; it is dropped only where binary convolutions alone read it "
                   f"(directly or through max-pools), but {reader}")
            hint = ("use ReLU before full-precision layers and Hardtanh only before binary "
                    "convolutions, as binarize() does")
            plan.refusals[layer.name] = (why, hint)
        plan.dropped.add(layer.name)

    def fold_of(conv) -> tuple[_Fold, Layer]:
        """What ``conv`` needs from the start of its chain, and that start."""
        channels = conv.module.in_channels
        threshold = conv.module.threshold
        t = (np.zeros(channels) if threshold is None
             else threshold.detach().double().cpu().numpy().reshape(channels))
        clamps, node = [], nodes[conv.inputs[0]]
        while node.kind in _SIGN_PATH:
            if node.kind == "hardtanh":
                clamps.append((node.attrs["min"], node.attrs["max"]))
            node = nodes[node.inputs[0]]
        low, high = -math.inf, math.inf
        for lo, hi in reversed(clamps):  # clamp(clamp(v, L, H), l, h) == clamp(v, L', H')
            low, high = min(max(low, lo), hi), min(max(high, lo), hi)
        constant = np.where(t <= low, 1, np.where(t > high, -1, 0)).astype(np.int8)
        return _Fold(np.where(constant == 0, t, 0.0), constant), node

    for layer in graph.layers:
        if layer.kind != "bconv":
            continue
        fold, start = fold_of(layer)
        if fold.trivial():
            continue
        convs, others = reached(start.name)
        if start.kind != "bn":
            why = f"its input comes from {named(start)}, not from a BatchNorm"
        elif others:
            why = f"'{start.name}' (bn) also feeds {named(others[0])}"
        elif not all(fold.same(fold_of(conv)[0]) for conv in convs):
            why = (f"'{start.name}' (bn) also feeds binary convolutions that need other "
                   "thresholds")
        else:
            plan.folds[start.name] = fold
            continue
        plan.refusals[layer.name] = (f"{_SHIFT}, but {why}", _SHIFT_HINT)
    return plan


def _non_negative(graph) -> dict[str, bool]:
    """Graph name → whether its values are >= 0 by construction (ReLU and what keeps that)."""
    # a dropped hardtanh's daBNN tensor is its (unclamped) input: it keeps what that has
    keeps = ("maxpool", "avgpool", "global_avgpool", "flatten", "concat", "add", "hardtanh")
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

