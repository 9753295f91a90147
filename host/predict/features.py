"""A kernel's numbers as a regressor reads them, and the range each kind was collected over.

A kernel's time is about linear in its work and its memory traffic (:func:`counts`: MACs,
also as computed with channels padded to a runtime's register tiles, elements read and
written, weights, a grouped convolution's groups); how efficiently a runtime does that work
depends on the configuration (:func:`vector`: the counts' logs, channels, kernel size, stride,
resolution, activation), which the trees learn. A kernel whose numbers lie outside the range
its kind was collected over is predicted all the same, with a warning: trees do not
extrapolate, and the linear cost only guesses how far a trend runs.
"""

from __future__ import annotations

import math

from aiot.host.predict.decompose import Kernel

#: Kinds the collection measures (``aiot predict collect``), each with a regressor of its own
#: once it has enough samples; any other kind is predicted by the pooled regressor.
COLLECTED_KINDS = ("conv", "gconv", "dw", "fc", "maxpool", "avgpool", "gap", "add", "concat", "bn", "se")
_ACTS = ("none", "relu", "relu6", "hswish")
#: The widths a runtime's matrix kernels may compute channels in, a register tile at a time
#: (XNNPACK's and MLAS's: 8 on NEON, 16 or 32 on AVX-512), so that a convolution of 72 output
#: channels costs what one of 96 does where the tile is 32 (measured here with TFLite: 64→64
#: and 72→72 at 32x32 took 0.74 and 1.24 ms). The linear cost gets the MACs padded to each
#: (:func:`padded_macs`), the trees how much each pads (:func:`padding`), and the fit weighs
#: them: no tile is assumed.
TILES = (8, 16, 32, 64)
#: The columns of :func:`vector` (the trees' features).
NAMES = ("log_macs", "log_in", "log_out", "log_params", "cin", "cout", "k", "stride", "h", "ho",
         "log_groups", "bn", *(f"act_{a}" for a in _ACTS), "act_other",
         *(f"padding_{t}" for t in TILES))
#: What a kernel is checked against its kind's collected range on (a warning each); a grouped
#: convolution's width too (channels per group: RegNet's 24 inside the 4-64 collected, where
#: its 22 groups are a count never collected, and need not be).
RANGED = ("macs", "in_elems", "out_elems", "cin", "cout", "h", "width")
#: What a kernel is checked against its kind's collected values on (a kernel size never
#: collected, an activation, a stride).
CATEGORIES = ("k", "stride", "act")
#: Kinds whose ``k`` is their input's size, not a kernel size of their own: checked on ``h``'s
#: range (a global pool over 4x4 lies inside the 2-224 collected, though 4 was never drawn).
SIZED_BY_INPUT = frozenset({"gap"})
#: The largest SIMD block :func:`alignment` tells apart (64 channels: 512-bit registers of bytes).
ALIGNMENT_CAP = 64
#: Reasons named per kernel (the rest counted).
SHOWN = 2


def vector(kernel: Kernel) -> list[float]:
    """The kernel's features, in the order of :data:`NAMES`: with how much work each of
    :data:`TILES` would waste (padded over actual MACs), so that the trees correct an aligned
    convolution apart from its unaligned neighbours (without it they carried the waste of
    channels near 64 onto ResNet's 64-channel convolutions: +14 % on TFLite here)."""
    acts = [float(kernel.act == a) for a in _ACTS]
    return [math.log1p(kernel.macs), math.log1p(kernel.in_elems), math.log1p(kernel.out_elems),
            math.log1p(kernel.params), float(kernel.cin), float(kernel.cout), float(kernel.k),
            float(kernel.stride), float(kernel.h), float(kernel.ho), math.log(max(kernel.groups, 1)),
            float(kernel.bn), *acts, float(kernel.act not in _ACTS),
            *(padding(kernel, tile) for tile in TILES)]


def counts(kernel: Kernel) -> list[float]:
    """What a kernel's time is linear in: MACs, elements read, elements written, weights, the
    groups of a grouped convolution (a runtime's plain path runs one matrix product per group,
    each paying its own setup: RegNet's 22 groups of 24 channels at 2x2 pixels), and the MACs
    it computes with its channels padded to each of :data:`TILES`."""
    return [float(kernel.macs), float(kernel.in_elems), float(kernel.out_elems), float(kernel.params),
            float(kernel.groups if kernel.kind == "gconv" else 0),
            *(padded_macs(kernel, tile) for tile in TILES)]


def padded_macs(kernel: Kernel, tile: int) -> float:
    """``kernel``'s MACs as computed ``tile`` channels at a time (:func:`padding`)."""
    return kernel.macs * padding(kernel, tile)


def padding(kernel: Kernel, tile: int) -> float:
    """How much more work ``kernel`` does with its :func:`tiled_channels` rounded up to a
    multiple of ``tile`` (1 for a kernel without such channels)."""
    channels = tiled_channels(kernel)
    if not channels:
        return 1.0
    return math.ceil(channels / tile) * tile / channels


def tiled_channels(kernel: Kernel) -> int | None:
    """The channels a runtime computes a tile at a time: a convolution's or a fully connected
    layer's outputs (a grouped convolution's, per group), a depthwise convolution's channels;
    None for the other kinds."""
    if kernel.kind in ("conv", "fc", "dw"):
        return kernel.cout
    if kernel.kind == "gconv":
        return max(kernel.cout // max(kernel.groups, 1), 1)
    return None


def alignment(kernel: Kernel) -> list[float]:
    """How far a kernel's channels fill a runtime's SIMD blocks: log2 of the largest power of two
    (up to :data:`ALIGNMENT_CAP`) dividing its channels in and out, in all and per group. A
    runtime may run a convolution in a blocked layout only when they fill its block (ONNX
    Runtime's NCHWc, 16 channels on AVX-512), and take a slower path otherwise."""
    groups = max(kernel.cin // kernel.width, 1)  # 1 but for a grouped or depthwise convolution
    return [_pow2(value) for value in (kernel.cin, kernel.cout, kernel.width, kernel.cout // groups or 1)]


def path_vector(kernel: Kernel) -> list[float]:
    """:func:`vector` and :func:`alignment`: what a code path's rule reads."""
    return vector(kernel) + alignment(kernel)


def _pow2(value: int) -> float:
    """log2 of the largest power of two, up to :data:`ALIGNMENT_CAP`, dividing ``value``."""
    value, power = max(int(value), 1), 0
    while value % 2 == 0 and 2 ** power < ALIGNMENT_CAP:
        value //= 2
        power += 1
    return float(power)


def pooled_vector(kernel: Kernel) -> list[float]:
    """:func:`vector` and which collected kind it is (all zeros for any other kind)."""
    return vector(kernel) + [float(kernel.kind == kind) for kind in COLLECTED_KINDS]


def coverage(kernels: list[Kernel]) -> dict:
    """Per kind: the range of each :data:`RANGED` number, and the values of each of
    :data:`CATEGORIES` seen."""
    out: dict[str, dict] = {}
    for kernel in kernels:
        kind = out.setdefault(kernel.kind, {"count": 0, "k": [], "stride": [], "act": [],
                                            **{f: [None, None] for f in RANGED}})
        kind["count"] += 1
        for name in RANGED:
            value = getattr(kernel, name)
            low, high = kind[name]
            kind[name] = [value if low is None else min(low, value), value if high is None else max(high, value)]
        for name in CATEGORIES:
            if getattr(kernel, name) not in kind[name]:
                kind[name] = sorted([*kind[name], getattr(kernel, name)])
    return out


def outside(kernel: Kernel, seen: dict) -> str | None:
    """Why ``kernel`` lies outside what its kind was collected over (``seen``: :func:`coverage`),
    or None."""
    kind = seen.get(kernel.kind)
    if kind is None:
        return f"no {kernel.kind} kernel was collected"
    reasons = []
    for name in RANGED:
        if name not in kind:  # a predictor stored before the range was kept
            continue
        low, high = kind[name]
        value = getattr(kernel, name)
        if value < low or value > high:
            reasons.append(f"{name} {_count(value)} outside {_count(low)}–{_count(high)}")
    for name in CATEGORIES:
        if name == "k" and kernel.kind in SIZED_BY_INPUT:
            continue
        if kind.get(name) and getattr(kernel, name) not in kind[name]:
            reasons.append(f"{name} {getattr(kernel, name)} not among {', '.join(map(str, kind[name]))}")
    if len(reasons) > SHOWN:
        reasons = [*reasons[:SHOWN], f"{len(reasons) - SHOWN} more"]
    return "; ".join(reasons) or None


def _count(value: int) -> str:
    """``1.2M``, ``56k``, ``28``."""
    if value >= 1e6:
        return f"{value / 1e6:.3g}M"
    if value >= 1e4:
        return f"{value / 1e3:.3g}k"
    return str(value)
