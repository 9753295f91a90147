"""``binarize(model, algorithm)``: swap a model's layers for an algorithm's binarized ones.

BiBench's rule: every ``Conv2d`` and ``Linear`` is binarized except the first and the last
(in registration order, which for the zoo's models is execution order: the stem conv and
the classifier). Weights are copied, so binarizing a trained full-precision model is the
start of BiBench's fine-tuning.

Activations: ``sign(relu(x))`` is +1 everywhere (sign(0) = +1), so a ReLU that feeds a
binarized layer would make it see a constant input. Such ReLU/ReLU6 modules become
``Hardtanh`` (the activation of BNN and of BiBench's binarized backbones); ReLUs that only
feed full-precision layers (e.g. the one before the classifier) are kept.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

from aiot.core.errors import UsageError
from aiot.models.bibench.algorithms import get_algorithm
from aiot.models.bibench.base import BinarizedLayer

log = logging.getLogger(__name__)

# Layers through which a tensor's sign pattern still reaches the next layer unchanged in kind.
_TRANSPARENT = (nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.Identity, nn.Dropout,
                nn.Flatten)


def binarizable_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """``(name, module)`` of every Conv2d/Linear that BiBench's rule would binarize."""
    candidates = [(name, m) for name, m in model.named_modules()
                  if isinstance(m, (nn.Conv2d, nn.Linear)) and not isinstance(m, BinarizedLayer)]
    return candidates[1:-1]


def binarize(model: nn.Module, algorithm: str, input_shape: tuple[int, ...] | None = None) -> nn.Module:
    """Binarize ``model`` in place with ``algorithm`` and return it.

    Args:
        model: a full-precision model (trained or not).
        algorithm: ``bnn``, ``xnor``, ``dorefa``, ``bireal``, ``xnorpp``, ``reactnet``,
            ``recu`` or ``fda`` (aliases such as ``bi-real`` or ``xnor++`` accepted).
        input_shape: full input shape with batch, e.g. ``(1, 1, 28, 28)``; needed by
            algorithms whose factors are sized by the output (XNOR++), which get one probe pass.

    Raises:
        UnknownName: unknown algorithm (with close names).
        UsageError: the model has nothing to binarize, or XNOR++ without ``input_shape``.
    """
    algo = get_algorithm(algorithm)
    targets = binarizable_layers(model)
    if not targets:
        raise UsageError(f"{type(model).__name__} has no layer to binarize: BiBench keeps the first "
                         "and last Conv2d/Linear in full precision and it has no others",
                         "pick a model with at least three conv/linear layers")
    feeding = _activations_feeding(model, {name for name, _ in targets})
    for name, module in targets:
        cls = algo.conv if isinstance(module, nn.Conv2d) else algo.linear
        replace_module(model, name, cls.from_float(_as_plain_conv(module)))
    for name in feeding:
        replace_module(model, name, nn.Hardtanh())
    model.binarized_with = algo.name
    if any(getattr(m, "needs_probe", False) for m in model.modules()):
        _probe(model, algo.name, input_shape)
    log.debug("binarized %d layers with %s; %d activations became Hardtanh", len(targets),
              algo.name, len(feeding))
    return model


def binarized_layers(model: nn.Module) -> list[tuple[str, BinarizedLayer]]:
    """The model's binarized layers, ``(name, module)`` in registration order."""
    return [(n, m) for n, m in model.named_modules() if isinstance(m, BinarizedLayer)]


def update_schedules(model: nn.Module, epoch: int, max_epochs: int) -> None:
    """Call every binarized layer's per-epoch schedule (ReCU's tau, FDA's terms)."""
    for _, layer in binarized_layers(model):
        layer.update(epoch, max_epochs)


def _as_plain_conv(module: nn.Module) -> nn.Module:
    """aiot's BinaryConv2d keeps its padding aside; give from_float a conv with it in place."""
    padding = getattr(module, "binary_padding", None)
    if padding is None:
        return module
    conv = nn.Conv2d(module.in_channels, module.out_channels, module.kernel_size, module.stride,
                     padding, module.dilation, module.groups, bias=module.bias is not None)
    conv.load_state_dict({k: v for k, v in module.state_dict().items() if k in ("weight", "bias")})
    return conv


def replace_module(model: nn.Module, name: str, new: nn.Module) -> None:
    """Put ``new`` where the submodule called ``name`` (dotted) is."""
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)


def _activations_feeding(model: nn.Module, binarized: set[str]) -> list[str]:
    """Names of ReLU/ReLU6 modules whose output reaches a layer in ``binarized``.

    Traced with torch.fx; "reaches" looks through pooling, identity, dropout and flatten.
    A model fx cannot trace gets every ReLU/ReLU6 replaced (logged).
    """
    import torch.fx

    activations = {n for n, m in model.named_modules() if type(m) in (nn.ReLU, nn.ReLU6)}
    if not activations:
        return []
    try:
        graph = torch.fx.symbolic_trace(model).graph
    except Exception as exc:  # noqa: BLE001 - any trace failure means: be conservative
        log.info("cannot trace %s (%s); every ReLU becomes Hardtanh", type(model).__name__, exc)
        return sorted(activations)
    modules = dict(model.named_modules())
    feeding: set[str] = set()
    for node in graph.nodes:
        if node.op == "call_module" and node.target in activations and _reaches(node, binarized, modules):
            feeding.add(node.target)
    return sorted(feeding)


def _reaches(node, binarized: set[str], modules: dict[str, nn.Module]) -> bool:
    stack, seen = list(node.users), set()
    while stack:
        user = stack.pop()
        if user in seen:
            continue
        seen.add(user)
        if user.op == "call_module":
            if user.target in binarized:
                return True
            if isinstance(modules.get(user.target), _TRANSPARENT):
                stack.extend(user.users)
        elif user.op in ("call_function", "call_method") and _is_reshape(user):
            stack.extend(user.users)
    return False


def _is_reshape(node) -> bool:
    name = getattr(node.target, "__name__", str(node.target))
    return name in ("flatten", "view", "reshape", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d")


def _probe(model: nn.Module, algorithm: str, input_shape: tuple[int, ...] | None) -> None:
    if input_shape is None:
        raise UsageError(f"{algorithm} sizes its scale factors by each layer's output, so "
                         "binarize() needs the model's input shape", "pass input_shape=(1, C, H, W)")
    was_training = model.training
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    model.eval()
    with torch.no_grad():
        model(torch.zeros((1, *tuple(input_shape)[1:]), device=device))
    model.train(was_training)
