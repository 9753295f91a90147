"""The user's own PyTorch model as a conversion source: a factory in their code, or a ``.pt2``.

A factory (``file.py:factory`` or ``package.module:factory``) returns an ``nn.Module`` or
``(module, example_inputs)``; it runs in a child process (:mod:`.factory_process`), so its
exits, crashes, prints and hangs never end aiot. A ``torch.export`` program file brings its
example inputs with it, and is loaded without unpickling anything but tensors
(:mod:`aiot.core.safe_load`). Either way the converters get the same ``(model, example)`` pair a zoo model gives them.
Whatever the user's code raises becomes one line naming the reference, never a traceback.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aiot.converters.factory_process import build_in_child, first_line
from aiot.core.errors import UsageError
from aiot.core.safe_load import UnpicklingRefused, load_program
from aiot.models.model_ref import CODE, PROGRAM, ModelRef


@dataclass
class UserModel:
    """A user's module in eval mode and its example input (batch first, one tensor)."""

    model: object
    example: object


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
    example = _single_tensor(ref, example)
    model.eval()
    return UserModel(model, example)


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
        if kwargs:
            raise UsageError(f"{ref.name} takes keyword inputs", "export it with positional inputs")
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
    if len(input_shapes) != 1:
        raise UsageError(f"{ref.name}: {len(input_shapes)} --input-shape values for a module "
                         "without example inputs", "return (module, example_inputs) instead")
    (shape,) = input_shapes.values()
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


def _single_tensor(ref: ModelRef, example):
    """The one batch-first tensor the converters take (a 1-tuple is unwrapped)."""
    import torch

    if isinstance(example, (tuple, list)):
        if len(example) != 1:
            raise UsageError(f"{ref.name} has {len(example)} inputs; converting models with "
                             "several inputs is not supported yet",
                             "export it yourself (.onnx, .tflite, .pte) and measure that file")
        example = example[0]
    if not isinstance(example, torch.Tensor):
        raise UsageError(f"{ref.name}'s example input is a {type(example).__name__}, not a tensor",
                         "return (module, torch.randn(1, ...))")
    if example.dim() == 0 or example.shape[0] != 1:
        raise UsageError(f"{ref.name}'s example input has shape {list(example.shape)}; artifacts "
                         "are exported at batch 1", "give an example of shape [1, ...]")
    return example


def parity_inputs(example, count: int, seed: int):
    """``count`` seeded inputs shaped and typed like ``example`` (batch 1), batch first.

    Floats are standard normal; integers uniform in [0, 10) (indices and counts of the
    user's model must stay valid); bools a fair coin.
    """
    import torch

    generator = torch.Generator().manual_seed(seed)
    shape = (count, *example.shape[1:])
    if example.dtype.is_floating_point:
        return torch.randn(shape, generator=generator).to(example.dtype)
    if example.dtype == torch.bool:
        return torch.rand(shape, generator=generator) < 0.5
    return torch.randint(0, 10, shape, generator=generator, dtype=example.dtype)


def input_facts(example) -> dict:
    """The sidecar's ``input`` entry for a user model: shape without batch, batch, dtype."""
    return {"shape": list(example.shape[1:]), "batch": int(example.shape[0]),
            "dtype": str(example.dtype).removeprefix("torch."),
            "elements": math.prod(example.shape)}
