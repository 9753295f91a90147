"""What a robustness suite evaluates: a zoo model (with weights or binarization) and where."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from aiot.converters.api import build_source_model
from aiot.core.errors import UsageError
from aiot.host.engine.weights import GIVEN, RANDOM, weights_provenance


@dataclass(frozen=True)
class Target:
    """A model to evaluate, as the PyTorch reference and optionally as a deployed artifact.

    Args:
        model: zoo model name.
        weights: state-dict file (``None``: the model's default weights, else a seeded random init).
        binarize: BiBench algorithm the weights belong to (``aiot train --binarize``).
        fmt: artifact format to deploy (``None``: evaluate the PyTorch reference only).
        device: device the artifact runs on (``local``, an inventory name, an emulated device).
        options: converter options (``quant=int8`` ...).
        threads: inference threads on the device.
        weights_origin: where ``weights`` came from (:mod:`aiot.host.engine.weights`: given,
            trained, packaged, random); the record's provenance says it.
    """

    model: str
    weights: Path | None = None
    binarize: str | None = None
    fmt: str | None = None
    device: str = "local"
    options: dict = field(default_factory=dict)
    threads: int = 1
    weights_origin: str | None = None

    @property
    def label(self) -> str:
        """``model[.alg]`` as artifacts are named (``tiny_vgg.bnn``)."""
        return f"{self.model}.{self.binarize}" if self.binarize else self.model

    def to_dict(self) -> dict:
        return {"model": self.model, "weights": str(self.weights) if self.weights else None,
                "binarize": self.binarize, "format": self.fmt, "device": self.device,
                "options": dict(self.options), "threads": self.threads}

    def with_format(self, fmt: str | None, device: str | None = None, options: dict | None = None) -> Target:
        """The same model deployed another way."""
        return replace(self, fmt=fmt, device=device or self.device,
                       options=dict(self.options if options is None else options))

    def weights_provenance(self) -> dict:
        """The record's ``weights``: origin, file name and sha256 (see :mod:`aiot.host.engine.weights`)."""
        origin = self.weights_origin or (GIVEN if self.weights else RANDOM)
        return weights_provenance(self.weights, origin)


def reference_model(target: Target):
    """``(spec, model)``: the eval-mode PyTorch model the target's artifact is converted from.

    The same builder as conversion (:func:`aiot.converters.api.build_source_model`), so the
    reference and the deployed artifact share their weights exactly.
    """
    if target.weights is not None and not Path(target.weights).is_file():
        raise UsageError(f"weights file {target.weights} does not exist",
                         "train one with `aiot train MODEL` or pass an existing --weights file")
    spec, model = build_source_model(target.model, target.weights, target.binarize)
    return spec, model.eval()
