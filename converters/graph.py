"""One lowering of a PyTorch model into a flat list of CNN layers, for the emitters.

Formats without a PyTorch exporter (Caffe2 NetDef, daBNN, the TensorFlow graph LCE
converts) are written from this list rather than each walking ``nn.Module`` trees their own
way. The model is traced with ``torch.fx`` (standard layers and :class:`BinaryConv2d` are
leaves), shapes are propagated with the example input, and every node becomes a
:class:`Layer` with a kind from :data:`KINDS`. Functional convolutions (``F.conv2d`` on a
module's own weight, as TensorFlow-style "SAME" conv modules write them) become ``conv``
layers, a zero ``nn.ZeroPad2d`` a ``pad`` layer, and ``x.view(x.size(0), -1)`` a ``flatten``;
weights and sizes read on the way are not layers. Anything else is refused with the name of
the offending node, so a format never silently drops an operation.

Shapes are NCHW, batch included.
"""

from __future__ import annotations

import functools
import math
import operator
from dataclasses import dataclass, field

from aiot.core.errors import ConversionError, first_line

#: Layer kinds an emitter may meet, with the attributes each carries.
KINDS = {
    "input": "",
    "conv": "module (nn.Conv2d: weight OIHW, bias, stride, padding, groups, dilation)",
    "bconv": "module (BinaryConv2d: binary_weight(), alpha(), threshold, binary_padding, pad_value, "
             "stride)",
    "bn": "module (nn.BatchNorm2d, eval statistics)",
    "relu": "", "relu6": "",
    "hardtanh": "min, max (a clamp; binarized backbones use it instead of ReLU)",
    "maxpool": "kernel, stride, padding, ceil_mode",
    "avgpool": "kernel, stride, padding, ceil_mode, count_include_pad",
    "global_avgpool": "",
    "linear": "module (nn.Linear)",
    "add": "", "concat": "axis",
    "flatten": "start_dim",
    "pad": "pads (top, left, bottom, right), zeros; emitters fold it into the conv it feeds",
}


@dataclass
class Layer:
    """One operation: ``name`` is its output's name, ``inputs`` name earlier layers."""

    name: str
    kind: str
    inputs: list[str]
    shape: tuple[int, ...]
    module: object | None = None
    attrs: dict = field(default_factory=dict)


@dataclass
class Graph:
    """Layers in execution order; ``output`` names the layer whose value is returned."""

    layers: list[Layer]
    output: str

    def by_name(self) -> dict[str, Layer]:
        """Layers keyed by name."""
        return {layer.name: layer for layer in self.layers}

    def consumers(self, name: str) -> list[Layer]:
        """Layers that read ``name``."""
        return [layer for layer in self.layers if name in layer.inputs]


def pair(value) -> tuple[int, int]:
    """``3`` or ``(3, 3)`` → ``(3, 3)``: PyTorch's int-or-tuple layer arguments."""
    return (value, value) if isinstance(value, int) else tuple(v if v is None else int(v) for v in value)


def bn_scale_shift(bn):
    """Eval-mode BatchNorm as per-channel ``(scale, shift)`` float64 arrays: ``x*scale + shift``.

    Every emitter that cannot write BatchNorm as such (LCE's TF graph, daBNN's Affine) folds it
    with this one computation; float64, so the rounding happens once, where each format casts.
    """
    import numpy as np

    mean = bn.running_mean.detach().double().numpy()
    var = bn.running_var.detach().double().numpy()
    gamma = np.ones_like(mean) if bn.weight is None else bn.weight.detach().double().numpy()
    beta = np.zeros_like(mean) if bn.bias is None else bn.bias.detach().double().numpy()
    scale = gamma / np.sqrt(var + bn.eps)
    return scale, beta - mean * scale


def _module_layer(fmt: str, name: str, module, inputs, shape) -> Layer:
    from torch import nn

    from aiot.models.binary import BinaryConv2d

    if isinstance(module, BinaryConv2d):
        return Layer(name, "bconv", inputs, shape, module)
    if isinstance(module, nn.Conv2d):
        return Layer(name, "conv", inputs, shape, module)
    if isinstance(module, nn.BatchNorm2d):
        return Layer(name, "bn", inputs, shape, module)
    if isinstance(module, nn.ReLU):
        return Layer(name, "relu", inputs, shape)
    if isinstance(module, nn.ReLU6):
        return Layer(name, "relu6", inputs, shape)
    if isinstance(module, nn.Hardtanh):
        return Layer(name, "hardtanh", inputs, shape,
                     attrs={"min": float(module.min_val), "max": float(module.max_val)})
    if isinstance(module, nn.Linear):
        return Layer(name, "linear", inputs, shape, module)
    if isinstance(module, nn.MaxPool2d):
        return Layer(name, "maxpool", inputs, shape, attrs={
            "kernel": pair(module.kernel_size), "stride": pair(module.stride or module.kernel_size),
            "padding": pair(module.padding), "ceil_mode": bool(module.ceil_mode)})
    if isinstance(module, nn.AvgPool2d):
        return Layer(name, "avgpool", inputs, shape, attrs={
            "kernel": pair(module.kernel_size), "stride": pair(module.stride or module.kernel_size),
            "padding": pair(module.padding), "ceil_mode": bool(module.ceil_mode),
            "count_include_pad": bool(module.count_include_pad)})
    if isinstance(module, nn.AdaptiveAvgPool2d) and pair(module.output_size) == (1, 1):
        return Layer(name, "global_avgpool", inputs, shape)
    if isinstance(module, nn.Flatten) and module.end_dim == -1:
        return Layer(name, "flatten", inputs, shape, attrs={"start_dim": int(module.start_dim)})
    if isinstance(module, (nn.ZeroPad2d, nn.ConstantPad2d)):
        return _pad_layer(fmt, name, inputs, shape, module.padding, float(module.value))
    if isinstance(module, (nn.Dropout, nn.Identity)):
        return Layer(name, "identity", inputs, shape)
    raise ConversionError(fmt, "lower", f"layer '{name}' ({type(module).__name__}) has no "
                          f"{fmt} equivalent", "pick a model built from standard CNN layers")


def _pad_layer(fmt: str, name: str, inputs, shape, padding, value: float) -> Layer:
    """``nn.ZeroPad2d``'s ``(left, right, top, bottom)`` as a ``pad`` layer, zeros only."""
    left, right, top, bottom = (padding,) * 4 if isinstance(padding, int) else padding
    if value != 0.0 or min(left, right, top, bottom) < 0:
        raise ConversionError(fmt, "lower", f"layer '{name}' pads with {value} or crops",
                              "only zero padding is lowered")
    return Layer(name, "pad", inputs, shape, attrs={"pads": (top, left, bottom, right)})


def _functional_conv(node, tensors: dict):
    """``F.conv2d(x, weight, bias, stride, padding, dilation, groups)`` on module weights as
    an ``nn.Conv2d`` holding the same tensors, so every emitter reads one kind of conv."""
    import torch
    from torch import nn

    names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
    call = {**dict(zip(names, node.args)), **node.kwargs}
    weight, bias = tensors.get(getattr(call["weight"], "name", None)), call.get("bias")
    if weight is None or (bias is not None and getattr(bias, "name", None) not in tensors):
        return None  # weights computed in the graph: not a plain convolution
    conv = nn.Conv2d(weight.shape[1] * call.get("groups", 1), weight.shape[0],
                     tuple(weight.shape[2:]), stride=call.get("stride", 1),
                     padding=call.get("padding", 0), dilation=call.get("dilation", 1),
                     groups=call.get("groups", 1), bias=bias is not None)
    with torch.no_grad():
        conv.weight.copy_(weight)
        if bias is not None:
            conv.bias.copy_(tensors[bias.name])
    return conv.eval()


def _is_batch_flatten(node, shapes: dict, shape) -> bool:
    """``x.view(n, -1)`` / ``reshape``: keeps the batch and flattens the rest (start_dim 1)."""
    source = shapes.get(getattr(node.args[0], "name", None), ())
    return (len(shape) == 2 and len(source) >= 2 and shape[0] == source[0]
            and shape[1] == math.prod(source[1:]))


def _is_conv(node) -> bool:
    import torch

    return node.op == "call_function" and node.target in (torch.conv2d,
                                                          torch.nn.functional.conv2d)


def _function_layer(fmt: str, node, inputs, shape, tensors: dict, shapes: dict) -> Layer:
    import torch

    target, args, kwargs = node.target, node.args, node.kwargs
    if target in (operator.add, torch.add) or (node.op == "call_method" and target == "add"):
        return Layer(node.name, "add", inputs, shape)
    if target is torch.cat:
        axis = kwargs.get("dim", args[1] if len(args) > 1 else 0)
        return Layer(node.name, "concat", inputs, shape, attrs={"axis": int(axis)})
    if target in (torch.flatten, "flatten"):
        start = kwargs.get("start_dim", args[1] if len(args) > 1 else 0)
        return Layer(node.name, "flatten", inputs, shape, attrs={"start_dim": int(start)})
    if target in ("view", "reshape", torch.reshape) and _is_batch_flatten(node, shapes, shape):
        return Layer(node.name, "flatten", inputs[:1], shape, attrs={"start_dim": 1})
    if target in (torch.relu, torch.nn.functional.relu, "relu"):
        return Layer(node.name, "relu", inputs, shape)
    if _is_conv(node):
        conv = _functional_conv(node, tensors)
        if conv is not None:
            return Layer(node.name, "conv", inputs[:1], shape, conv)
    label = getattr(target, "__name__", str(target))
    raise ConversionError(fmt, "lower", f"operation '{label}' at node '{node.name}' has no "
                          f"{fmt} equivalent", "pick a model built from standard CNN layers")


def _node_inputs(node) -> list[str]:
    """Names of the graph nodes ``node`` reads, in argument order (lists flattened)."""
    import torch.fx

    names: list[str] = []

    def visit(arg) -> None:
        if isinstance(arg, torch.fx.Node):
            names.append(arg.name)
        elif isinstance(arg, (list, tuple)):
            for item in arg:
                visit(item)

    for arg in node.args:
        visit(arg)
    return names


def trace(model):
    """``torch.fx`` graph of ``model`` with :class:`BinaryConv2d` as one leaf layer, not its code.

    Raises whatever torch.fx raises for an untraceable model.
    """
    import torch.fx

    from aiot.models.binary import BinaryConv2d

    class _Tracer(torch.fx.Tracer):
        def is_leaf_module(self, module, qualname):
            return isinstance(module, BinaryConv2d) or super().is_leaf_module(module, qualname)

    return _Tracer().trace(model)


def lower(model, example, fmt: str) -> Graph:
    """The model as a :class:`Graph` of known layer kinds (identities removed).

    Raises:
        ConversionError: the model cannot be traced or uses an operation outside KINDS.
    """
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    model = model.eval()
    try:
        traced = torch.fx.GraphModule(model, trace(model))
        with torch.no_grad():
            ShapeProp(traced).propagate(example)
    except Exception as exc:
        raise ConversionError(fmt, "lower", first_line(f"the model cannot be traced: {exc}"),
                              "the emitter needs a model without data-dependent control flow") from None
    modules = dict(traced.named_modules())
    layers: list[Layer] = []
    alias: dict[str, str] = {}  # identity outputs -> what they pass through
    tensors: dict[str, object] = {}  # get_attr nodes: a module's weights read in forward()
    shapes: dict[str, tuple] = {}
    output = None
    for node in traced.graph.nodes:
        read = _node_inputs(node)
        inputs = [alias.get(name, name) for name in read if name in shapes]
        meta = node.meta.get("tensor_meta")
        shape = tuple(meta.shape) if meta is not None and hasattr(meta, "shape") else ()
        if node.op == "placeholder":
            layers.append(Layer(node.name, "input", [], shape))
        elif node.op == "output":
            if len(inputs) > 1:  # the emitters write one output blob
                raise ConversionError(fmt, "lower", f"the model returns {len(inputs)} outputs; "
                                      f"aiot's {fmt} emitter writes models with one",
                                      "convert it to tflite, onnx, ort, ptl or executorch")
            output = inputs[0]
            continue
        elif node.op == "get_attr":
            tensors[node.name] = functools.reduce(getattr, node.target.split("."), traced)
            continue
        elif node.op == "call_method" and node.target == "size":
            continue  # an int for a later view(); not a tensor, not a layer
        elif any(name in tensors for name in read) and not _is_conv(node):
            raise ConversionError(fmt, "lower", f"node '{node.name}' computes with a stored "
                                  "tensor", "only convolutions may read their weights directly")
        elif node.op == "call_module":
            layers.append(_module_layer(fmt, node.name, modules[node.target], inputs, shape))
        else:
            layers.append(_function_layer(fmt, node, inputs, shape, tensors, shapes))
        if layers[-1].kind == "identity":
            alias[node.name] = inputs[0]
            layers.pop()
        shapes[node.name] = shape
    return Graph(layers, output)
