"""What a robustness suite evaluates: a zoo model (with weights, binarized or quantized) and where."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from aiot.converters.api import RANDOM_INIT_SEED, build_source_model
from aiot.converters.naming import artifact_stem
from aiot.core.errors import UsageError
from aiot.host.engine.weights import GIVEN, RANDOM, weights_provenance
from aiot.models.model_ref import resolve_model
from aiot.models.quant.methods import parse_quantize


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
        quantize: RobustMQ ``method:bits`` (``lsq:4``) the model is fake-quantized with in
            PyTorch (``aiot train --quantize``); its weights are those of the quantized model.
    """

    model: str
    weights: Path | None = None
    binarize: str | None = None
    fmt: str | None = None
    device: str = "local"
    options: dict = field(default_factory=dict)
    threads: int = 1
    weights_origin: str | None = None
    quantize: str | None = None

    @property
    def label(self) -> str:
        """``model[.alg]`` as artifacts are named (``tiny_vgg.bnn``, ``tiny_cnn.lsq4``)."""
        return artifact_stem(self.model, self.binarize, self.quantize)

    @property
    def zoo_name(self) -> str:
        """What ``--model`` takes for it (``tiny_cnn_lsq4``), as conversion resolves it."""
        return f"{self.model}_{self.quantize.replace(':', '')}" if self.quantize else self.model

    def quantization(self) -> dict | None:
        """``{"method": "lsq", "bits": 4}`` for a quantized model (tables group by it), else None."""
        if not self.quantize:
            return None
        chosen = parse_quantize(self.quantize)
        return {"method": chosen.method, "bits": chosen.bits}

    def to_dict(self) -> dict:
        return {"model": self.model, "weights": str(self.weights) if self.weights else None,
                "binarize": self.binarize, "quantization": self.quantization(),
                "format": self.fmt, "device": self.device,
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
    if target.quantize:  # fake-quantized, as conversion builds it (its straight-through
        # estimators let gradient attacks through the rounding)
        from aiot.converters.qdq import build_quantized_source

        ref = resolve_model(target.zoo_name, quantized_ok=True)
        spec, model = build_quantized_source(ref, target.weights, RANDOM_INIT_SEED)
        return spec, model.eval()
    spec, model = build_source_model(target.model, target.weights, target.binarize)
    return spec, model.eval()
