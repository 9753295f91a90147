"""A user's model with several outputs (a tuple, list, dict, named tuple, or nested), seen by
every converter as a module returning a flat tuple of tensors.

The order is the structure's own, depth first: tuple and list items by position, dict items
in insertion order, named-tuple fields in declaration order. Each output is named after its
path: ``out0``, ``out1`` for a top-level tuple or list, the key for a dict (``scores``), and
dotted below the top (``out1.0``, ``boxes.xy``). The names go into the exported file where
the format keeps names (ONNX), into the sidecar (``outputs``) and into parity's per-output
report, so that ``models info``, the sidecar and parity speak of the same outputs.
"""

from __future__ import annotations

from aiot.converters.inputs import call
from aiot.core.errors import UsageError, first_line


def flat_outputs(out, where: str) -> list[tuple[str, object]]:
    """``[(name, tensor)]`` of a model's output in the order above (one tensor: ``output``).

    Raises:
        UsageError: an output is neither a tensor nor a tuple, list or dict of them.
    """
    import torch

    if isinstance(out, torch.Tensor):
        return [("output", out)]
    return _leaves(out, None, where, lambda value: isinstance(value, torch.Tensor))


def _leaves(out, prefix: str | None, where: str, is_leaf) -> list[tuple[str, object]]:
    if is_leaf(out):
        return [(prefix or "output", out)]
    if isinstance(out, dict):
        items = [(str(key), value) for key, value in out.items()]
    elif isinstance(out, tuple) and hasattr(out, "_fields"):  # a named tuple: its field names
        items = list(zip(out._fields, out))
    elif isinstance(out, (tuple, list)):
        items = [(f"out{i}" if prefix is None else str(i), value) for i, value in enumerate(out)]
    else:
        raise UsageError(f"{where} returns a {type(out).__name__}"
                         + (f" as output {prefix}" if prefix else "")
                         + ": outputs must be tensors, or tuples, lists or dicts of tensors",
                         "return tensors only (a constant can stay in your own code)")
    if not items:
        raise UsageError(f"{where} returns an empty {type(out).__name__}: there is no output "
                         "to measure", "return the model's output tensors")
    found: list[tuple[str, object]] = []
    for name, value in items:
        found += _leaves(value, name if prefix is None else f"{prefix}.{name}", where, is_leaf)
    return found


def _not_container(value) -> bool:
    return not isinstance(value, (dict, tuple, list))


def output_facts(leaves: list[tuple[str, object]]) -> list[dict]:
    """The sidecar's and ``models info``'s ``outputs``: name, shape (batch first), dtype."""
    return [{"name": name, "shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch."),
             "quantization": None} for name, t in leaves]


def with_flat_outputs(model, example, where: str):
    """``(module, outputs)``: ``model`` itself when it returns one tensor, else a wrapper
    returning its outputs as a flat tuple; ``outputs`` describes each (:func:`output_facts`).

    Raises:
        UsageError: the model fails on its example, or returns something not made of tensors.
    """
    import torch

    try:
        with torch.no_grad():
            out = call(model, example)
    except Exception as exc:  # noqa: BLE001 - the user's own forward on its own example
        raise UsageError(f"{where} fails on its example input: {type(exc).__name__}: "
                         f"{first_line(exc)}", "run the factory's model on its example in "
                         "your own code first") from None
    leaves = flat_outputs(out, where)
    if isinstance(out, torch.Tensor):
        return model, output_facts(leaves)
    names = [name for name, _ in leaves]
    if len(set(names)) != len(names):
        raise UsageError(f"{where} names two outputs alike ({', '.join(names)})",
                         "give each dict key a distinct name")
    flat = _flat_class()(model, where)
    flat.aiot_fixed_batch = getattr(model, "aiot_fixed_batch", False)
    flat.aiot_output_names = names
    if hasattr(model, "aiot_input_names"):
        flat.aiot_input_names = model.aiot_input_names
    return flat, output_facts(leaves)


_FLAT = None


def _flat_class():
    """The wrapper's class, made once torch is imported (this module must import without it)."""
    global _FLAT
    if _FLAT is None:
        import torch

        class FlatOutputs(torch.nn.Module):
            """``model``'s outputs as a flat tuple of tensors (see the module docstring)."""

            def __init__(self, model, where: str) -> None:
                super().__init__()
                self.model = model
                self.where = where

            def forward(self, *args):
                # Anything but a container is a leaf here: a tracer's proxies stand for tensors.
                return tuple(t for _, t in _leaves(self.model(*args), None, self.where,
                                                   _not_container))

        _FLAT = FlatOutputs
    return _FLAT


def output_names(model) -> list[str] | None:
    """The names of a wrapped model's outputs, in order; None for a one-tensor model."""
    return getattr(model, "aiot_output_names", None)
