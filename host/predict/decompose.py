"""A model as the kernels a mobile runtime runs: its ``torch.export`` graph, grouped by fusion.

The graph is read in execution order. An operator that computes (a convolution, a fully
connected layer, pooling, an add, a concatenation, ...) starts a kernel; a batch norm after a
convolution and an activation after a convolution, a fully connected layer, an add or a batch
norm join it when nothing else reads the output they follow (conv-bn-relu, fc-relu, add-relu:
the fusions TFLite and ONNX Runtime apply, and the ones nn-Meter's kernels are cut at).
Reshapes, flattens and dropout cost nothing and are skipped; operators that read only weights
are folded by every converter and skipped too. A squeeze-excite (global pool, two small convs,
a sigmoid, a scale) is one kernel, as nn-Meter has it.

Each kernel keeps its configuration (channels, kernel size, stride, resolution) and its cost:
MACs in the convention of :mod:`aiot.models.complexity` (a test holds the two to the same
totals), parameters, and the elements it reads and writes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

#: Operators that move no data (views) or vanish in an exported eval model.
FREE = frozenset({"view", "reshape", "_reshape_alias", "flatten", "squeeze", "unsqueeze", "dropout",
                  "clone", "contiguous", "alias", "detach", "_assert_tensor_metadata", "expand",
                  "getitem", "lift_fresh_copy", "_to_copy", "to", "type_as", "identity"})
ACTIVATIONS = {"relu": "relu", "relu_": "relu", "hardtanh": "relu6", "hardtanh_": "relu6",
               "relu6": "relu6", "hardswish": "hswish", "hardswish_": "hswish", "silu": "silu",
               "silu_": "silu", "sigmoid": "sigmoid", "hardsigmoid": "hsigmoid", "gelu": "gelu",
               "leaky_relu": "leaky_relu", "clamp": "clamp", "clamp_min": "relu", "tanh": "tanh"}
BATCH_NORMS = frozenset({"batch_norm", "_native_batch_norm_legit_no_training", "native_batch_norm"})
#: Kernel kinds an activation (and, for convolutions, a batch norm) fuses into.
TAKES_ACTIVATION = frozenset({"conv", "gconv", "dw", "fc", "add", "bn"})
#: The convolution kinds: a batch norm fuses into them, and they read as ``k x k / stride``.
CONVOLUTIONS = frozenset({"conv", "gconv", "dw"})
_BINARY = {"add": "add", "sub": "add", "mul": "mul", "div": "mul"}
_POOLS = {"max_pool2d": "maxpool", "max_pool2d_with_indices": "maxpool", "avg_pool2d": "avgpool"}
#: The most kernels a squeeze-excite's scale path holds (pool, conv, conv, and their fusions).
_SE_PATH = 4


@dataclass
class Kernel:
    """One kernel of a model, as a runtime runs it.

    Attributes:
        kind: ``conv``, ``gconv`` (grouped: fewer groups than channels), ``dw`` (depthwise),
            ``fc``, ``maxpool``, ``avgpool``, ``gap``, ``add``, ``mul``, ``concat``, ``bn``,
            ``act``, ``se``, ``softmax``, or an operator's own name
            for anything else (predicted with a warning: never collected).
        label: where it is in the model (the PyTorch module path of its first operator).
        ops: the exported graph's operators it runs, in order (``conv2d``, ``batch_norm``, ``relu``).
        cin, cout, k, stride, groups: channels in and out, kernel size, stride, groups (1 where
            the kind has none; a squeeze-excite's ``groups`` is its squeezed width).
        h, w, ho, wo: the input's and output's height and width (1 for flat tensors).
        macs: multiply-accumulates, params: weights it reads, in_elems: every tensor it reads
            but its weights, out_elems: what it writes, io_elems: its first input and its output
            (what a model of this kernel alone copies in and out).
        act: its fused activation (``none``), bn: whether a batch norm is fused into it.
    """

    kind: str
    label: str = ""
    ops: list[str] = field(default_factory=list)
    cin: int = 1
    cout: int = 1
    k: int = 1
    stride: int = 1
    groups: int = 1
    h: int = 1
    w: int = 1
    ho: int = 1
    wo: int = 1
    macs: int = 0
    params: int = 0
    in_elems: int = 0
    out_elems: int = 0
    io_elems: int = 0
    act: str = "none"
    bn: bool = False

    @property
    def width(self) -> int:
        """A convolution's channels per group (a dense one's: all its input channels); any
        other kind's input channels (``groups`` means something else there)."""
        if self.kind not in CONVOLUTIONS:
            return self.cin
        return max(self.cin // max(self.groups, 1), 1)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Kernel:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def describe(self) -> str:
        """``conv 3x3/2 64→128 @56x56 +bn+relu``: what a person reads in a table."""
        if self.kind in CONVOLUTIONS | {"maxpool", "avgpool"}:
            groups = f" g{self.groups}" if self.kind == "gconv" else ""
            shape = f"{self.k}x{self.k}/{self.stride}{groups} {self.cin}→{self.cout} @{self.h}x{self.w}"
        elif self.kind == "fc":
            shape = f"{self.cin}→{self.cout}"
        elif self.kind == "se":
            shape = f"{self.cin}→{self.groups}→{self.cin} @{self.h}x{self.w}"
        else:
            shape = f"{self.cout}ch @{self.h}x{self.w}"  # the input's size, as every kernel's
        extras = ("+bn" if self.bn and self.kind != "bn" else "") + (
            f"+{self.act}" if self.act != "none" else "")
        return f"{self.kind} {shape}{extras}"


@dataclass
class Decomposition:
    """A model's kernels, and what the whole model copies in and out (``io_elems``)."""

    kernels: list[Kernel]
    io_elems: int
    macs: int

    def to_dict(self) -> dict:
        return {"kernels": [k.to_dict() for k in self.kernels], "io_elems": self.io_elems,
                "macs": self.macs}

    @classmethod
    def from_dict(cls, data: dict) -> Decomposition:
        return cls([Kernel.from_dict(k) for k in data["kernels"]], int(data["io_elems"]),
                   int(data["macs"]))


def decompose(model, example) -> Decomposition:
    """The kernels of ``model`` called with ``example`` (a tensor or a tuple of them).

    Raises:
        ValueError: the model does not export (``torch.export``), with the exporter's reason.
    """
    import torch

    args = example if isinstance(example, tuple) else (example,)
    try:
        program = torch.export.export(model.eval(), args)
    except Exception as exc:  # noqa: BLE001 - any exporter failure: the model cannot be read
        raise ValueError(f"torch.export cannot read it: {type(exc).__name__}: "
                         f"{str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}") from None
    return decompose_program(program)


def decompose_program(program) -> Decomposition:
    """The kernels of an exported program (see the module docstring)."""
    user = {s.arg.name for s in program.graph_signature.input_specs
            if s.kind.name == "USER_INPUT" and hasattr(s.arg, "name")}
    walk = _Walk(user)
    for node in program.graph.nodes:
        walk.visit(node)
    kernels = _merge_squeeze_excite(walk)
    outputs = [a for node in program.graph.nodes if node.op == "output"
               for a in _flat(node.args) if _is_node(a)]
    io = sum(_numel(n) for n in program.graph.nodes if n.name in user) + sum(map(_numel, outputs))
    return Decomposition(kernels, io, sum(k.macs for k in kernels))


class _Walk:
    """The graph's nodes grouped into kernels, in order."""

    def __init__(self, user_inputs: set[str]):
        self.user = user_inputs
        self.const: set[str] = set()  # nodes computed from weights only
        self.root: dict[str, object] = {}  # a free op's node -> the node whose data it is
        self.owner: dict[str, int] = {}  # node name -> index of the kernel that wrote it
        self.kernels: list[Kernel] = []
        self.tails: list[object] = []  # each kernel's last node
        self.inputs: list[list] = []  # each kernel's activation inputs (root nodes)

    def visit(self, node) -> None:
        if node.op in ("placeholder", "get_attr"):
            if node.name not in self.user:
                self.const.add(node.name)
            return
        if node.op != "call_function":
            return
        op = _opname(node)
        acts = [self._root(a) for a in _flat(node.args) if _is_node(a) and a.name not in self.const]
        if not acts:
            self.const.add(node.name)
            return
        if op in FREE:
            self.root[node.name] = acts[0]
            return
        if self._fuse(node, op, acts):
            return
        self._start(node, op, acts)

    def _root(self, node):
        return self.root.get(node.name, node)

    def _fuse(self, node, op: str, acts: list) -> bool:
        fused = op in BATCH_NORMS or op in ACTIVATIONS
        if not fused or len(acts) != 1 or acts[0].name not in self.owner:
            return False
        index = self.owner[acts[0].name]
        kernel, tail = self.kernels[index], self.tails[index]
        if tail is not acts[0] or len(tail.users) != 1:
            return False
        if op in BATCH_NORMS:
            if kernel.kind not in CONVOLUTIONS or kernel.bn or kernel.act != "none":
                return False
            kernel.bn = True
            kernel.params += _const_elems(node, self.const)
        else:
            if kernel.kind not in TAKES_ACTIVATION or kernel.act != "none":
                return False
            kernel.act = ACTIVATIONS[op]
        kernel.ops.append(op)
        self.tails[index] = node
        self.owner[node.name] = index
        return True

    def _start(self, node, op: str, acts: list) -> None:
        kernel = _kernel(node, op, acts, self.const)
        self.kernels.append(kernel)
        self.tails.append(node)
        self.inputs.append(acts)
        self.owner[node.name] = len(self.kernels) - 1


def _kernel(node, op: str, acts: list, const: set[str]) -> Kernel:
    """A new kernel anchored at ``node`` (its configuration read from the shapes)."""
    first, out = _shape(acts[0]), _shape(node)
    n, cin, h, w = _nchw(first)
    _, cout, ho, wo = _nchw(out)
    kernel = Kernel(kind=op, label=_label(node), ops=[op], cin=cin, cout=cout, h=h, w=w, ho=ho, wo=wo,
                    in_elems=sum(_numel(a) for a in acts), out_elems=_numel(node),
                    io_elems=_numel(acts[0]) + _numel(node), params=_const_elems(node, const))
    if op in ("conv2d", "convolution", "_convolution"):
        weight = _shape(node.args[1])
        groups = int(node.args[8] if op != "conv2d" else (node.args[6] if len(node.args) > 6 else 1))
        stride = node.args[3] if len(node.args) > 3 else 1
        kernel.k, kernel.groups = int(weight[-1]), groups
        kernel.stride = int(stride[0] if isinstance(stride, (list, tuple)) else stride)
        kernel.kind = "conv" if groups == 1 else "dw" if groups == cin else "gconv"
        kernel.macs = _numel(node) // max(n, 1) * (cin // groups) * int(weight[-1]) * int(weight[-2])
    elif op in ("linear", "addmm", "mm") and kernel.params:
        weight = next(_shape(a) for a in _flat(node.args) if _is_node(a) and a.name in const
                      and len(_shape(a)) == 2)
        features = int(weight[1] if op == "linear" else weight[0])
        kernel.kind, kernel.cin, kernel.cout = "fc", features, _shape(node)[-1]
        kernel.macs = _numel(node) * features // max(n, 1)
    elif op in _POOLS:
        size = node.args[1]
        stride = node.args[2] if len(node.args) > 2 and node.args[2] else size
        kernel.kind, kernel.k = _POOLS[op], int(size[0] if isinstance(size, (list, tuple)) else size)
        kernel.stride = int(stride[0] if isinstance(stride, (list, tuple)) else stride)
    elif op in ("adaptive_avg_pool2d", "mean") and ho == 1 and wo == 1:
        kernel.kind, kernel.k = "gap", h
    elif op == "adaptive_avg_pool2d":
        kernel.kind, kernel.k, kernel.stride = "avgpool", max(h // max(ho, 1), 1), max(h // max(ho, 1), 1)
    elif op in _BINARY:
        kernel.kind = _BINARY[op]
        kernel.in_elems += _const_elems(node, const)  # x + y, y a weight (a collected add)
        kernel.params = 0
    elif op == "cat":
        kernel.kind, kernel.groups = "concat", len(acts) + sum(
            1 for a in _flat(node.args) if _is_node(a) and a.name in const)
        kernel.in_elems += _const_elems(node, const)
        kernel.params = 0
    elif op in BATCH_NORMS:
        kernel.kind, kernel.bn = "bn", True
    elif op in ACTIVATIONS:
        kernel.kind, kernel.act = "act", ACTIVATIONS[op]
    elif op in ("softmax", "_softmax", "log_softmax", "_log_softmax"):
        kernel.kind = "softmax"
    return kernel


def _merge_squeeze_excite(walk: _Walk) -> list[Kernel]:
    """Each ``x * f(gap(x))`` of a few small kernels, as one ``se`` kernel."""
    merged: set[int] = set()
    replace: dict[int, Kernel] = {}
    for index, kernel in enumerate(walk.kernels):
        if kernel.kind != "mul" or len(walk.inputs[index]) != 2:
            continue
        big, small = sorted(walk.inputs[index], key=_numel, reverse=True)
        path = _scale_path(walk, small, big)
        if path is None:
            continue
        parts = [walk.kernels[i] for i in path]
        squeeze = next((p for p in parts if p.kind in ("conv", "fc")), None)
        replace[index] = Kernel(
            kind="se", label=parts[0].label, ops=[op for p in parts for op in p.ops] + kernel.ops,
            cin=kernel.cout, cout=kernel.cout, groups=squeeze.cout if squeeze else 1,
            h=kernel.ho, w=kernel.wo, ho=kernel.ho, wo=kernel.wo,
            macs=sum(p.macs for p in parts), params=sum(p.params for p in parts),
            in_elems=_numel(big), out_elems=kernel.out_elems, io_elems=_numel(big) + kernel.out_elems,
            act=next((p.act for p in reversed(parts) if p.act != "none"), "none"))
        merged.update(path)
    return [replace.get(i, k) for i, k in enumerate(walk.kernels) if i not in merged]


def _scale_path(walk: _Walk, small, big) -> list[int] | None:
    """The kernels from a global pool of ``big`` to ``small`` (first the pool), or None."""
    path, node = [], small
    for _ in range(_SE_PATH):
        index = walk.owner.get(node.name)
        if index is None or walk.tails[index] is not node or len(walk.inputs[index]) != 1:
            return None
        path.insert(0, index)
        if walk.kernels[index].kind == "gap":
            return path if walk.inputs[index][0] is big else None
        node = walk.inputs[index][0]
    return None


# -- the graph's values -------------------------------------------------------------------------

def _opname(node) -> str:
    """``aten.conv2d.default`` -> ``conv2d``; ``operator.getitem`` -> ``getitem``."""
    target = node.target
    name = getattr(target, "__name__", str(target))
    parts = str(target).split(".")
    return parts[1] if len(parts) >= 3 and parts[0] == "aten" else name.split(".")[0]


def _is_node(value) -> bool:
    return hasattr(value, "op") and hasattr(value, "meta")


def _flat(args) -> list:
    out = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out += _flat(a)
        else:
            out.append(a)
    return out


def _value(node):
    value = node.meta.get("val")
    return value[0] if isinstance(value, (list, tuple)) and value else value


def _shape(node) -> tuple[int, ...]:
    value = _value(node) if _is_node(node) else None
    return tuple(int(d) for d in getattr(value, "shape", ()))


def _numel(node) -> int:
    shape = _shape(node)
    total = 1
    for d in shape:
        total *= d
    return total if shape else 0


def _nchw(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """Batch, channels, height, width of a tensor shape (flat tensors: height and width 1)."""
    if len(shape) == 4:
        return shape
    if len(shape) == 3:
        return (shape[0], shape[1], shape[2], 1)
    if len(shape) == 2:
        return (shape[0], shape[1], 1, 1)
    return (1, shape[0] if shape else 1, 1, 1)


def _const_elems(node, const: set[str]) -> int:
    return sum(_numel(a) for a in _flat(node.args) if _is_node(a) and a.name in const)


def _label(node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    return list(stack.values())[-1][0] if stack else node.name
