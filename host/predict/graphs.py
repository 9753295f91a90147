"""The kernels of a model that aiot can convert, from its PyTorch source, kept in a cache; and
the collected kernels' programs.

A model is read once per identity (a zoo model by its source file's hash, a user's file or
program by its sha256, a collected kernel by its name and version) and its kernels are kept
in ``<cache>/predict/decompositions.json``, so a later ``aiot predict fit`` learns from the runs
of a user's model that ``aiot predict -m`` read once, though records never name its path.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
from pathlib import Path

import aiot.models as zoo
from aiot.converters.source import load_user_model
from aiot.core.errors import UnknownName, UsageError
from aiot.core.fileio import sha256_file, write_text_atomic
from aiot.core.paths import cache_dir
from aiot.host.predict import blocks
from aiot.host.predict.decompose import Decomposition, decompose
from aiot.models.model_ref import ARTIFACT, CODE, PROGRAM, ZOO, ModelRef

log = logging.getLogger(__name__)

#: Bumped when :mod:`aiot.host.predict.decompose` cuts kernels differently (the cache's key).
DECOMPOSE_VERSION = 1
#: A collected kernel's file: ``aiot_<version>_<factory>.pt2``, ``version`` the first 8 hex
#: digits of the sha256 of :mod:`aiot.host.predict.blocks` (a changed kernel is another model).
_KERNEL = re.compile(r"^aiot_(?P<version>[0-9a-f]{8})_(?P<factory>[a-z0-9_]+)\.pt2$")


def predict_dir() -> Path:
    """``<cache>/predict``: the kernels' programs and the decompositions (made again at will)."""
    folder = cache_dir() / "predict"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def kernel_version() -> str:
    """This aiot's kernels' version: the start of :mod:`aiot.host.predict.blocks`'s sha256."""
    return hashlib.sha256(Path(blocks.__file__).read_bytes()).hexdigest()[:8]


def kernel_program(factory: str) -> Path:
    """The ``torch.export`` program of a kernel in the cache, exported once (kept after: a
    program's bytes differ between exports, and its sha256 is what its records name).

    A program, not the factory as the user's code: aiot loads a program in its own process,
    where a factory runs in a child process for each check and each conversion (about 2 s of
    Python and PyTorch start-up each, longer than a small kernel's whole run).
    """
    import torch

    folder = predict_dir() / "kernels"
    path = folder / f"aiot_{kernel_version()}_{factory}.pt2"
    if not path.is_file():
        folder.mkdir(exist_ok=True)
        torch.manual_seed(0)  # the weights are the same in every export
        module, example = blocks.build(factory)
        staged = path.with_name(f".{os.getpid()}.{path.name}")  # torch wants the .pt2 suffix
        torch.export.save(torch.export.export(module, (example,)), staged)
        os.replace(staged, path)
    return path


def kernel_of(model: str | None) -> tuple[str, str] | None:
    """``(version, factory)`` of a collected kernel's model name (its program's file name),
    else None."""
    found = _KERNEL.match(model or "")
    return (found["version"], found["factory"]) if found else None


def kernel_name(model: str | None) -> str | None:
    """The factory of a kernel of this aiot's version, else None."""
    found = kernel_of(model)
    return found[1] if found and found[0] == kernel_version() else None


def of_reference(ref: ModelRef) -> Decomposition:
    """The kernels of a resolved model reference (a zoo model, the user's code or program).

    Raises:
        UsageError: an artifact file (no PyTorch graph to read), a binarized or quantized model,
            or one that ``torch.export`` cannot read.
    """
    if ref.kind == ARTIFACT:
        raise UsageError(f"{ref.name} is {ref.format} artifact: prediction reads a PyTorch graph",
                         "give the model it was converted from (a zoo name, file.py:factory or a .pt2)")
    if ref.binarize or ref.quantize:
        raise UsageError(f"{ref.label()} is binarized or quantized: its kernels are not collected",
                         "predict its full-precision model")
    factory = kernel_name(ref.name) if ref.kind == PROGRAM else None
    if factory is not None:
        return _kernel(factory, ref.label())
    if ref.kind == ZOO:
        return _zoo(ref.name)
    if ref.kind in (CODE, PROGRAM):
        return _cached(f"{ref.kind}|{ref.name}|{ref.sha256}", lambda: _user(ref), ref.label())
    raise UsageError(f"cannot read the kernels of {ref.label()}")


def of_record(record) -> Decomposition | str:
    """The kernels of the model a stored run measured, or why they cannot be had here."""
    source = (record.provenance or {}).get("source") or {}
    kind, sha = source.get("kind"), (record.spec or {}).get("model_sha256") or source.get("sha256")
    kernel = kernel_of(record.model)
    if kernel is not None:
        if kernel[0] != kernel_version():
            return "a kernel of another aiot's kernels"
        try:
            return _kernel(kernel[1], record.model)
        except ValueError:
            return "not a kernel name of this aiot"
    if kind == ZOO or (kind is None and sha is None):
        try:
            return _zoo(record.model)
        except UsageError as exc:
            return exc.message
    if kind == ARTIFACT:
        return "an artifact file (no PyTorch graph)"
    found = _read().get(_full(f"{kind}|{record.model}|{sha}"))
    if found is None:
        return "a user's model not read here yet (aiot predict -m FILE reads it once)"
    return Decomposition.from_dict(found)


def family(model: str) -> str:
    """A model's family for held-out evaluation: a zoo model's architecture without its
    depth or width (``resnet18_cifar`` and ``resnet50`` are both ``resnet``), a collected
    kernel's ``kernels``, any other model its own name."""
    if kernel_of(model) is not None:
        return "kernels"
    try:
        base = zoo.get_model_spec(model).family
    except UnknownName:  # not a zoo model: a user's file is its own family
        return model
    found = re.match(r"[a-z]+", base)
    return found.group() if found else base


def _kernel(factory: str, label: str) -> Decomposition:
    """A kernel of this aiot's version, built from :mod:`aiot.host.predict.blocks`."""
    return _cached(f"kernel|{factory}|{kernel_version()}", lambda: blocks.build(factory), label)


def _zoo(name: str) -> Decomposition:
    import torch

    try:
        spec = zoo.get_model_spec(name)
    except UnknownName:
        raise UsageError(f"{name} is not a zoo model of this aiot") from None
    with torch.device("meta"):  # shapes only: no weights allocated or initialised
        model = spec.build()
    source = Path(sys.modules[type(model).__module__].__file__)
    key = f"zoo|{name}|{sha256_file(source)}|{spec.input.shape}"

    def build():
        with torch.device("meta"):
            return spec.build(), torch.empty(1, *spec.input.shape)

    return _cached(key, build, name)


def _user(ref: ModelRef):
    user = load_user_model(ref)
    return user.model, user.example


def _cached(key: str, build, label: str) -> Decomposition:
    """The decomposition kept under ``key``, else ``build()``'s ``(model, example)`` read and kept."""
    full = _full(key)
    kept = _read()
    if full in kept:
        return Decomposition.from_dict(kept[full])
    model, example = build()
    try:
        found = decompose(model, example)
    except ValueError as exc:
        raise UsageError(f"cannot read the kernels of {label}: {exc}",
                         "a model must export with torch.export to be predicted") from None
    kept = _read()  # another process may have added entries meanwhile
    kept[full] = found.to_dict()
    try:
        write_text_atomic(_cache_path(), json.dumps(kept))
    except OSError as exc:  # a cache that cannot be written costs time, never the answer
        log.debug("decompositions not kept: %s", exc)
    return found


def _full(key: str) -> str:
    """A cache key with what else decides a decomposition (this module's cut, torch's export)."""
    import torch

    return f"{key}|v{DECOMPOSE_VERSION}|torch {torch.__version__}"


def _cache_path() -> Path:
    return predict_dir() / "decompositions.json"


def _read() -> dict:
    try:
        data = json.loads(_cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
