"""A model's example inputs as every converter and the parity check see them.

A user's factory may return ``(module, tensor)``, ``(module, (t1, t2, …))`` or ``(module,
{"name": tensor, …})`` (keyword inputs, as a Hugging Face model takes ``input_ids`` and
``attention_mask``); a ``.pt2`` program brings its own. They are made into one shape here:
a module called with positional tensors (a dict's model is wrapped so that each position is
passed as its keyword), the tensors at batch 1, and a name for each input:

* a dict's keys;
* otherwise the names of the module's ``forward`` parameters (``input_ids``,
  ``attention_mask``), where it has as many named ones;
* otherwise ``input_0``, ``input_1``, … (a zoo model's one input is ``input``).

The names go into the artifact where its format keeps names (ONNX, ORT, TFLite's signature,
the lite module's ``aiot_input.json``) and into the sidecar (``inputs``). A one-input model
hands its converters the tensor itself (``example``), several hand them a tuple; a converter
that cannot hold several inputs says so before any work (:attr:`Converter.several_inputs`).

Integer inputs are drawn from a range the model can take (:func:`integer_ranges`): the size
of the embedding an input indexes (its vocabulary), else the span of the example's own
values (an attention mask's 0 and 1); the sidecar says which, and runs draw from it too.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

from aiot.core.errors import UsageError

#: The name of a zoo model's (and any unnamed single) input.
SINGLE_NAME = "input"


@dataclass(frozen=True)
class IntegerRange:
    """Where a made-up integer input's values are drawn from: ``[low, high)`` and why."""

    low: int
    high: int
    source: str  # "embedding <module path>" or "example"

    def to_dict(self) -> dict:
        return {"range": [self.low, self.high], "range_from": self.source}


def as_args(example) -> tuple:
    """The example as the positional arguments of the model: a tensor is a 1-tuple."""
    return tuple(example) if isinstance(example, (tuple, list)) else (example,)


def rows(inputs) -> int:
    """How many samples a batch of inputs holds (a tensor, or a tuple of them)."""
    return len(as_args(inputs)[0])


def row(inputs, start: int, stop: int):
    """Samples ``start:stop`` of a batch of inputs, in the batch's own form."""
    if isinstance(inputs, (tuple, list)):
        return tuple(t[start:stop] for t in inputs)
    return inputs[start:stop]


def call(model, inputs):
    """``model`` run on a batch of inputs (one tensor, or a tuple: one argument each)."""
    return model(*as_args(inputs))


def input_names(model, count: int) -> list[str]:
    """The names of a model's ``count`` inputs (see the module docstring), kept on the
    module by :func:`positional_module`; ``input`` for a one-input model without them."""
    names = getattr(model, "aiot_input_names", None)
    if names and len(names) == count:
        return list(names)
    return [SINGLE_NAME] if count == 1 else [f"input_{i}" for i in range(count)]


def _forward_names(model, count: int) -> list[str] | None:
    """The first ``count`` named parameters of ``model.forward``, or None when it has fewer
    (``*args``) or cannot be inspected."""
    try:
        parameters = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return None
    named = [p.name for p in parameters
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return named[:count] if len(named) >= count else None


def positional_module(model, example, where: str):
    """``(module, example, names)``: ``model`` called with positional tensors, its example
    as one tensor (one input) or a tuple (several), and each input's name.

    Raises:
        UsageError: the example is neither a tensor nor a tuple, list or dict of tensors,
            an input is not at batch 1, or a dict's key is not a usable name.
    """
    if isinstance(example, dict):
        names = [str(key) for key in example]
        bad = [n for n in names if not n.isidentifier()]
        if bad:
            raise UsageError(f"{where}'s example input names '{bad[0]}', which is not an "
                             "identifier", "name keyword inputs as the forward's parameters")
        tensors = tuple(example.values())
        fixed = getattr(model, "aiot_fixed_batch", False)
        model = _keyword_class()(model, names)
        model.aiot_fixed_batch = fixed
    else:
        tensors = as_args(example)
        names = _forward_names(model, len(tensors)) or input_names(None, len(tensors))
    if not tensors:
        raise UsageError(f"{where} gives an empty example input", "give at least one tensor")
    for name, tensor in zip(names, tensors):
        _check_tensor(where, name, tensor, len(tensors))
    model.aiot_input_names = names
    return model, tensors[0] if len(tensors) == 1 else tensors, names


def _check_tensor(where: str, name: str, tensor, count: int) -> None:
    import torch

    which = f"input '{name}'" if count > 1 else "example input"
    if not isinstance(tensor, torch.Tensor):
        raise UsageError(f"{where}'s {which} is a {type(tensor).__name__}, not a tensor",
                         "return (module, torch.randn(1, ...)) or a tuple/dict of tensors")
    if tensor.dim() == 0 or tensor.shape[0] != 1:
        raise UsageError(f"{where}'s {which} has shape {list(tensor.shape)}; artifacts are "
                         "exported at batch 1", "give an example of shape [1, ...]")


_WRAPPERS: dict = {}


def _keyword_class():
    """The keyword wrapper's class (a model taking keywords, called by position)."""
    return _wrapper_classes()["keyword"]


def by_keyword(model, names: list[str]):
    """``model`` (called by position) as a module called with its inputs by name: what a
    converter whose format keeps the names of keyword inputs exports (TFLite's signature)."""
    return _wrapper_classes()["positional"](model, names)


def _wrapper_classes() -> dict:
    """Both wrappers' classes, made once torch is imported (this module imports without it)."""
    if not _WRAPPERS:
        import torch

        class KeywordInputs(torch.nn.Module):
            """``model`` taking its inputs by keyword, called with them by position."""

            def __init__(self, model, names: list[str]) -> None:
                super().__init__()
                self.model = model
                self.names = list(names)

            def forward(self, *args):
                return self.model(**dict(zip(self.names, args)))

        class ByKeyword(KeywordInputs):
            """A positional model called with its inputs by name."""

            def forward(self, **inputs):
                return self.model(*(inputs[name] for name in self.names))

        _WRAPPERS.update(keyword=KeywordInputs, positional=ByKeyword)
    return _WRAPPERS


def integer_ranges(model, example) -> list[IntegerRange | None]:
    """For each input, the range its made-up values come from where it is an integer one
    (None for floats and bools): the embedding it indexes, seen by running the model once
    on its example with a hook on every ``nn.Embedding``, else its example's own span."""
    import torch

    tensors = as_args(example)
    seen: dict[int, tuple[str, int]] = {}

    def watcher(path: str):
        def hook(module, args):
            index = args[0] if args else None
            for i, t in enumerate(tensors):
                if isinstance(index, torch.Tensor) and _same_data(index, t) and i not in seen:
                    seen[i] = (path, module.num_embeddings)
        return hook

    handles = [m.register_forward_pre_hook(watcher(path)) for path, m in model.named_modules()
               if isinstance(m, torch.nn.Embedding)]
    try:
        if handles and any(_is_integer(t) for t in tensors):
            with torch.no_grad():
                call(model, example)
    finally:
        for handle in handles:
            handle.remove()
    found: list[IntegerRange | None] = []
    for i, t in enumerate(tensors):
        if not _is_integer(t):
            found.append(None)
        elif i in seen:
            found.append(IntegerRange(0, seen[i][1], f"embedding {_short(seen[i][0])}"))
        else:
            low, high = int(t.min()), int(t.max()) + 1
            found.append(IntegerRange(low, high, "example"))
    return found


def _short(path: str) -> str:
    return path.removeprefix("model.") or path


def _same_data(a, b) -> bool:
    """Whether tensor ``a`` is ``b`` or a view of all of it (``input_ids.view(-1, n)``)."""
    return a.data_ptr() == b.data_ptr() and a.numel() == b.numel() and a.dtype == b.dtype


def _is_integer(tensor) -> bool:
    import torch

    return not tensor.dtype.is_floating_point and tensor.dtype != torch.bool \
        and not tensor.dtype.is_complex


def parity_inputs(example, count: int, seed: int, ranges: list | None = None):
    """``count`` seeded inputs shaped and typed like ``example`` (batch 1), batch first, in
    its form (a tensor, or a tuple of them).

    Floats are standard normal; integers uniform in their :class:`IntegerRange` (else in
    [0, 10): indices and counts of the user's model must stay valid); bools a fair coin.
    """
    tensors = as_args(example)
    ranges = ranges or [None] * len(tensors)
    made = tuple(_noise(t, count, seed + i, r) for i, (t, r) in enumerate(zip(tensors, ranges)))
    return made if isinstance(example, tuple) else made[0]


def _noise(example, count: int, seed: int, bounds: IntegerRange | None):
    import torch

    generator = torch.Generator().manual_seed(seed)
    shape = (count, *example.shape[1:])
    if example.dtype.is_floating_point:
        return torch.randn(shape, generator=generator).to(example.dtype)
    if example.dtype == torch.bool:
        return torch.rand(shape, generator=generator) < 0.5
    low, high = (bounds.low, bounds.high) if bounds is not None else (0, 10)
    return torch.randint(low, max(high, low + 1), shape, generator=generator, dtype=example.dtype)


def input_facts(example, names: list[str], ranges: list | None = None) -> list[dict]:
    """The sidecar's ``inputs``: per input its name, shape without batch, batch, dtype,
    elements, and an integer input's draw range (``range``, ``range_from``)."""
    tensors = as_args(example)
    ranges = ranges or [None] * len(tensors)
    return [{"name": name, "shape": list(t.shape[1:]), "batch": int(t.shape[0]),
             "dtype": str(t.dtype).removeprefix("torch."), "elements": math.prod(t.shape),
             **(r.to_dict() if r is not None else {})}
            for name, t, r in zip(names, tensors, ranges)]


@dataclass(frozen=True)
class InputFeed:
    """What the user says of a conversion's parity inputs (``aiot convert --input-value``,
    ``--inputs``; a run's and sweep's values reach its conversion too).

    Attributes:
        values: ``{input name: number}``: the input is held at that number (a sample rate,
            a mode flag); names of no input of the model are another model's of a sweep.
        npz: an ``.npz`` with one batch per input name (batch first, each row an input of
            the model's shape and dtype): the parity check runs on it instead of noise.
        strict: a name in ``values`` that is no input of the model is refused (one model:
            ``aiot convert``), not left to another model.
    """

    values: tuple[tuple[str, int | float], ...] = ()
    npz: str | None = None
    strict: bool = False

    def values_for(self, where: str, inputs: list[dict]) -> dict:
        """The values that name inputs of this model.

        Raises:
            UsageError: with ``strict``, a value that names no input of the model.
        """
        names = [i["name"] for i in inputs]
        unknown = [name for name, _ in self.values if name not in names]
        if self.strict and unknown:
            raise UsageError(f"--input-value names '{unknown[0]}', which is no input of {where} "
                             f"(its inputs: {', '.join(names)})", "name one of its inputs")
        return {name: value for name, value in self.values if name in names}

    def batch_for(self, where: str, inputs: list[dict], example):
        """The ``--inputs`` batch in ``example``'s form (a tensor, or a tuple), or None.

        Raises:
            UsageError: the file is unreadable, lacks an input, or an array's dtype or row
                shape is not the input's, or its batches differ in length.
        """
        if self.npz is None:
            return None
        import numpy as np
        import torch

        try:
            with np.load(self.npz, allow_pickle=False) as found:
                arrays = {name: found[name] for name in found.files}
        except (OSError, ValueError) as exc:
            raise UsageError(f"--inputs {self.npz} is not a readable .npz of arrays "
                             f"({type(exc).__name__}: {str(exc)[:120]})",
                             "save one with numpy.savez(path, NAME=array, ...)") from None
        batch = []
        for spec in inputs:
            array = arrays.get(spec["name"])
            if array is None:
                raise UsageError(f"--inputs {self.npz} has no array '{spec['name']}' (the "
                                 f"file holds: {', '.join(sorted(arrays)) or 'none'})",
                                 f"give one batch per input of {where}: "
                                 + ", ".join(i["name"] for i in inputs))
            if array.dtype.name != spec["dtype"] or list(array.shape[1:]) != spec["shape"]:
                raise UsageError(f"--inputs {self.npz}: '{spec['name']}' is {array.dtype.name} "
                                 f"{list(array.shape)}; {where} takes {spec['dtype']} "
                                 f"[N, {', '.join(map(str, spec['shape']))}]",
                                 "give a batch of inputs, batch first")
            batch.append(torch.from_numpy(np.ascontiguousarray(array)))
        if len({len(t) for t in batch}) > 1 or not len(batch[0]):
            raise UsageError(f"--inputs {self.npz} holds batches of different or no length",
                             "give every input the same number of rows")
        return tuple(batch) if isinstance(example, tuple) else batch[0]


def with_given_values(batch, inputs: list[dict] | None, values: dict | None):
    """``batch`` with each input named in ``values`` filled with its number."""
    if not values:
        return batch
    import torch

    tensors = list(as_args(batch))
    for k, spec in enumerate(inputs or ()):
        if spec["name"] in values:
            tensors[k] = torch.full_like(tensors[k], values[spec["name"]])
    return tuple(tensors) if isinstance(batch, tuple) else tensors[0]
