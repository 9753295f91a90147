"""The one place aiot turns pickled bytes from a file into objects: weights-only, or not at all.

Python's pickle runs whatever a file tells it to, so a weights file, a checkpoint or a
``.pt2`` program from someone else could run code in aiot the moment it is loaded. Here
every such load goes through torch's weights-only unpickler, which builds tensors,
containers and numbers and refuses anything else; a file it refuses is a one-line
:class:`UnpicklingRefused` (exit 2) that names the file and never repeats torch's advice to
load it unsafely. ``torch.export.load`` unpickles several members of a ``.pt2`` and retries
a failed safe load unsafely, so :func:`load_program` checks each of those members first,
refuses compiled code and Python-object constants, and keeps torch to weights-only loads
while it reads the archive. torch is imported inside the functions (core stays light).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import threading
import zipfile
from pathlib import Path
from typing import Any

from aiot.core.errors import UsageError
from aiot.core.untrusted import visible

#: What every refusal suggests for a state dict or checkpoint.
STATE_DICT_HINT = "save plain tensors: torch.save(model.state_dict(), path)"
#: ... and for an exported program.
PROGRAM_HINT = ("export it again with torch.export.save from a module whose weights and "
                "inputs are plain tensors, or give its code as file.py:factory")

_LOAD_LOCK = threading.RLock()  # one thread swaps torch.load at a time (a nested block: its own)


class UnpicklingRefused(UsageError):
    """A file holds pickled objects that are not plain tensors, or code; aiot will not load it."""


def load_tensors(source: str | os.PathLike[str] | bytes, label: str,
                 hint: str = STATE_DICT_HINT) -> Any:
    """``torch.load`` of ``source`` (a path or the file's bytes) with the weights-only unpickler.

    Args:
        label: how the message names the file, e.g. ``"weights file 'w.pt' for resnet18"``.
        hint: what to do instead (one line).

    Raises:
        UnpicklingRefused: the file holds something else than tensors, containers and numbers.
        Exception: whatever torch raises for a missing, truncated or foreign file (callers word it).
    """
    import pickle
    import warnings

    import torch

    target = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source
    try:
        with warnings.catch_warnings():  # torch warns about a pickle protocol it did not write
            warnings.simplefilter("ignore")
            return torch.load(target, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise UnpicklingRefused(f"{label} holds pickled data other than plain tensors "
                                f"({refusal_reason(exc)}), which aiot never loads: it could run code",
                                hint) from None


def refusal_reason(exc: BaseException) -> str:
    """What torch's weights-only unpickler refused, in a few words, without its advice to load
    the file unsafely (the name comes from the file, so control characters are written out)."""
    text = str(exc)
    found = re.search(r"GLOBAL (\S+) was not an allowed global", text) or re.search(
        r"WeightsUnpickler error:\s*([^\n]+)", text)
    if not found:
        return "not plain tensors"
    what = visible(found.group(1).strip().rstrip("."))[:120]
    if found.re.pattern.startswith("GLOBAL"):
        return f"it imports {what}"
    return f"refused by the weights-only loader: {what}"


def load_program(path: str | os.PathLike[str], name: str | None = None):
    """A ``torch.export`` program from ``path``, loaded without unpickling anything unsafe.

    The file is read once and every member torch would unpickle is checked on those same
    bytes before torch sees them (see :func:`check_program`); torch then loads them with
    weights-only forced, so its own fallback to an unsafe load cannot happen either.

    Raises:
        UnpicklingRefused: a member is not plain tensors, or the archive holds compiled code.
        Exception: whatever ``torch.export.load`` raises for a damaged or foreign archive.
    """
    import torch

    file = Path(path)
    label = name or file.name
    data = file.read_bytes()
    check_program(data, label)
    with weights_only_loads(), _quiet_export_log():
        return torch.export.load(io.BytesIO(data))


def check_program(data: bytes, label: str) -> None:
    """Refuse a ``.pt2`` (its bytes) that ``torch.export.load`` could not read weights-only.

    Every member under ``data/`` other than the payload configs and the raw tensors they name
    must load weights-only; Python-object constants, compiled AOTInductor code and the
    pre-2.7 layout (whose loader falls back to unsafe loads) are refused outright.
    """
    from torch.export.pt2_archive import constants as pt2
    from torch.export.pt2_archive._package import PT2ArchiveReader

    if _old_layout(data):
        raise UnpicklingRefused(f"{label} is a torch.export archive of the pre-2.7 layout, which "
                                "torch reads with unsafe unpickling", PROGRAM_HINT)
    try:
        reader = PT2ArchiveReader(io.BytesIO(data))
        names = reader.get_file_names()
    except Exception:  # noqa: BLE001 - not an archive at all: torch.export.load words that
        return
    for member in names:
        if member.startswith(pt2.AOTINDUCTOR_DIR):
            raise UnpicklingRefused(f"{label} holds compiled native code ({visible(member)[:120]}), "
                                    "which aiot never loads", PROGRAM_HINT)
    for member in sorted(_unpickled_members(reader, names, label, pt2)):
        load_tensors(reader.read_bytes(member), f"{label} (member {visible(member)[:120]})",
                     PROGRAM_HINT)


def _unpickled_members(reader, names: list[str], label: str, pt2) -> set[str]:
    """The members torch would unpickle, found as torch finds them (per program: its sample
    inputs, legacy weights and constants, payloads marked ``use_pickle``) and, in case a later
    torch reads more, any other member under ``data/`` that is not a payload list or a raw
    tensor one names."""
    present = set(names)
    configs, raw, pickled = set(), set(), set()
    prefix, suffix = pt2.MODELS_FILENAME_FORMAT.split("{}")
    programs = [m[len(prefix):-len(suffix)] for m in names if m.startswith(prefix) and m.endswith(suffix)]
    for model in programs:
        pickled |= {pt2.SAMPLE_INPUTS_FILENAME_FORMAT.format(model), f"{pt2.WEIGHTS_DIR}{model}.pt",
                    f"{pt2.CONSTANTS_DIR}{model}.pt"}
        for folder, config in ((pt2.WEIGHTS_DIR, pt2.WEIGHTS_CONFIG_FILENAME_FORMAT.format(model)),
                               (pt2.CONSTANTS_DIR, pt2.CONSTANTS_CONFIG_FILENAME_FORMAT.format(model))):
            if config in present:
                configs.add(config)
                for path_name, use_pickle in _payloads(reader, config, label, pt2):
                    # torch joins with os.path.join: the same string finds the same member
                    (pickled if use_pickle else raw).add(os.path.join(folder, path_name))
    others = {m for m in names if m.startswith("data/")} - configs - raw
    return (pickled & present) | others


def _payloads(reader, config: str, label: str, pt2) -> list[tuple[str, bool]]:
    """``(path name, use_pickle)`` of each entry of a payload list; Python-object constants
    (loaded by ``pickle.loads`` or TorchScript's object loader) are refused."""
    try:
        entries = [(str(e["path_name"]), bool(e.get("use_pickle")))
                   for e in json.loads(reader.read_string(config))["config"].values()]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UsageError(f"{label} is not a loadable torch.export program: its payload list "
                         f"{config} is damaged", PROGRAM_HINT) from None
    for path_name, _ in entries:
        if path_name.startswith((pt2.CUSTOM_OBJ_FILENAME_PREFIX, pt2.OPAQUE_OBJ_FILENAME_PREFIX)):
            raise UnpicklingRefused(f"{label} holds a Python object as a constant "
                                    f"({visible(path_name)[:80]}), which aiot never unpickles",
                                    PROGRAM_HINT)
    return entries


def _old_layout(data: bytes) -> bool:
    """Whether ``torch.export.load`` would take its pre-2.7 path (a top-level ``version``)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return "version" in archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError):
        return False


@contextlib.contextmanager
def weights_only_loads():
    """Make every ``torch.load`` in this process weights-only for the block, even one that asks
    for ``weights_only=False`` (torch.export's fallback does); restored after.

    ``torch.load`` itself is wrapped, read by torch.export at each call, rather than torch's
    ``TORCH_FORCE_WEIGHTS_ONLY_LOAD`` set in the environment: a process another thread starts
    meanwhile (a parallel sweep's local agent, a toolchain's converter) would inherit that.
    """
    import torch
    import torch.serialization

    with _LOAD_LOCK:
        original = torch.load, torch.serialization.load

        def forced(*args, **kwargs):
            kwargs["weights_only"] = True
            return original[1](*args, **kwargs)

        torch.load = torch.serialization.load = forced
        try:
            yield
        finally:
            torch.load, torch.serialization.load = original


@contextlib.contextmanager
def _quiet_export_log():
    """torch.export logs a traceback before its own fallback; the caller's one line says it."""
    import logging

    logger = logging.getLogger("torch.export")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)

