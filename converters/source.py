"""The user's own PyTorch model as a conversion source: a factory in their code, or a ``.pt2``.

A factory (``file.py:factory`` or ``package.module:factory``) returns an ``nn.Module`` or
``(module, example_inputs)``, the inputs a tensor, a tuple of tensors or a dict of keyword
inputs (:mod:`.inputs`); it runs in a child process (:mod:`.factory_process`), so its
exits, crashes, prints and hangs never end aiot. A ``torch.export`` program file brings its
example inputs with it, and is loaded without unpickling anything but tensors
(:mod:`aiot.core.safe_load`). Either way the converters get the same ``(model, example)`` pair a zoo model gives them.
Whatever the user's code raises becomes one line naming the reference, never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiot.converters.factory_process import build_in_child
from aiot.converters.inputs import positional_module
from aiot.core.errors import UsageError, first_line
from aiot.core.safe_load import UnpicklingRefused, load_program
from aiot.models.model_ref import CODE, PROGRAM, ModelRef


@dataclass
class UserModel:
    """A user's module in eval mode, called with positional tensors, its example input at
    batch 1 (one tensor, or a tuple for several inputs) and each input's name."""

    model: object
    example: object
    names: list[str]


def load_user_model(ref: ModelRef, input_shapes: dict[str, list[int]] | None = None) -> UserModel:
    """Build the module of a code or program reference with its example input.

    Args:
        input_shapes: ``--input-shape`` values; they give a float32 example to a factory that
            returns a bare module, and fix a program's example shape.

    Raises:
        UsageError: the file or module does not import, the factory is missing or raises, it
            returns something else than a module, or no example input can be had.
    """
    if ref.kind == CODE:
        model, example = build_in_child(ref)
    elif ref.kind == PROGRAM:
        model, example = _load_program(ref)
    else:
        raise ValueError(f"{ref.name} is not user code")
    if example is None:
        example = _example_from_shapes(ref, input_shapes)
    model, example, names = positional_module(model, example, ref.name)
    model.eval()
    return UserModel(model, example, names)


def _load_program(ref: ModelRef):
    try:
        program = load_program(ref.path, ref.name)
    except UnpicklingRefused:
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged or foreign archive
        raise UsageError(f"{ref.name} is not a loadable torch.export program: "
                         f"{type(exc).__name__}: {first_line(exc)}",
                         "save it with torch.export.save from the same torch version") from None
    args = None
    if program.example_inputs is not None:
        args, kwargs = program.example_inputs
        if kwargs and args:
            raise UsageError(f"{ref.name} takes both positional and keyword inputs",
                             "export it with inputs of one kind")
        args = dict(kwargs) if kwargs else args
    module = program.module()
    # An exported program's module refuses train()/eval(): its graph was captured in one
    # mode already. The converters call eval() on every model, so here it is a no-op.
    module.train = lambda mode=True: module
    module.eval = lambda: module
    module.aiot_fixed_batch = True  # parity runs it one row at a time (see parity)
    return module, args


def _example_from_shapes(ref: ModelRef, input_shapes: dict[str, list[int]] | None):
    import torch

    if not input_shapes:
        raise UsageError(f"{ref.name} gives no example inputs, so its input shape is unknown",
                         "return (module, example_inputs) from the factory, or give "
                         "--input-shape x=1x3x224x224")
    generator = torch.Generator().manual_seed(0)
    if len(input_shapes) == 1:
        (shape,) = input_shapes.values()
        return torch.randn(*shape, generator=generator)
    # Several named shapes: float32 keyword inputs, in the order given.
    return {name: torch.randn(*shape, generator=generator) for name, shape in input_shapes.items()}
