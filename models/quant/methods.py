"""RobustMQ's quantization methods and bit-widths: names only, no torch.

The CLI parses ``--quantize ALG:BITS`` and zoo names such as ``resnet18_lsq4`` with this
module before any model is built, so it imports nothing heavy; the layers live in one module
per method (:mod:`~aiot.models.quant.dorefa`, ``pact``, ``lsq``), loaded by
:func:`aiot.models.quant.apply.quantize` when a model is quantized.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from aiot.core.errors import UsageError
from aiot.core.registry import Registry

#: The bit-widths of RobustMQ's grid (32, full precision, is the unquantized model).
BITS = (2, 4, 6, 8)


@dataclass(frozen=True)
class Method:
    """One quantization method of RobustMQ.

    Args:
        name: CLI name.
        title: the paper's name for it.
        paper: first author, year.
        module: the module of :mod:`aiot.models.quant` holding its ``Conv2d`` and ``Linear``.
        weights: how weights are quantized, in words.
        activations: how activations are quantized, in words.
    """

    name: str
    title: str
    paper: str
    module: str
    weights: str
    activations: str

    def to_dict(self) -> dict:
        """JSON-able facts."""
        return {"name": self.name, "title": self.title, "paper": self.paper,
                "weights": self.weights, "activations": self.activations}


#: The methods by CLI name; ``METHODS.get(name)`` suggests close names when unknown.
METHODS: Registry[Method] = Registry("quantization method")

for _method, _aliases in (
    (Method("dorefa", "DoReFa-Net", "Zhou et al., 2016", "dorefa",
            "tanh-normalised to [0, 1], 2^b uniform levels mapped to [-1, 1]",
            "clipped to [0, 1], 2^b uniform levels"), ("dorefa-net", "dorefanet")),
    (Method("pact", "PACT", "Choi et al., 2018", "pact",
            "DoReFa's (tanh-normalised)", "clipped to [0, alpha] with a learned alpha per layer"),
     ()),
    (Method("lsq", "LSQ", "Esser et al., 2020", "lsq",
            "learned step per layer, signed grid", "learned step per layer, unsigned after ReLU"),
     ("lsq+",)),
):
    METHODS.add(_method.name, _method, _aliases)


@dataclass(frozen=True)
class Quantization:
    """A method at a bit-width: what ``--quantize lsq:4`` and ``resnet18_lsq4`` name."""

    method: str
    bits: int

    @property
    def suffix(self) -> str:
        """``lsq4``: the zoo-name suffix and the weights-file tag."""
        return f"{self.method}{self.bits}"

    @property
    def option(self) -> str:
        """``lsq:4``: the ``--quantize`` form."""
        return f"{self.method}:{self.bits}"

    def title(self) -> str:
        """``LSQ 4-bit``."""
        return f"{METHODS.get(self.method).title} {self.bits}-bit"


def quantization(method: str, bits: int | str) -> Quantization:
    """A checked :class:`Quantization` (canonical method name).

    Raises:
        UnknownName: unknown method (close names in the hint).
        UsageError: bits not one of :data:`BITS`.
    """
    name = METHODS.canonical(method)
    try:
        width = int(bits)
    except (TypeError, ValueError):
        width = None
    if width not in BITS:
        raise UsageError(f"{bits} bits is not one of RobustMQ's bit-widths",
                         f"use {', '.join(map(str, BITS))} (e.g. --quantize {name}:4)")
    return Quantization(name, width)


def parse_quantize(text: str) -> Quantization:
    """``"lsq:4"`` (or ``"lsq4"``) → ``Quantization("lsq", 4)``.

    Raises:
        UsageError: not ``METHOD:BITS``, or bits outside :data:`BITS`.
        UnknownName: unknown method.
    """
    value = (text or "").strip()
    method, sep, bits = value.partition(":")
    if not sep:
        found = _SUFFIX.match(value)
        if not found:
            raise UsageError(f"--quantize {value or '(empty)'} is not METHOD:BITS",
                             f"e.g. --quantize lsq:4 (methods {', '.join(METHODS.names())}; "
                             f"bits {', '.join(map(str, BITS))})")
        method, bits = found.group(1), found.group(2)
    return quantization(method.strip(), bits.strip())


_SUFFIX = re.compile(r"^([A-Za-z][A-Za-z+-]*?)(\d+)$")


def split_suffix(suffix: str) -> Quantization | None:
    """``"lsq4"`` → ``Quantization("lsq", 4)``; None when ``suffix`` names no method at all
    (``"bnn"``, ``"cifar"``). A known method at a bit-width outside :data:`BITS` is a
    UsageError (``resnet18_lsq3``)."""
    found = _SUFFIX.match(suffix.strip())
    if not found or found.group(1).lower() not in METHODS:
        return None
    return quantization(found.group(1), found.group(2))
