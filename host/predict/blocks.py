"""The kernels and blocks that ``aiot predict collect`` measures, one small PyTorch module each.

Each is exported once as a ``torch.export`` program into aiot's cache, named
``aiot_<version>_<factory>.pt2`` (the version: the start of this file's sha256, so a changed
kernel is another model, never a silent mix), and measured as any program a user brings. The
file stands alone (it imports only PyTorch, on first use): ``aiot run -m blocks.py:<factory>``
measures one kernel as user code.

A factory's name is its configuration: ``<kind>_<letter><number>_..._<activation>``:

- ``conv_c{in}_o{out}_k{kernel}_s{stride}_r{resolution}_{act}``: conv-bn-act (``k1``: pointwise)
- ``gconv_c{channels}_g{groups}_k{kernel}_s{stride}_r{resolution}_{act}``: grouped conv-bn-act,
  channels to channels (RegNet's and ResNeXt's 3x3)
- ``dw_c{channels}_k{kernel}_s{stride}_r{resolution}_{act}``: depthwise conv-bn-act
- ``maxpool_c{channels}_k{kernel}_s{stride}_r{resolution}``, ``avgpool_...``: pooling
- ``gap_c{channels}_r{resolution}``: global average pooling
- ``fc_i{in}_o{out}_{act}``: fully connected
- ``add_c{channels}_r{resolution}_{act}``: residual add (of a tensor of the same size)
- ``concat_c{channels}_e{extra}_r{resolution}``: concatenation along channels
- ``bn_c{channels}_r{resolution}_{act}``: batch norm on its own (DenseNet's pre-activation)
- ``se_c{channels}_r{resolution}``: squeeze-excite (pool, two 1x1 convs, hard sigmoid, scale)
- ``res_c{in}_o{out}_s{stride}_r{resolution}``: a ResNet basic block (several kernels)
- ``mb_c{in}_o{out}_e{expand}_k{kernel}_s{stride}_r{resolution}``: a MobileNetV2 block
- ``stack_c{channels}_n{count}_r{resolution}``: ``count`` 3x3 conv-bn-relu of their own weights
  in a row: weights that outgrow the caches, as a deep network's last stages have them (a
  kernel measured alone finds its weights cached at every inference; one of many does not)

Activations: ``relu``, ``relu6``, ``hswish``, ``none``. Every factory returns
``(module, example_input)``; the input is seeded, so a kernel converts the same every time.
"""

import functools
import re

ACTIVATIONS = ("relu", "relu6", "hswish", "none")
_NAME = re.compile(r"^(?P<kind>[a-z]+)(?P<fields>(?:_[a-z]\d+)+)"
                   r"(?:_(?P<act>relu6|relu|hswish|none))?$")
_FIELD = re.compile(r"_([a-z])(\d+)")
#: Each kind's fields, in name order, and whether it takes an activation.
KINDS = {
    "conv": ("coksr", True), "gconv": ("cgksr", True), "dw": ("cksr", True), "maxpool": ("cksr", False),
    "avgpool": ("cksr", False), "gap": ("cr", False), "fc": ("io", True),
    "add": ("cr", True), "concat": ("cer", False), "bn": ("cr", True), "se": ("cr", False),
    "res": ("cosr", False), "mb": ("coeksr", False), "stack": ("cnr", False),
}


def parse(name: str) -> tuple[str, dict[str, int], str | None]:
    """``(kind, fields, activation)`` of a factory name.

    Raises:
        ValueError: not a name of this grammar (see the module docstring).
    """
    found = _NAME.match(name)
    if not found or found["kind"] not in KINDS:
        raise ValueError(f"{name!r} is not a kernel name")
    letters, has_act = KINDS[found["kind"]]
    fields = {k: int(v) for k, v in _FIELD.findall(found["fields"])}
    if "".join(fields) != letters or has_act != (found["act"] is not None) or not all(fields.values()):
        raise ValueError(f"{name!r}: a {found['kind']} kernel is named {_pattern(found['kind'])}")
    return found["kind"], fields, found["act"]


def _pattern(kind: str) -> str:
    letters, has_act = KINDS[kind]
    return kind + "".join(f"_{c}N" for c in letters) + ("_ACT" if has_act else "")


def name_of(kind: str, act: str | None = None, **fields: int) -> str:
    """The factory name of a configuration (the inverse of :func:`parse`)."""
    letters, has_act = KINDS[kind]
    text = kind + "".join(f"_{c}{int(fields[c])}" for c in letters)
    return text + (f"_{act or 'none'}" if has_act else "")


@functools.cache
def _torch():
    """PyTorch and the blocks' classes, made on first use: naming a kernel needs no PyTorch."""
    import types

    import torch
    from torch import nn
    from torch.nn import functional as F  # noqa: N812 - PyTorch's own spelling

    acts = {"relu": nn.ReLU, "relu6": nn.ReLU6, "hswish": nn.Hardswish, "none": nn.Identity}

    def conv_bn(cin, cout, k, stride, groups=1, act="none"):
        return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                             nn.BatchNorm2d(cout), acts[act]())

    class Add(nn.Module):
        """``x + y`` with ``y`` a tensor of x's size (a residual add's memory traffic)."""

        def __init__(self, c, r, act):
            super().__init__()
            self.other = nn.Parameter(torch.randn(1, c, r, r))
            self.act = acts[act]()

        def forward(self, x):
            return self.act(x + self.other)

    class Concat(nn.Module):
        """``cat([x, y])`` along channels, ``y`` a tensor of x's height and width."""

        aiot_fixed_batch = True  # y has batch 1: aiot's parity check runs it one row at a time

        def __init__(self, extra, r):
            super().__init__()
            self.other = nn.Parameter(torch.randn(1, extra, r, r))

        def forward(self, x):
            return torch.cat([x, self.other], 1)

    class SqueezeExcite(nn.Module):
        """MobileNetV3's: pool, 1x1 conv (c/4), ReLU, 1x1 conv, hard sigmoid, scale."""

        def __init__(self, c):
            super().__init__()
            mid = max(8, c // 4)
            self.fc1, self.fc2 = nn.Conv2d(c, mid, 1), nn.Conv2d(mid, c, 1)

        def forward(self, x):
            scale = F.adaptive_avg_pool2d(x, 1)
            return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(scale))))

    class Residual(nn.Module):
        """ResNet's basic block: two 3x3 conv-bn, a projection where the shape changes, add, ReLU."""

        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn.Sequential(conv_bn(cin, cout, 3, stride, act="relu"), conv_bn(cout, cout, 3, 1))
            self.skip = conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()

        def forward(self, x):
            return F.relu(self.body(x) + self.skip(x))

    class Inverted(nn.Module):
        """MobileNetV2's block: 1x1 expand, depthwise, 1x1 project (ReLU6), add where shapes match."""

        def __init__(self, cin, cout, expand, k, stride):
            super().__init__()
            mid = cin * expand
            self.body = nn.Sequential(conv_bn(cin, mid, 1, 1, act="relu6"),
                                      conv_bn(mid, mid, k, stride, groups=mid, act="relu6"),
                                      conv_bn(mid, cout, 1, 1))
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            y = self.body(x)
            return x + y if self.residual else y

    return types.SimpleNamespace(torch=torch, nn=nn, acts=acts, conv_bn=conv_bn, Add=Add,
                                 Concat=Concat, SqueezeExcite=SqueezeExcite, Residual=Residual,
                                 Inverted=Inverted)


def _module(kind: str, f: dict[str, int], act: str | None):
    t = _torch()
    nn = t.nn
    if kind == "conv":
        return t.conv_bn(f["c"], f["o"], f["k"], f["s"], act=act)
    if kind == "gconv":
        return t.conv_bn(f["c"], f["c"], f["k"], f["s"], groups=f["g"], act=act)
    if kind == "dw":
        return t.conv_bn(f["c"], f["c"], f["k"], f["s"], groups=f["c"], act=act)
    if kind in ("maxpool", "avgpool"):
        pool = nn.MaxPool2d if kind == "maxpool" else nn.AvgPool2d
        return pool(f["k"], f["s"], (f["k"] - 1) // 2)
    if kind == "gap":
        return nn.AdaptiveAvgPool2d(1)
    if kind == "fc":
        return nn.Sequential(nn.Linear(f["i"], f["o"]), t.acts[act]())
    if kind == "add":
        return t.Add(f["c"], f["r"], act)
    if kind == "concat":
        return t.Concat(f["e"], f["r"])
    if kind == "bn":
        return nn.Sequential(nn.BatchNorm2d(f["c"]), t.acts[act]())
    if kind == "se":
        return t.SqueezeExcite(f["c"])
    if kind == "res":
        return t.Residual(f["c"], f["o"], f["s"])
    if kind == "stack":
        return nn.Sequential(*(t.conv_bn(f["c"], f["c"], 3, 1, act="relu") for _ in range(f["n"])))
    return t.Inverted(f["c"], f["o"], f["e"], f["k"], f["s"])


def example_shape(name: str) -> tuple[int, ...]:
    """The input shape a kernel is measured at (batch 1)."""
    kind, f, _act = parse(name)
    return (1, f["i"]) if kind == "fc" else (1, f["c"], f["r"], f["r"])


def build(name: str):
    """``(module in eval mode, example input)`` of the factory ``name``."""
    kind, fields, act = parse(name)
    module = _module(kind, fields, act).eval()
    torch = _torch().torch
    generator = torch.Generator().manual_seed(0)
    return module, torch.randn(*example_shape(name), generator=generator)


def __getattr__(name: str):
    """Every well-formed kernel name is a factory of this module (``getattr(module, name)``)."""
    try:
        parse(name)
    except ValueError:
        raise AttributeError(name) from None
    return lambda: build(name)
