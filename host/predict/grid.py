"""What ``aiot predict collect`` measures: kernels sampled from the shapes CNNs use, and models.

nn-Meter samples each kernel's configurations where real models put them rather than over a
full grid; so does this, more simply: a resolution is drawn first, then channels from the range
CNNs use at that resolution (log-uniform, in multiples of 8), then a kernel size, stride and
activation with the frequencies CNNs have. The draw is seeded, so the same command measures the
same kernels (and resumes); a kernel whose work is over :data:`MAX_MACS` is drawn again.
"""

from __future__ import annotations

import math
import random

import aiot.models as zoo
from aiot.host.predict.blocks import name_of

#: Resolution -> the channels CNNs use there (from the zoo: 3-channel stems at 224, 2048 at 7).
#: 2: the last stage of the CIFAR and Fashion-MNIST variants (RegNetX's grouped convolutions).
#: The low ends are those of small networks (16-64 channels at 14 to 2 pixels): tiny_cnn's
#: 16→32 conv at 14x14 lay below a low end of 32, extrapolated (tiny_cnn was +58 % to +83 %).
LEVELS = {224: (3, 48), 112: (8, 144), 56: (8, 256), 32: (8, 320), 28: (8, 512),
          16: (16, 640), 14: (16, 1024), 8: (16, 1024), 7: (16, 1280), 4: (32, 2048),
          2: (32, 2048)}
#: The resolutions models take images at (ImageNet, CIFAR, Fashion-MNIST): where stems are drawn.
STEMS = (224, 32, 28)
#: Each kind's share of the kernels drawn (blocks of several kernels teach how kernels add up).
#: Grouped convolutions run on two code paths (ONNX Runtime: blocked where a group's channels
#: fill its SIMD block, plain otherwise), each learned apart: they get the samples of two kinds.
SHARES = {"conv": 0.30, "gconv": 0.10, "pw": 0.10, "dw": 0.14, "maxpool": 0.03, "avgpool": 0.03,
          "gap": 0.03, "fc": 0.04, "add": 0.06, "concat": 0.04, "bn": 0.04, "se": 0.03, "res": 0.02,
          "mb": 0.02, "stack": 0.02}
#: A stack's channels, resolutions and lengths: 3x3 convolutions of 2.4 to 38 MB of weights
#: each, 2 to 8 in a row, at the small resolutions where weights outweigh the work on them.
STACK_CHANNELS, STACK_RESOLUTIONS, STACK_LENGTHS = (256, 384, 512, 768, 1024), (2, 4, 7), range(2, 9)
#: The widths of a grouped convolution's groups (channels per group) that CNNs use: ResNeXt's
#: 4 to RegNet's 8-64 (RegNetX-600MF: 24).
GROUP_WIDTHS = (4, 8, 16, 24, 32, 48, 64)
#: A kernel over this many MACs is drawn again (it would take seconds per inference on a phone).
MAX_MACS = 1.2e9
_ACTS = (("relu", 0.5), ("relu6", 0.15), ("hswish", 0.1), ("none", 0.25))


def sample_kernels(count: int, seed: int = 0) -> list[str]:
    """``count`` distinct kernel factory names (:mod:`aiot.host.predict.blocks`), drawn with
    ``seed``; each kind gets its :data:`SHARES` of them (at least one each where ``count``
    allows)."""
    rng = random.Random(seed)
    kinds = _allotment(count)
    names: list[str] = []
    for kind, wanted in kinds.items():
        drawn, tries = 0, 0
        while drawn < wanted and tries < wanted * 50:
            tries += 1
            name = _draw(rng, kind)
            if name not in names:
                names.append(name)
                drawn += 1
    return names


def _allotment(count: int) -> dict[str, int]:
    """Kernels per kind: their shares of ``count`` (largest remainders), one each first."""
    kinds = list(SHARES)
    if count < len(kinds):  # fewer kernels than kinds: one each of the largest shares
        return {k: 1 for k in sorted(kinds, key=lambda k: -SHARES[k])[:count]}
    base = dict.fromkeys(kinds, 1)
    left = count - len(kinds)
    raw = {k: SHARES[k] * left for k in kinds}
    out = {k: base[k] + int(raw[k]) for k in kinds}
    for k in sorted(kinds, key=lambda k: -(raw[k] - int(raw[k])))[:count - sum(out.values())]:
        out[k] += 1
    return out


def _draw(rng: random.Random, kind: str) -> str:
    """One configuration of ``kind`` (:data:`MAX_MACS` at most)."""
    while True:
        r = rng.choice(list(LEVELS))
        c = _channels(rng, r, stem=kind in ("conv", "pw"))
        act = rng.choices([a for a, _ in _ACTS], [w for _, w in _ACTS])[0]
        s = 2 if rng.random() < 0.25 and r > 4 else 1
        if kind in ("conv", "pw"):
            k = 1 if kind == "pw" else rng.choices((1, 3, 5, 7), (0.2, 0.65, 0.1, 0.05))[0]
            out = _round8(c * math.exp(rng.uniform(math.log(0.25), math.log(4))), *LEVELS[r])
            name, macs = name_of("conv", act, c=c, o=out, k=k, s=s, r=r), c * out * k * k * (r // s) ** 2
        elif kind == "gconv":  # channels to channels in groups of a width (RegNet 24, ResNeXt 4)
            width = rng.choice(GROUP_WIDTHS)
            c = max(2, round(c / width)) * width
            name = name_of("gconv", act, c=c, g=c // width, k=3, s=s, r=r)
            macs = c * width * 9 * (r // s) ** 2
        elif kind == "dw":
            k = rng.choices((3, 5, 7), (0.7, 0.2, 0.1))[0]
            name, macs = name_of("dw", act, c=c, k=k, s=s, r=r), c * k * k * (r // s) ** 2
        elif kind in ("maxpool", "avgpool"):
            k = rng.choice((2, 3))
            name, macs = name_of(kind, c=c, k=k, s=2 if r > 4 and rng.random() < 0.8 else 1, r=r), 0
        elif kind == "fc":
            i, o = (int(math.exp(rng.uniform(math.log(16), math.log(b)))) for b in (8192, 2048))
            name, macs = name_of("fc", rng.choice(("none", "relu")), i=i, o=max(o, 2)), i * o
        elif kind in ("gap", "se"):
            name, macs = name_of(kind, c=c, r=r), c * c // 2
        elif kind in ("add", "bn"):
            name, macs = name_of(kind, rng.choice(("none", "relu")), c=c, r=r), 0
        elif kind == "concat":
            name, macs = name_of("concat", c=c, e=_channels(rng, r), r=r), 0
        elif kind == "stack":
            c, r, n = (rng.choice(STACK_CHANNELS), rng.choice(STACK_RESOLUTIONS),
                       rng.choice(STACK_LENGTHS))
            name, macs = name_of("stack", c=c, n=n, r=r), n * 9 * c * c * r * r
        elif kind == "res":
            out = _round8(c * rng.choice((1, 2)), *LEVELS[r])
            name, macs = name_of("res", c=c, o=out, s=s, r=r), 18 * c * out * (r // s) ** 2
        else:
            out = _round8(c * rng.choice((1, 1.5, 2)), 8, 512)
            expand = rng.choice((3, 6))
            name, macs = (name_of("mb", c=min(c, 320), o=out, e=expand, k=3, s=s, r=r),
                          min(c, 320) * expand * (min(c, 320) + out) * r * r)
        if macs <= MAX_MACS:
            return name


def _channels(rng: random.Random, r: int, stem: bool = False) -> int:
    low, high = LEVELS[r]
    if stem and r in STEMS and rng.random() < 0.25:
        return rng.choice((1, 3))  # a first layer: a grayscale or RGB image
    return _round8(math.exp(rng.uniform(math.log(max(low, 8)), math.log(high))), low, high)


def _round8(value: float, low: int, high: int) -> int:
    return int(min(max(8 * round(value / 8), max(8, low)), high))


def default_models() -> list[str]:
    """The zoo's full-precision models (the test nets but ``tiny_cnn`` left out)."""
    return [s.name for s in zoo.model_specs() if s.variant != "test"] + ["tiny_cnn"]
