"""aiot.models.bibench: BiBench's eight binarized operators and the tools around them.

One module per algorithm (:mod:`~aiot.models.bibench.bnn`, ``xnor``, ``dorefa``,
``bireal``, ``xnorpp``, ``reactnet``, ``recu``, ``fda``), each a drop-in ``Conv2d`` and
``Linear`` written from the papers (see :mod:`~aiot.models.bibench.base` for the shared
skeleton). Usage::

    from aiot.models import get_model_spec
    from aiot.models.bibench import binarize, freeze, verdicts

    spec = get_model_spec("resnet18_mnist")
    model = binarize(spec.build(), "reactnet", (1, *spec.input.shape))
    ...  # train it
    deployable = freeze(model, "lce")    # BinaryConv2d layers the LCE/daBNN emitters read
"""

from aiot.models.bibench.algorithms import ALGORITHMS, Algorithm, get_algorithm
from aiot.models.bibench.base import BinarizedConv2d, BinarizedLayer, BinarizedLinear
from aiot.models.bibench.binarize import (
    binarizable_layers,
    binarize,
    binarized_layers,
    update_schedules,
)
from aiot.models.bibench.complexity import (
    BinarizedComplexity,
    BinarizedCount,
    binarized_complexity,
    count_binarized,
    module_complexity,
    om_comp,
    om_comp_by_algorithm,
)
from aiot.models.bibench.deployability import LIBRARIES, Verdict, verdict, verdicts
from aiot.models.bibench.freeze import freeze
from aiot.models.spec import load_weights

__all__ = [
    "ALGORITHMS",
    "LIBRARIES",
    "Algorithm",
    "BinarizedComplexity",
    "BinarizedConv2d",
    "BinarizedCount",
    "BinarizedLayer",
    "BinarizedLinear",
    "Verdict",
    "binarizable_layers",
    "binarize",
    "binarized_complexity",
    "binarized_layers",
    "build_binarized",
    "count_binarized",
    "freeze",
    "get_algorithm",
    "module_complexity",
    "om_comp",
    "om_comp_by_algorithm",
    "update_schedules",
    "verdict",
    "verdicts",
]


def build_binarized(spec, algorithm: str | None, weights=None):
    """``spec.build()`` binarized with ``algorithm`` (None: full precision), then ``weights``.

    Without weights, a binarized model's BatchNorms get seeded random statistics and affine
    parameters, as a trained network has: at PyTorch's identity BatchNorm, binary dot products
    are integers, so residual additions produce exact zeros at the next sign's input, a tie
    that no runtime's float arithmetic reproduces (a timing run does not care; a parity check
    would fail on it).

    Args:
        spec: a :class:`aiot.models.ModelSpec`.
        algorithm: algorithm name or None.
        weights: a state_dict file of the (binarized) model, or None for its random init.
    """
    model = spec.build()
    if algorithm:
        binarize(model, algorithm, (1, *spec.input.shape))
        if weights is None:
            _trained_like_batchnorm(model)
    if weights is not None:
        load_weights(model, weights, spec.name)
    model.eval()
    return model


def _trained_like_batchnorm(model, seed: int = 0) -> None:
    import torch
    from torch import nn

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d) and module.affine:
                n = module.num_features
                module.weight.copy_(torch.rand(n, generator=generator) + 0.5)
                module.bias.copy_(torch.randn(n, generator=generator) * 0.1)
                module.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
                module.running_var.copy_(torch.rand(n, generator=generator) + 0.5)
