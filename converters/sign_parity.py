"""Parity of a binarized artifact: do its binary layers see the signs PyTorch sees?

A binarized network amplifies float re-ordering: one pre-activation a hair from 0 flips a
sign in the runtime (BatchNorm folded, sums in another order) and the flip cascades, so the
logits and even the top-1 of an untrained BNN differ between two correct implementations.
What a conversion can get wrong is the graph: a wrong layer order, padding, threshold or
weight layout. This check reads, at every binary layer, the activation the layer binarizes,
in the artifact and in PyTorch on the same inputs, and counts how many signs agree: a wrong
graph gives about half, re-ordering alone a smooth decay from 100 % at the first binary
layer to 97-99 % at the deepest of a ResNet-18, 82 % in a ResNet-50 (see :data:`FLOOR`). The
float part in front of the first binary layer is compared by value, as any float artifact is.

The artifact's activations come from a *probe* of it, made by the same converter from the
same lowered graph with each binary layer's input as an extra output (LCE), or from aiot's
executor of the very file (daBNN). PyTorch's come from forward pre-hooks.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

#: How the signs must agree. A wrong graph (layer, padding, threshold or weight layout) gives
#: about 0.5 from the wrong layer on (a flipped weight sign: ~0.02): a sudden fall. Float
#: re-ordering flips a few signs near 0, and each flip moves the next layer's popcounts, so
#: agreement decays with depth instead. Measured on 8 noise inputs and 32 images, LCE from the
#: zoo's seeded init: the first binary layer 100 % everywhere; the deepest of resnet18_cifar
#: 97.2 % (bnn), of resnet18 98.6 %; ResNet-50 (48 binary layers) falls to 87.7 % by layer4
#: and its layer4.2.conv1 to 82.5 % (a 5.2-point step: the decay speeds up on 7x7 maps). So:
#: the first binary layer (only float arithmetic before it) at least MIN_FIRST, every later
#: one at most MAX_DROP below the layer before it and above FLOOR.
MIN_FIRST_AGREEMENT = 0.99
MAX_DROP = 0.15
FLOOR = 0.6
MIN_SIGN_AGREEMENT = FLOOR  # the report's "required" figure
#: Exact zeros of PyTorch's that must binarize as PyTorch binarizes them (+1), where a layer
#: has at least :data:`MIN_TIES` of them: a different tie rule flips nearly all.
MIN_TIE_AGREEMENT = 0.99
MIN_TIES = 20


def binary_layers(model) -> list[tuple[str, object]]:
    """``(name, BinaryConv2d)`` of a frozen binarized model, in module order."""
    from aiot.models.binary import BinaryConv2d

    return [(name, m) for name, m in model.named_modules() if isinstance(m, BinaryConv2d)]


def torch_binary_inputs(model, inputs) -> dict[str, object]:
    """What each binary layer binarizes (its input minus its threshold), NCHW, per layer
    name, for ``inputs`` run through ``model`` one row at a time (artifacts run at batch 1)."""
    import numpy as np
    import torch

    captured: dict[str, list] = {}
    hooks = []
    for name, module in binary_layers(model):
        def keep(mod, args, name=name):
            x = args[0]
            if mod.threshold is not None:
                x = x - mod.threshold.view(1, -1, 1, 1)
            captured.setdefault(name, []).append(x.detach().cpu().numpy().copy())
        hooks.append(module.register_forward_pre_hook(keep))
    try:
        with torch.no_grad():
            for i in range(len(inputs)):
                model(inputs[i : i + 1])
    finally:
        for hook in hooks:
            hook.remove()
    return {name: np.concatenate(rows) for name, rows in captured.items()}


def sign_agreement(reference, actual, positive_at_zero: bool = True) -> dict:
    """How the binarized signs agree: over all elements, and over PyTorch's exact zeros.

    ``x >= 0`` is +1 in PyTorch; the runtime's rule is the same, or ``x > 0`` where it
    binarizes zero to -1 (daBNN's bit packing), which its emitter must then compensate.
    Exact zeros are common in a BNN (integer popcounts through an identity BatchNorm) and
    are where a tie rule that differs from PyTorch's shows: re-ordering cannot make a whole
    class of exact zeros flip, a wrong tie rule flips them all.
    """
    import numpy as np

    reference, actual = np.asarray(reference), np.asarray(actual)
    ref = reference >= 0
    act = actual >= 0 if positive_at_zero else actual > 0
    ties = reference == 0
    same = ref == act
    return {"sign_agreement": float(np.mean(same)) if ref.size else 1.0,
            "ties": int(ties.sum()),
            "tie_agreement": float(np.mean(same[ties])) if ties.any() else None}


def compare_signs(reference: dict, actual: dict, stem_tolerance: dict,
                  positive_at_zero: bool = True) -> dict:
    """The sign report: per binary layer (in PyTorch's order) the agreement, and the float stem.

    Args:
        reference: PyTorch's binarized activations per layer name, in execution order.
        actual: the artifact's, per layer name.
        stem_tolerance: ``atol``/``rtol`` for the first binary layer's input, which the
            artifact computes in float from the image: a float comparison, as for any artifact.
    """
    import numpy as np

    names = list(reference)
    if sorted(actual) != sorted(names):
        return {"ok": False, "rule": "sign-agreement", "binary_layers": [],
                "min_sign_agreement": 0.0, "first_disagreeing_layer": None,
                "reason": f"the artifact has {len(actual)} binary layers, PyTorch {len(names)}"}
    layers = []
    for name in names:
        ref, act = reference[name], actual[name]
        if np.asarray(act).shape != ref.shape:
            layers.append({"layer": name, "sign_agreement": 0.0, "n": int(ref.size),
                           "reason": f"shape {list(np.shape(act))} != PyTorch {list(ref.shape)}"})
            continue
        layers.append({"layer": name, **sign_agreement(ref, act, positive_at_zero),
                       "n": int(ref.size)})
    stem = _stem(reference[names[0]], actual[names[0]], stem_tolerance) \
        if names and stem_tolerance is not None else None
    worst = min((layer["sign_agreement"] for layer in layers), default=1.0)
    first_bad = next((layer["layer"] for i, layer in enumerate(layers)
                      if not _agrees(layer, layers[i - 1] if i else None)), None)
    return {"ok": bool(first_bad is None and (stem is None or stem["ok"])),
            "rule": "sign-agreement", "min_sign_agreement": worst,
            "required_sign_agreement": MIN_SIGN_AGREEMENT,
            "required_first_layer": MIN_FIRST_AGREEMENT, "max_drop_per_layer": MAX_DROP,
            "first_disagreeing_layer": first_bad,
            "binary_layers": layers, "stem": stem}


def _agrees(layer: dict, before: dict | None) -> bool:
    """A layer passes when its signs agree as re-ordering allows (see
    :data:`MIN_FIRST_AGREEMENT`) and its exact ties binarize as PyTorch's."""
    ties_ok = layer.get("ties", 0) < MIN_TIES or layer["tie_agreement"] >= MIN_TIE_AGREEMENT
    agree = layer["sign_agreement"]
    if before is None:
        return ties_ok and agree >= MIN_FIRST_AGREEMENT
    return ties_ok and agree >= FLOOR and agree >= before["sign_agreement"] - MAX_DROP


def _stem(reference, actual, tolerance: dict) -> dict:
    """Values in front of the first binary layer: float arithmetic, compared as floats."""
    import numpy as np

    ref, act = np.asarray(reference, np.float64), np.asarray(actual, np.float64)
    if ref.shape != act.shape:
        return {"ok": False, "max_abs": float("inf"), "max_rel": float("inf")}
    diff = np.abs(ref - act)
    scale = max(float(np.abs(ref).max()), 1e-6)
    max_abs, max_rel = float(diff.max()), float(diff.max() / scale)
    atol, rtol = tolerance.get("atol"), tolerance.get("rtol")
    ok = (atol is not None and max_abs <= atol) or (rtol is not None and max_rel <= rtol)
    return {"ok": bool(ok), "max_abs": max_abs, "max_rel": max_rel, "atol": atol, "rtol": rtol}


def check_sign_parity(converter, model, artifact, batches: list, tolerance: dict) -> dict:
    """Sign agreement of ``artifact`` with ``model`` on every batch in ``batches`` (seeded
    noise, real images), pooled per layer.

    Returns the sign report (see :func:`compare_signs`), with ``n_inputs``.
    """
    import numpy as np
    import torch

    inputs = np.concatenate([b.numpy() for b in batches])
    reference = torch_binary_inputs(model, torch.from_numpy(inputs))
    actual = converter.binary_inputs(model, artifact, inputs, list(reference))
    # A runtime that shifts what it binarizes (daBNN's sign shifts and folded thresholds)
    # keeps the signs, not the values: its stem is judged by the first layer's signs.
    report = compare_signs(reference, actual, tolerance if converter.stem_by_value else None,
                           converter.positive_at_zero)
    report["n_inputs"] = len(inputs)
    log.info("%s sign parity: min %.4f over %d binary layers", converter.name,
             report.get("min_sign_agreement", 0.0), len(reference))
    return report
