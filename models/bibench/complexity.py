"""BiBench's theoretical-complexity track: compression r_c, speedup r_s and OM_comp.

BiBench (Sec. 3.2, eq. 7-8) compares a full-precision model M with its binarized twin::

    r_c = |M| / ( (|M| - |M^|)/32 + |M^| )
    r_s = FLOPs_M / ( (FLOPs_M - FLOPs_M^)/64 + FLOPs_M^ )
    OM_comp = sqrt( (E^2(r_c) + E^2(r_s)) / 2 )      E = mean over the evaluated architectures

A 1-bit parameter takes 1/32 of a float's storage and a 1-bit x 1-bit multiply-accumulate
about 1/64 of a float one (64-bit popcount words). How we read the terms:

* ``|M|`` / ``FLOPs_M``: parameters and MACs of the full-precision model
  (:func:`aiot.models.count_complexity`; its MAC convention, BatchNorm and additions cost 0).
* ``|M| - |M^|`` is read as the *weights of the binarized layers* (and only their weights):
  ``binary_params``, counted at 1/32 each. ``|M^|`` (``binarized_fp_params``) is everything
  else the binarized model keeps at inference: the first conv and last FC (kept in full
  precision by BiBench's rule), BatchNorm affine parameters, biases, any other float
  parameter, and each binarized layer's ``scale_params()`` (weight scales, ReActNet's
  thresholds, XNOR++'s Gamma factors). Training-only parts (FDA's noise-adaptation
  modules) are not counted.
* ``FLOPs_M - FLOPs_M^`` is the binary MACs of the binarized layers (``binary_macs``, 1/64
  each); ``FLOPs_M^`` (``binarized_fp_macs``) is the MACs of the layers left in full
  precision plus each binarized layer's ``extra_fp_ops()``: weight-scale multiplies, XNOR's
  activation re-scaling, ReActNet's threshold subtraction.

Scale factors, thresholds and activation re-scaling therefore count as full precision, which
is why the algorithms differ slightly, as BiBench's Table 3 discussion says ("BNN does not
use any factors and has the highest compression"; re-scaling and mean-shifting cost speed).

Against the paper: Table 3's theoretical complexity is for ResNet-18 on ImageNet (224 px,
1000 classes: BNN's r_c = 13.27 is 11.69 M parameters with a float 7x7 stem and 512x1000
classifier, and the channel-wise algorithms' 13.20 fits 4,736 more floats, one per output
channel of the 19 binarized convs). For the zoo's ``resnet18`` our r_c and r_s are
within 2 % of Table 3 for every algorithm, and Bi-Real, ReCU and FDA match to the printed
digits (``tests/unit/test_bibench_complexity.py`` prints both). The paper's exact per-operator
accounting is not published; where ours differs it is by choice:

* DoReFa keeps one scale per layer (DoReFa's definition; Table 6 "statistics by layer"), so
  its r_c equals BNN's; the paper's 13.20 counts it per channel like Bi-Real;
* ReActNet's per-input-channel thresholds are stored floats here (paper: r_c as Bi-Real);
* XNOR-Net's activation re-scaling costs the |a| channel mean, the k x k box filter and two
  multiplies per output (r_s 12.05 vs 12.26); XNOR++'s Gamma is one constant multiply per
  output (r_s as Bi-Real, 12.37 vs 12.26);
* BNN's r_s is 12.51 vs 12.60: we count no scale multiply for it, and the paper's figure
  implies about 1 M fewer float MACs still, for a reason it does not give.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from aiot.models.bibench.algorithms import get_algorithm
from aiot.models.bibench.base import BinarizedLayer
from aiot.models.bibench.binarize import binarize
from aiot.models.complexity import Complexity, conv2d_macs, count_complexity, linear_macs

#: Storage of one full-precision number, bytes.
FLOAT_BYTES = 4


@dataclass(frozen=True)
class BinarizedCount:
    """What a binarized model keeps and computes at inference, for one image.

    Args:
        binary_params: 1-bit weights of the binarized layers.
        fp_params: every other inference parameter, scale factors included.
        binary_macs: 1-bit x 1-bit MACs of the binarized layers.
        fp_macs: full-precision MACs (unbinarized layers plus the binarized layers' extras).
    """

    binary_params: int
    fp_params: int
    binary_macs: int
    fp_macs: int


@dataclass(frozen=True)
class BinarizedComplexity:
    """One model binarized with one algorithm, next to its full-precision self.

    Args:
        model: zoo name (or any label).
        algorithm: canonical algorithm name.
        fp_params: |M|, parameters of the full-precision model.
        fp_macs: FLOPs_M, its MACs per image.
        binary_params: 1-bit weights of the binarized model.
        binarized_fp_params: |M^|, full-precision parameters of the binarized model.
        binary_macs: 1-bit MACs of the binarized model.
        binarized_fp_macs: FLOPs_M^, its full-precision MACs.
    """

    model: str
    algorithm: str
    fp_params: int
    fp_macs: int
    binary_params: int
    binarized_fp_params: int
    binary_macs: int
    binarized_fp_macs: int

    @property
    def r_c(self) -> float:
        """Compression ratio, BiBench eq. 7."""
        return self.fp_params / (self.binary_params / 32 + self.binarized_fp_params)

    @property
    def r_s(self) -> float:
        """Speedup ratio, BiBench eq. 7 (second line)."""
        return self.fp_macs / (self.binary_macs / 64 + self.binarized_fp_macs)

    @property
    def fp_storage_bytes(self) -> int:
        """Storage of the full-precision model's parameters (float32)."""
        return self.fp_params * FLOAT_BYTES

    @property
    def storage_bytes(self) -> float:
        """Storage of the binarized model's parameters: 1 bit per binary weight, float32 else."""
        return self.binary_params / 8 + self.binarized_fp_params * FLOAT_BYTES

    def to_dict(self) -> dict:
        """JSON-able counts and ratios."""
        return {"model": self.model, "algorithm": self.algorithm, "fp_params": self.fp_params,
                "fp_macs": self.fp_macs, "binary_params": self.binary_params,
                "binarized_fp_params": self.binarized_fp_params, "binary_macs": self.binary_macs,
                "binarized_fp_macs": self.binarized_fp_macs, "r_c": self.r_c, "r_s": self.r_s,
                "fp_storage_bytes": self.fp_storage_bytes, "storage_bytes": self.storage_bytes}


def count_binarized(model: nn.Module, input_shape: tuple[int, ...]) -> BinarizedCount:
    """Count a binarized model's 1-bit and full-precision parameters and MACs.

    One forward pass (batch 1, eval mode, no grad, through :func:`count_complexity`) with
    extra hooks on the :class:`BinarizedLayer` modules, which give each layer's input and
    output shapes for its ``extra_fp_ops``.

    Args:
        model: a model after :func:`aiot.models.bibench.binarize`.
        input_shape: input shape with a batch of 1, e.g. ``(1, 3, 224, 224)``.
    """
    layers = [m for m in model.modules() if isinstance(m, BinarizedLayer)]
    total_macs, binary_macs, extra_macs = _hooked_macs(model, layers, input_shape)
    return BinarizedCount(
        binary_params=sum(layer.weight.numel() for layer in layers),
        fp_params=_fp_params(model, layers),
        binary_macs=binary_macs,
        fp_macs=total_macs - binary_macs + extra_macs,
    )


def _fp_params(model: nn.Module, layers: list[BinarizedLayer]) -> int:
    """Parameters outside binarized layers, plus each binarized layer's bias and scale_params().

    A binarized layer's other parameters are either its scale factors (already in
    ``scale_params()``) or training-only (FDA's noise modules), so they are not added again.
    """
    inside = {id(p) for layer in layers for p in layer.parameters()}
    outside = sum(p.numel() for p in model.parameters() if id(p) not in inside)
    kept = sum((0 if layer.bias is None else layer.bias.numel()) + layer.scale_params()
               for layer in layers)
    return outside + kept


def _hooked_macs(model: nn.Module, layers: list[BinarizedLayer],
                 input_shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(all conv/linear MACs, binary MACs, extra FP MACs) from one hooked forward pass."""
    if int(input_shape[0]) != 1:
        raise ValueError(f"count with a batch of 1, got input shape {tuple(input_shape)}")
    binary, extra = [0], [0]

    def hook(layer, inputs: tuple, output: torch.Tensor) -> None:
        macs = conv2d_macs if isinstance(layer, nn.Conv2d) else linear_macs
        binary[0] += macs(layer, output)
        extra[0] += layer.extra_fp_ops(tuple(inputs[0].shape[1:]), tuple(output.shape[1:]))

    handles = [layer.register_forward_hook(hook) for layer in layers]
    try:
        total = count_complexity(model, tuple(input_shape)).macs
    finally:
        for handle in handles:
            handle.remove()
    return total, binary[0], extra[0]


def module_complexity(model: nn.Module, algorithm: str, input_shape: tuple[int, ...],
                      name: str | None = None, fp: Complexity | None = None) -> BinarizedComplexity:
    """r_c and r_s of ``model`` binarized with ``algorithm``; ``model`` is binarized in place.

    Args:
        model: a full-precision model (it is modified: pass a fresh one).
        algorithm: algorithm name or alias.
        input_shape: input shape with a batch of 1.
        name: label for the result (default: the class name).
        fp: the full-precision counts if already known (counted from ``model`` otherwise).
    """
    fp = fp or count_complexity(model, tuple(input_shape))
    algo = get_algorithm(algorithm)
    binarize(model, algo.name, tuple(input_shape))
    model.eval()
    counts = count_binarized(model, tuple(input_shape))
    return BinarizedComplexity(
        model=name or type(model).__name__, algorithm=algo.name, fp_params=fp.params,
        fp_macs=fp.macs, binary_params=counts.binary_params,
        binarized_fp_params=counts.fp_params, binary_macs=counts.binary_macs,
        binarized_fp_macs=counts.fp_macs,
    )


def binarized_complexity(spec, algorithm: str) -> BinarizedComplexity:
    """r_c and r_s of a zoo model binarized with ``algorithm`` (BiBench eq. 7).

    Args:
        spec: a :class:`aiot.models.ModelSpec` (its input size sets the MACs).
        algorithm: algorithm name or alias.

    Raises:
        UnknownName: unknown algorithm.
        UsageError: the model has nothing to binarize.
    """
    return module_complexity(spec.build(), algorithm, (1, *spec.input.shape), name=spec.name,
                             fp=spec.complexity())


def om_comp(rows: Iterable[BinarizedComplexity]) -> float:
    """BiBench's OM_comp (eq. 8) of one algorithm over the architectures in ``rows``.

    Raises:
        ValueError: no rows, or rows of more than one algorithm (see :func:`om_comp_by_algorithm`).
    """
    rows = list(rows)
    if not rows:
        raise ValueError("om_comp needs at least one architecture")
    if len({r.algorithm for r in rows}) > 1:
        raise ValueError("om_comp is per algorithm; group the rows first (om_comp_by_algorithm)")
    mean_c = sum(r.r_c for r in rows) / len(rows)
    mean_s = sum(r.r_s for r in rows) / len(rows)
    return math.sqrt((mean_c**2 + mean_s**2) / 2)


def om_comp_by_algorithm(rows: Iterable[BinarizedComplexity]) -> dict[str, float]:
    """OM_comp per algorithm, in the order the algorithms first appear in ``rows``."""
    groups: dict[str, list[BinarizedComplexity]] = {}
    for row in rows:
        groups.setdefault(row.algorithm, []).append(row)
    return {algorithm: om_comp(group) for algorithm, group in groups.items()}
