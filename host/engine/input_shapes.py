"""``--input-shape``: parsed once, bound to each model of a run or sweep, shown in tables.

The option takes, repeatable::

    DxD                  the only input of a single-input model (1x3x640x640)
    NAME=DxD             input NAME of every model that has it (x=1x3x48x320)
    MODEL:NAME=DxD       input NAME of MODEL only (rec.onnx:x=1x3x48x320)
    MODEL:DxD            the only input of MODEL

MODEL is the model as ``--model`` names it: a file's path or name (with or without its
extension), a zoo name, ``file.py:factory``. A name for one model beats one for every model;
two different shapes for the same input at the same scope are refused, never silently
replaced. An artifact input whose only free dim is the batch runs at batch 1, as TFLite's
``benchmark_model`` and ``onnxruntime_perf_test`` do; the record says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from aiot.core.errors import UsageError
from aiot.host.engine.shape_guess import propose
from aiot.host.engine.signature import artifact_signature, is_artifact_file

# One writer of a shape and of the shapes a record ran at: the store's identity (labels too).
from aiot.host.store.identity import dims_text

#: How a converting model's bare shape is named: its factory takes the one shape whatever
#: the name (see ``aiot.converters.source``).
BARE_NAME = "input"

SYNTAX = "[MODEL:][NAME=]DxD"


@dataclass(frozen=True)
class ShapeArg:
    """One ``--input-shape`` value.

    Attributes:
        text: as given, for messages.
        left: what stands before ``=`` (``NAME`` or ``MODEL:NAME``), or before the dims'
            ``:`` for ``MODEL:DxD``; None for a bare ``DxD``. A ``:`` may belong to an input
            name (TensorFlow's ``serving_default_x:0``), so the scope is told apart only
            once the models are known (:func:`bind_shapes`).
        bare_scoped: ``MODEL:DxD`` (``left`` is then the model).
        dims: the sizes, each ≥ 1.
    """

    text: str
    left: str | None
    bare_scoped: bool
    dims: tuple[int, ...]


def _dims(text: str) -> tuple[int, ...] | None:
    try:
        dims = tuple(int(d) for d in text.strip().lower().split("x")) if text.strip() else ()
    except ValueError:
        return None
    return dims if dims and all(d >= 1 for d in dims) else None


def parse_shape_args(values: list[str] | None) -> tuple[ShapeArg, ...]:
    """The ``--input-shape`` values, checked; exact repeats dropped.

    Raises:
        UsageError: a value that is not ``[MODEL:][NAME=]DxD``; the same input (as written)
            given two different shapes.
    """
    found: dict[tuple, ShapeArg] = {}
    for value in values or []:
        left, sep, right = value.partition("=")
        if sep:
            dims, bare_scoped = _dims(right), False
            left = left.strip()
        else:
            scope, colon, tail = value.rpartition(":")
            dims = _dims(tail if colon else value)
            left, bare_scoped = (scope.strip(), True) if colon else (None, False)
        if dims is None or left == "" or (bare_scoped and not left):
            raise UsageError(f"--input-shape '{value}' is not {SYNTAX} with sizes ≥ 1",
                             "e.g. --input-shape 1x3x224x224, x=1x3x224x224 or "
                             "model.onnx:x=1x3x224x224")
        arg = ShapeArg(value, left, bare_scoped, dims)
        key = (left, bare_scoped)
        if key in found and found[key].dims != dims:
            raise UsageError(f"--input-shape {found[key].text} and {value} give one input two "
                             "shapes", "give each input one shape; for two models sharing an "
                             "input name, scope each: --input-shape MODEL:NAME=DxD")
        found[key] = arg
    return tuple(found.values())


def flat_shapes(args: tuple[ShapeArg, ...]) -> dict[str, list[int]]:
    """``{name: dims}`` for a command of one model aiot converts (convert, push, models
    info): the scope is that model's, a bare shape is its one input."""
    shapes: dict[str, list[int]] = {}
    for arg in args:
        if arg.bare_scoped or arg.left is None:
            name = BARE_NAME
        else:
            name = arg.left.rpartition(":")[2] if ":" in arg.left else arg.left
        shapes[name] = list(arg.dims)
    return shapes


# -- binding to the models of a sweep ------------------------------------------------------------

def _names_of(request) -> set[str]:
    """What a ``MODEL:`` scope may say for the request's model."""
    names = {request.model}
    if request.binarize:
        names.add(f"{request.model}_{request.binarize}")
    if request.model_path is not None:
        names |= {str(request.model_path), request.model_path.name, request.model_path.stem}
    return names


def _scope_matches(scope: str, request) -> bool:
    if scope in _names_of(request):
        return True
    if request.model_path is None:
        return False
    try:
        return Path(scope).expanduser().resolve() == Path(request.model_path).resolve()
    except OSError:
        return False


def _split(arg: ShapeArg, requests) -> tuple[str | None, str | None]:
    """``(scope, input name)`` of ``arg`` among the sweep's models (either may be None)."""
    if arg.left is None:
        return None, None
    if arg.bare_scoped:
        if not any(_scope_matches(arg.left, r) for r in requests):
            raise _no_such_model(arg, arg.left, requests)
        return arg.left, None
    left = arg.left
    for i, char in enumerate(left):
        if char == ":" and any(_scope_matches(left[:i], r) for r in requests):
            return left[:i], left[i + 1:] or None
    return None, left


def parse_inputs_args(values: list[str] | None) -> tuple[Path | None, tuple[tuple[str, Path], ...]]:
    """``--inputs`` values, ``[MODEL:]FILE.npz`` (MODEL as in ``--input-shape``):
    ``(the file for every model or None, (model, file) pairs for one model each)``.

    Raises:
        UsageError: two files for every model, or two for one model.
    """
    bare: Path | None = None
    scoped: dict[str, Path] = {}
    for value in values or ():
        scope, colon, file = value.rpartition(":")
        if not colon or not scope or Path(value).expanduser().is_file():
            if bare is not None and bare != Path(value):
                raise UsageError(f"--inputs {bare} and {value}: two files for every model",
                                 "scope each to its model: --inputs MODEL:FILE.npz")
            bare = Path(value)
        elif scoped.setdefault(scope, Path(file)) != Path(file):
            raise UsageError(f"--inputs gives {scope} two files ({scoped[scope]} and {file})",
                             "give each model one file")
    return bare, tuple(scoped.items())


def bind_inputs(requests: list, scoped: tuple[tuple[str, Path, str], ...]) -> list:
    """Each request with its own model's ``--inputs MODEL:FILE`` (``(model, file, sha256)``),
    over a file given for every model.

    Raises:
        UsageError: a MODEL that is no model of the run.
    """
    for scope, _, _ in scoped:
        if not any(_scope_matches(scope, r) for r in requests):
            models = ", ".join(dict.fromkeys(r.model for r in requests))
            raise UsageError(f"--inputs {scope}:…: '{scope}' is no model of this run "
                             f"(models: {models})", "scope a file as MODEL:FILE.npz with MODEL "
                             "as --model names it")
    done = []
    for request in requests:
        mine = next(((path, sha) for scope, path, sha in scoped if _scope_matches(scope, request)),
                    None)
        done.append(replace(request, inputs=mine[0], inputs_sha256=mine[1]) if mine else request)
    return done


def _no_such_model(arg: ShapeArg, scope: str, requests) -> UsageError:
    models = ", ".join(dict.fromkeys(r.model for r in requests))
    return UsageError(f"--input-shape {arg.text}: '{scope}' is no model of this run "
                      f"(models: {models})", "scope a shape as MODEL:NAME=DxD with MODEL as "
                      "--model names it")


@dataclass
class _Bound:
    shapes: dict
    specific: dict  # name -> (scoped?, ShapeArg) that set it
    applied: set = field(default_factory=set)  # the args' texts that applied to the model


def _assign(bound: _Bound, name: str, arg: ShapeArg, scoped: bool, model: str) -> None:
    bound.applied.add(arg.text)
    previous = bound.specific.get(name)
    if previous is not None and previous[0] == scoped and previous[1].dims != arg.dims:
        raise UsageError(f"--input-shape {previous[1].text} and {arg.text} give {model}'s input "
                         f"'{name}' two shapes", "give each input one shape")
    if previous is None or scoped or not previous[0]:
        bound.shapes[name] = list(arg.dims)
        bound.specific[name] = (scoped, arg)


def _bind_one(request, parts: list[tuple[ShapeArg, str | None, str | None]]):
    """``(shapes, batch-defaulted names, the args' texts that applied)`` for one request."""
    mine = [(a, scope, name) for a, scope, name in parts
            if scope is None or _scope_matches(scope, request)]
    if _is_zoo(request):  # its input is the zoo's: nothing to set
        scoped = next((a for a, scope, _ in mine if scope is not None), None)
        if scoped is not None:
            raise UsageError(f"--input-shape {scoped.text}: {request.model} is a zoo model, whose "
                             "input shape is fixed", "aiot models info NAME shows it; drop the "
                             "shape, or export the model at another size and run the file")
        return {}, (), set()
    named = _Bound({}, {})
    for arg, scope, name in mine:
        if name is not None:
            _assign(named, name, arg, scope is not None, request.model)
    artifact = is_artifact_file(request)
    probe = replace(request, input_shapes=_as_tuple(named.shapes))
    signature = artifact_signature(probe) if artifact else None
    bound = _Bound({}, {})
    if signature is None:  # aiot converts it: its factory takes the one shape given
        for arg, scope, name in mine:
            _assign(bound, name or BARE_NAME, arg, scope is not None, request.model)
        return bound.shapes, (), bound.applied
    inputs = {i["name"]: list(i["shape"]) for i in signature["inputs"]}
    loose = signature.get("declares_no_inputs")
    for arg, scope, name in mine:
        if name is None:
            if len(inputs) != 1:
                raise UsageError(f"--input-shape {arg.text} gives one shape, but {request.model} "
                                 f"has {len(inputs)} inputs ({', '.join(inputs) or 'none'})",
                                 f"name the input: --input-shape {request.model}:NAME=DxD")
            name = next(iter(inputs))
        elif name not in inputs:
            if scope is not None:
                raise UsageError(f"--input-shape {arg.text}: {request.model} has no input "
                                 f"'{name}' (its inputs: {', '.join(inputs) or 'none'})",
                                 "aiot models info FILE lists each input's shape")
            continue  # another model's input
        if scope is None and not loose and all(d >= 0 for d in inputs[name]):
            continue  # a fixed input runs as it is; the shape is another model's
        _assign(bound, name, arg, scope is not None, request.model)
    defaulted = []
    if request.inputs is None and not loose:
        for name, dims in inputs.items():
            if name not in bound.shapes and dims and dims[0] < 0 and all(d >= 0 for d in dims[1:]):
                bound.shapes[name] = [1, *dims[1:]]
                defaulted.append(name)
    return bound.shapes, tuple(defaulted), bound.applied


def _is_zoo(request) -> bool:
    """A zoo model (not a file, not ``module:factory`` code)."""
    return request.model_path is None and ":" not in request.model


def _as_tuple(shapes: dict) -> tuple | None:
    return tuple((n, tuple(d)) for n, d in shapes.items()) or None


def bind_shapes(requests: list, args: tuple[ShapeArg, ...]) -> tuple[list, list[str]]:
    """Each request with its own model's input shapes, and one line per model whose free
    batch dim aiot set to 1.

    Raises:
        UsageError: a scope that names no model of the sweep, a name that is no input with a
            free dim of any model, a bare shape for a model of several inputs, two shapes for
            one input at one scope.
    """
    parts = [(a, *_split(a, requests)) for a in args]
    done, notes, used, cache, applied = [], {}, set(), {}, set()
    for request in requests:
        key = (request.model, request.model_sha256, request.format, request.binarize,
               request.model_path, request.inputs)
        if key not in cache:
            cache[key] = _bind_one(request, parts)
        shapes, defaulted, took = cache[key]
        used |= set(shapes)
        applied |= took
        if defaulted:
            notes[request.model] = _batch_note(request.model, shapes, defaulted)
        done.append(replace(request, input_shapes=_as_tuple(shapes),
                            batch_defaulted=defaulted or None))
    bare = next((a for a, scope, name in parts if name is None and a.text not in applied), None)
    if bare is not None:  # said, never silently dropped
        models = ", ".join(dict.fromkeys(r.model for r in requests))
        raise UsageError(f"--input-shape {bare.text} applies to no model here: {models} "
                         "take(s) fixed input shapes (a zoo model's, or a file without free "
                         "dims)", "drop it; aiot models info NAME shows a model's inputs")
    unused = [(a, name) for a, scope, name in parts if scope is None and name and name not in used]
    for arg, name in unused:
        scope = name.rpartition(":")[0]
        if "." in scope or "/" in scope:  # meant as MODEL:NAME (input names have no dots)
            raise _no_such_model(arg, scope, requests)
    unused = [name for _, name in unused]
    takes_any = any(not is_artifact_file(r) and not _is_zoo(r) for r in requests)  # user code
    if unused and not takes_any:
        raise UsageError(f"no model here has an input '{unused[0]}' with a dynamic dim",
                         "--input-shape sets dynamic dims only; aiot models info FILE lists "
                         "each input's shape")
    return done, list(notes.values())


def free_dims_line(inputs: list[dict] | None, path: Path | None = None) -> str | None:
    """What ``aiot models info`` says of an artifact's free dims: that a free batch dim runs
    at 1 without flags, or the ``--input-shape`` to give for the others (with where its sizes
    came from); None when no dim is free."""
    free = [i for i in inputs or [] if any(d is None or d < 0 for d in i["shape"])]
    if not free:
        return None
    batch_only = [i["name"] for i in free
                  if i["shape"][0] < 0 and all(d >= 0 for d in i["shape"][1:])]
    others = [i for i in free if i["name"] not in batch_only]
    parts = []
    if batch_only:
        parts.append(f"free batch dim of {', '.join(batch_only)}: a run sets it to 1 "
                     "(--input-shape sets another)")
    for spec in others:
        dims, why = propose(spec, path)
        parts.append(f"{spec['name']} has other free dims: run with --input-shape "
                     f"{spec['name']}={dims_text(dims)} ({why})")
    return "; ".join(parts)


def _batch_note(model: str, shapes: dict, defaulted: tuple[str, ...]) -> str:
    runs = ", ".join(f"{n}={dims_text(shapes[n])}" for n in defaulted)
    return (f"{model}: free batch dim set to 1 ({runs}), as benchmark_model and "
            "onnxruntime_perf_test do; --input-shape sets another")
