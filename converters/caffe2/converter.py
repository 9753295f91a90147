"""Caffe2 NetDef (emit-only, legacy): ``init_net`` + ``predict_net`` protobufs, NCHW.

Caffe2 left PyTorch in 2.4 and no runtime can be installed, so aiot writes the two files
Caffe2 deployments used and checks them with its own NumPy executor of the operators it
emits (:mod:`aiot.converters.caffe2.reference`); benchmarking needs a legacy Caffe2 build.

Layout: the artifact is the predict net, ``<model>.caffe2.predict_net.pb``; its weights are
``GivenTensorFill`` operators in the sibling ``<model>.caffe2.init_net.pb``, written first, so
a predict net on disk always has a complete init net beside it. The sidecar records the init
net's sha256 under ``converter.init_net``.

Mapping (Caffe2's argument spellings): conv → ``Conv`` (kernels, strides, pads as
``[t, l, b, r]``, dilations, group, order); bn → ``SpatialBN`` (is_test=1, epsilon); relu6 →
``Clip`` (0, 6); a ``ceil_mode`` pooling → ``legacy_pad=3`` (CAFFE_LEGACY_POOLING: Caffe's
round-up sizing, PyTorch's ceil mode except when a last window would start in unpadded
space beyond the image, which the export's shape check refuses); avgpool → ``AveragePool``
with ``count_include_pad`` (a 2018+ Caffe2 argument; older builds always left padding out);
global average pooling → ``AveragePool`` with global_pooling=1; concat → ``Concat`` with its
second ``split_info`` output; flatten → ``Flatten``; linear → ``FC``; a zero ``pad`` layer
(TensorFlow-style "SAME" convs, e.g. EfficientNet-Lite) → no operator, added to the ``pads``
of the convolutions it feeds. Binary convolutions are refused: Caffe2 had no operator for
them.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

from aiot.converters.base import Availability, Converter, modules_available
from aiot.converters.caffe2.proto import net_def
from aiot.converters.caffe2.reference import load_net, run_net
from aiot.converters.graph import lower
from aiot.converters.sidecar import read_sidecar, sidecar_path
from aiot.core.companions import PREDICT_SUFFIX, init_net_path
from aiot.core.errors import ArtifactError, ConversionError
from aiot.core.fileio import sha256_file, write_atomic

FORMAT = "caffe2"
ORDER = "NCHW"
CAFFE_LEGACY_POOLING = 3  # caffe2_legacy.proto LegacyPadding


class Caffe2Converter(Converter):
    """Graph lowering (:mod:`aiot.converters.graph`) → NetDef protobufs, checked by NumPy."""

    name = FORMAT
    extension = PREDICT_SUFFIX
    backend = None
    description = ("emit-only (legacy): Caffe2 NetDef init_net + predict_net (NCHW); no "
                   "installable runtime — verified by aiot's NumPy reference executor")
    atol = 1e-4
    options: dict[str, tuple[str, str]] = {}  # noqa: RUF012 - the base class's attribute; NCHW only

    def availability(self) -> Availability:
        return modules_available({"google.protobuf": "protobuf"}, FORMAT)

    def toolchain_versions(self) -> dict[str, str]:
        return {pkg: version(pkg) for pkg in ("torch", "protobuf", "numpy")}

    def artifact_files(self, artifact: Path) -> list[Path]:
        """The predict net and the init net it needs."""
        return [Path(artifact), init_net_path(artifact)]

    def export(self, model, example, out_path: Path, options: dict[str, str]) -> dict:
        """Write the init net, then the predict net; on any failure neither file is left."""
        out_path, init_path = Path(out_path), init_net_path(out_path)
        try:
            graph = lower(model, example, FORMAT)
            init, predict = build_nets(graph, out_path.name.split(".")[0])
            write_atomic(init_path, lambda tmp: tmp.write_bytes(init.SerializeToString()))
            write_atomic(out_path, lambda tmp: tmp.write_bytes(predict.SerializeToString()))
            ops = _verify_shapes(out_path, init_path, graph, example)
        except BaseException:
            out_path.unlink(missing_ok=True)
            init_path.unlink(missing_ok=True)
            raise
        return {"ops": ops, "order": ORDER, "init_net": {
            "file": init_path.name, "sha256": sha256_file(init_path),
            "size_bytes": init_path.stat().st_size}}

    def reference_outputs(self, artifact: Path, inputs):
        """Logits ``(N, classes)`` of the artifact on ``inputs`` (N, C, H, W), by NumPy.

        Raises:
            ArtifactError: a file is missing, corrupt, or not the init net the sidecar names.
        """
        init_path = init_net_path(artifact)
        _check_init_hash(Path(artifact), init_path)
        outputs = run_net(load_net(artifact, init_path), inputs)
        return outputs.reshape(len(outputs), -1)


def _check_init_hash(artifact: Path, init_path: Path) -> None:
    """When the artifact has a sidecar, its init net must be the one recorded there."""
    if not sidecar_path(artifact).exists() or not init_path.exists():
        return  # during conversion there is no sidecar yet; a missing file is reported later
    expected = read_sidecar(artifact).get("converter", {}).get("init_net", {}).get("sha256")
    if expected and sha256_file(init_path) != expected:
        raise ArtifactError(f"caffe2 init net {init_path} does not match the sha256 in "
                            f"{sidecar_path(artifact).name}", "re-convert it with --fresh")


def _verify_shapes(predict_path: Path, init_path: Path, graph, example) -> list[str]:
    """Re-read both files and run the example: every blob must have its PyTorch shape.

    This is where a Caffe2 sizing rule that differs from PyTorch's (a ceil-mode pooling
    window starting in the tail padding) is caught, instead of at parity.
    """
    try:
        net = load_net(predict_path, init_path)
        blobs = run_net(net, example.detach().cpu().numpy(), keep_blobs=True)
    except ArtifactError as exc:  # just written by this process: the emitter is at fault
        raise ConversionError(FORMAT, "verify", exc.message,
                              "aiot emitted a net it cannot run; please report it") from None
    for layer in graph.layers:
        if layer.kind in ("input", "pad"):  # a pad has no blob: its convolutions pad
            continue
        got = tuple(blobs[layer.name].shape)
        if got != tuple(layer.shape):
            raise ConversionError(FORMAT, "verify", f"layer '{layer.name}' ({layer.kind}) gives "
                                  f"shape {got} in Caffe2 but {tuple(layer.shape)} in PyTorch",
                                  "Caffe2 sizes this layer differently; change its parameters")
    return net.op_types()


# --- emission -------------------------------------------------------------------------------


class _Nets:
    """The two NetDefs under construction; blob names are the graph's layer names."""

    def __init__(self, model_name: str) -> None:
        self.init, self.predict = net_def(), net_def()
        self.init.name, self.predict.name = f"{model_name}_init", model_name
        self.blob: dict[str, str] = {}  # layer name -> blob name
        self.taken: set[str] = set()
        self.folded_pads: dict[str, list[int]] = {}  # pad layer -> [top, left, bottom, right]

    def fill(self, name: str, tensor) -> str:
        """A ``GivenTensorFill`` of ``tensor`` (torch or numpy) in the init net; its blob name."""
        import numpy as np

        name = self.unique(name)
        data = np.asarray(tensor.detach().cpu().numpy() if hasattr(tensor, "detach") else tensor,
                          dtype=np.float32)
        self.op(self.init, "GivenTensorFill", [], [name], shape=list(data.shape),
                values=data.reshape(-1))
        self.init.external_output.append(name)
        self.predict.external_input.append(name)
        return name

    def unique(self, name: str) -> str:
        """``name``, suffixed until no layer or weight blob has it (a layer may be "conv_w")."""
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name

    def op(self, net, kind: str, inputs: list[str], outputs: list[str], **args):
        """Append an operator with Caffe2-typed arguments to ``net``."""
        op = net.op.add(type=kind, input=inputs, output=outputs)
        for key, value in args.items():
            _set_arg(op.arg.add(name=key), value)
        return op

    def layer(self, layer, kind: str, extra: list[str] | None = None, **args):
        """The predict-net operator of ``layer``, reading its input layers' blobs."""
        inputs = [self.blob[name] for name in layer.inputs] + (extra or [])
        self.blob[layer.name] = layer.name
        self.op(self.predict, kind, inputs, [layer.name], **args)


def _set_arg(arg, value) -> None:
    """Caffe2's Argument is untyped: pick ``i``/``f``/``s`` or ``ints``/``floats`` by value."""
    import numpy as np

    if isinstance(value, np.ndarray):
        arg.floats.extend(value.tolist())  # tolist(): protobuf copies Python floats fastest
    elif isinstance(value, (bool, int)):
        arg.i = int(value)
    elif isinstance(value, float):
        arg.f = value
    elif isinstance(value, str):
        arg.s = value.encode()
    elif all(isinstance(v, int) for v in value):
        arg.ints.extend(value)
    else:
        arg.floats.extend(float(v) for v in value)


def build_nets(graph, model_name: str):
    """``(init_net, predict_net)`` for a lowered graph.

    Raises:
        ConversionError: a layer Caffe2 cannot express (binary convolution, a second input).
    """
    nets = _Nets(model_name)
    inputs = [layer for layer in graph.layers if layer.kind == "input"]
    if len(inputs) != 1:
        raise ConversionError(FORMAT, "lower", f"the model has {len(inputs)} inputs, not 1")
    nets.predict.external_input.append("data")
    nets.blob[inputs[0].name] = "data"
    nets.taken.update(["data", *(layer.name for layer in graph.layers)])
    shapes = {layer.name: tuple(layer.shape) for layer in graph.layers}
    _check_pads_feed_convs(graph)
    for layer in graph.layers[1:]:
        _EMITTERS[layer.kind](nets, layer, shapes)
    nets.predict.external_output.append(nets.blob[graph.output])
    # "data" first, then the weights, as Caffe2's exporters listed them
    names = list(nets.predict.external_input)
    nets.predict.ClearField("external_input")
    nets.predict.external_input.extend(["data"] + [n for n in names if n != "data"])
    return nets.init, nets.predict


def _refuse(layer, why: str, hint: str = "pick a model built from standard CNN layers"):
    raise ConversionError(FORMAT, "lower", f"layer '{layer.name}' ({layer.kind}): {why}", hint)


def _check_pads_feed_convs(graph) -> None:
    """A ``pad`` layer becomes its convolutions' ``pads``: it must feed convolutions only."""
    for layer in graph.layers:
        if layer.kind != "pad":
            continue
        readers = {c.kind for c in graph.consumers(layer.name)}
        if layer.name == graph.output or readers - {"conv"}:
            others = ", ".join(sorted(readers - {"conv"})) or "the output"
            _refuse(layer, f"zero padding read by {others}; it is folded into convolutions only")


def _emit_pad(nets: _Nets, layer, shapes) -> None:
    """No operator: the convolutions reading this layer read its input with larger pads."""
    nets.blob[layer.name] = nets.blob[layer.inputs[0]]
    nets.folded_pads[layer.name] = list(layer.attrs["pads"])


def _conv_pads(module) -> list[int]:
    """PyTorch conv padding as Caffe2's ``[top, left, bottom, right]``."""
    if not isinstance(module.padding, str):
        return [*module.padding, *module.padding]
    if module.padding == "valid":
        return [0, 0, 0, 0]
    # "same": PyTorch pads dilation*(kernel-1) in all, the odd one at the end
    total = [d * (k - 1) for d, k in zip(module.dilation, module.kernel_size)]
    return [t // 2 for t in total] + [t - t // 2 for t in total]


def _emit_conv(nets: _Nets, layer, shapes) -> None:
    conv = layer.module
    if conv.padding_mode != "zeros":
        _refuse(layer, f"padding_mode '{conv.padding_mode}' has no Caffe2 equivalent")
    if conv.groups != 1 and tuple(conv.dilation) != (1, 1):
        _refuse(layer, "Caffe2's Conv cannot combine groups with dilation")
    weights = [nets.fill(f"{layer.name}_w", conv.weight)]
    if conv.bias is not None:
        weights.append(nets.fill(f"{layer.name}_b", conv.bias))
    folded = nets.folded_pads.get(layer.inputs[0], [0, 0, 0, 0])
    pads = [own + extra for own, extra in zip(_conv_pads(conv), folded)]
    nets.layer(layer, "Conv", weights, kernels=list(conv.kernel_size), strides=list(conv.stride),
               pads=pads, dilations=list(conv.dilation), group=conv.groups, order=ORDER)


def _emit_bn(nets: _Nets, layer, shapes) -> None:
    import torch

    bn = layer.module
    if bn.running_mean is None:
        _refuse(layer, "batch statistics at inference (track_running_stats=False)")
    ones = torch.ones_like(bn.running_mean)
    scale = bn.weight if bn.weight is not None else ones
    bias = bn.bias if bn.bias is not None else torch.zeros_like(ones)
    blobs = [nets.fill(f"{layer.name}_{suffix}", tensor) for suffix, tensor in
             (("s", scale), ("b", bias), ("rm", bn.running_mean), ("riv", bn.running_var))]
    nets.layer(layer, "SpatialBN", blobs, is_test=1, epsilon=float(bn.eps), order=ORDER)


def _emit_pool(nets: _Nets, layer, shapes) -> None:
    attrs = layer.attrs
    args = {"kernels": list(attrs["kernel"]), "strides": list(attrs["stride"]),
            "pads": [*attrs["padding"], *attrs["padding"]], "order": ORDER}
    if attrs["ceil_mode"]:
        args["legacy_pad"] = CAFFE_LEGACY_POOLING
    if layer.kind == "maxpool":
        nets.layer(layer, "MaxPool", **args)
        return
    if attrs["count_include_pad"] and attrs["ceil_mode"] and _overhangs(layer, shapes):
        # PyTorch divides such a window by its part inside the padding, Caffe2 by the kernel
        _refuse(layer, "a ceil-mode window overhangs the padding with count_include_pad",
                "use count_include_pad=False or ceil_mode=False")
    nets.layer(layer, "AveragePool", count_include_pad=int(attrs["count_include_pad"]), **args)


def _overhangs(layer, shapes) -> bool:
    """Whether the last window of a pooling reaches past the input plus its padding."""
    size_in, size_out = shapes[layer.inputs[0]][2:], layer.shape[2:]
    kernel, stride, pad = layer.attrs["kernel"], layer.attrs["stride"], layer.attrs["padding"]
    return any((size_out[a] - 1) * stride[a] + kernel[a] > size_in[a] + 2 * pad[a]
               for a in range(2))


def _emit_linear(nets: _Nets, layer, shapes) -> None:
    import torch

    if len(shapes[layer.inputs[0]]) != 2:
        _refuse(layer, "Caffe2's FC flattens its input; PyTorch's Linear here does not")
    linear = layer.module
    bias = linear.bias if linear.bias is not None else torch.zeros(linear.out_features)
    nets.layer(layer, "FC", [nets.fill(f"{layer.name}_w", linear.weight),
                             nets.fill(f"{layer.name}_b", bias)])


def _emit_add(nets: _Nets, layer, shapes) -> None:
    if len(layer.inputs) != 2 or shapes[layer.inputs[0]] != shapes[layer.inputs[1]]:
        _refuse(layer, "only the sum of two tensors of one shape is emitted (no broadcast)")
    nets.layer(layer, "Add")


def _emit_concat(nets: _Nets, layer, shapes) -> None:
    axis = layer.attrs["axis"] % len(layer.shape)
    nets.layer(layer, "Concat", axis=axis)  # Caffe2 refuses "order" next to "axis"
    # Concat's second output, the sizes along the axis, which Caffe2 always produced
    nets.predict.op[-1].output.append(nets.unique(f"{layer.name}_split_info"))


def _emit_bconv(nets: _Nets, layer, shapes) -> None:
    _refuse(layer, "Caffe2 has no binary convolution operator",
            "convert the model to a binary format (lce, dabnn) or use its float version")


_EMITTERS = {
    "conv": _emit_conv, "bconv": _emit_bconv, "bn": _emit_bn,
    "relu": lambda nets, layer, shapes: nets.layer(layer, "Relu"),
    "relu6": lambda nets, layer, shapes: nets.layer(layer, "Clip", min=0.0, max=6.0),
    "hardtanh": lambda nets, layer, shapes: nets.layer(
        layer, "Clip", min=layer.attrs["min"], max=layer.attrs["max"]),
    "maxpool": _emit_pool, "avgpool": _emit_pool,
    "global_avgpool": lambda nets, layer, shapes: nets.layer(
        layer, "AveragePool", global_pooling=1, order=ORDER),
    "linear": _emit_linear, "add": _emit_add, "concat": _emit_concat, "pad": _emit_pad,
    "flatten": lambda nets, layer, shapes: nets.layer(
        layer, "Flatten", axis=layer.attrs["start_dim"] % len(shapes[layer.inputs[0]])),
}
