"""daBNN's deployed form of a binarized model: the clamps a float layer reads, dropped.

BiBench's binarized ResNets (and aiot's ``binarize()``) put a Hardtanh after the stem and after
every residual add, and the next block reads that clamped tensor twice: its binary convs
binarize it, and its shortcut adds it as a float. daBNN has no clamp (onnx2bnn converts Conv,
the Sign→Conv binary pattern, BatchNormalization, Relu, PRelu, Add, Concat, pooling, Gemm,
Softmax and Dropout, nothing else), and the networks daBNN runs are Bi-Real-style blocks whose
shortcut reads the block's float output before any sign. That is how a ResNet BNN reaches
daBNN: a clamp that only binary convs read is dropped exactly (``sign(clamp(v)) == sign(v)``,
see :mod:`aiot.converters.dabnn.emit`), and a clamp that a float layer also reads (the
shortcut, the pooling before the classifier) is dropped for it too, so the float path
carries the unclamped values. That changes what the network computes, so it is never silent:

* :func:`deployed_form` returns the PyTorch model with the same change (those Hardtanh
  modules replaced by identities), and the artifact's parity (sign agreement per binary layer,
  top-1) is measured against that model, not against a model it cannot equal;
* the change itself is measured (the training graph against the deployed form, top-1
  agreement and logits error on the parity inputs) and written, with the dropped clamps and
  who read them, into the sidecar's ``deployed_form`` and shown by ``aiot models info``.

Where a dropped clamp's binary readers need a threshold outside the clamp's band (a ReActNet
threshold beyond ±1), the deployed form binarizes the unclamped value there too: the same
model is the reference, so parity still holds, and the training-graph agreement shows the cost.
"""

from __future__ import annotations

import copy

from aiot.converters.graph import lower, trace
from aiot.models.bibench.binarize import replace_module

FORMAT = "dabnn"
#: Layers a clamp's value passes through unchanged in sign on its way to a binary conv.
_SIGN_PATH = ("maxpool", "hardtanh")
CHANGE = "clamps-dropped"
WHY = ("daBNN has no clamp operator; its residual blocks (Bi-Real style) add the block's "
       "pre-sign float values on the shortcut, so the Hardtanh that the shortcut or the "
       "classifier also reads is dropped for them as well")


def float_read_clamps(graph) -> dict[str, list[str]]:
    """Hardtanh layers of a lowered graph that something other than a binary conv reads
    (directly or through max-pools and other clamps): layer name → those readers' names
    (``"output"`` for the model's output)."""
    readers: dict[str, list] = {layer.name: [] for layer in graph.layers}
    for layer in graph.layers:
        for name in layer.inputs:
            readers[name].append(layer)
    found: dict[str, list[str]] = {}
    for layer in graph.layers:
        if layer.kind != "hardtanh":
            continue
        floats, stack = [], [layer.name]
        while stack:
            name = stack.pop()
            if name == graph.output:
                floats.append("output")
            for reader in readers[name]:
                if reader.kind in _SIGN_PATH:
                    stack.append(reader.name)
                elif reader.kind != "bconv":
                    floats.append(reader.name)
        if floats:
            found[layer.name] = sorted(set(floats))
    return found


def deployed_form(model, example) -> tuple[object, dict | None]:
    """``(model daBNN runs, facts)``: ``model`` itself and None when every clamp is binary-only,
    else a copy whose float-read Hardtanh modules are identities, and what changed.

    The facts name the change, why, the modules (every call of a shared module is dropped:
    its binary-only calls exactly) and the graph layers that read unclamped values now.
    """
    graph = lower(model, example, FORMAT)
    clamps = float_read_clamps(graph)
    if not clamps:
        return model, None
    targets = {node.name: node.target for node in trace(model).nodes if node.op == "call_module"}
    modules = sorted({targets[name] for name in clamps})
    changed = copy.deepcopy(model)
    for target in modules:
        replace_module(changed, target, _identity())
    readers = sorted({r for names in clamps.values() for r in names})
    return changed, {"change": CHANGE, "why": WHY, "modules": modules,
                     "clamp_calls": len(clamps), "unclamped_readers": readers}


def _identity():
    from torch import nn

    return nn.Identity()


def describe(facts: dict | None) -> str:
    """One line for ``models info`` and the CLI: what the deployed form changes and its cost."""
    if not facts:
        return "the training graph as it is"
    line = (f"{facts['clamp_calls']} Hardtanh clamps dropped ({len(facts['modules'])} modules); "
            f"{len(facts['unclamped_readers'])} float layers (shortcut adds, classifier) read "
            "pre-clamp values, as daBNN's Bi-Real-style blocks do")
    cost = facts.get("training_graph")
    if cost:
        line += (f"; against the training graph: top-1 {100 * cost['top1_agreement']:.0f}% on "
                 f"{cost['n']} inputs, logits max abs {cost['max_abs']:.3g}")
    return line
