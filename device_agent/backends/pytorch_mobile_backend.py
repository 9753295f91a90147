"""PyTorch Mobile backend (``.ptl``): PyTorch's lite interpreter, on a device with torch.

Placement (:func:`module_placement`): the operators the module's bytecode calls, XNNPACK's
prepacked ones (``prepacked::conv2d_clamp_run``, what ``optimize_for_mobile`` makes) against
aten's; a torch built without XNNPACK (the x86 CPU wheels) runs every operator on aten, which
is that build's engine, not a fallback.
"""

from __future__ import annotations

import io
import json
import pickle
import zipfile
from collections import Counter

from ..signature import SpecError, check_arrays, entry, positional
from .base import SessionBase, installed_from, placement_entry

#: Package names the runtime ships as (see ``installed_version``).
DISTRIBUTIONS = ("torch",)

NAME = "pytorch_mobile"
EXTENSIONS = (".ptl",)
TOOLCHAIN = None  # the runtime is in aiot's own environment
NO_PROFILER = None  # a ProfiledBackend: see PROFILER
INPUT_FILE = "aiot_input.json"  # written into the artifact by aiot's ptl converter


def version() -> str | None:
    """The installed torch version, or None."""
    try:
        import torch
    except Exception:
        return None
    return torch.__version__


def installed_version() -> str | None:
    """The runtime's installed version, from package metadata (nothing imported)."""
    return installed_from(DISTRIBUTIONS)


def input_meta(path: str) -> dict | None:
    """The input description the converter stored in the artifact (a zip archive), or None
    for a lite module that aiot did not make.

    Raises:
        ValueError: not a zip archive (so not a lite module at all).
    """
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.endswith("/extra/" + INPUT_FILE)]
            return json.loads(archive.read(names[0])) if names else None
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{path} is not a lite-interpreter module ({exc})") from None


def _inputs(path: str, meta: dict | None, input_shapes: dict | None) -> list[dict]:
    """The module's inputs: from aiot's ``extra/aiot_input.json``, else from ``input_shapes``
    (float32 assumed), since a lite module declares neither names nor shapes.

    Raises:
        SpecError: a foreign module without ``input_shapes``.
    """
    if meta is not None:
        if isinstance(meta.get("inputs"), list):  # several inputs, described one by one
            return [entry(i["name"], i["shape"], i.get("dtype", "float32"))
                    for i in meta["inputs"]]
        return [entry(meta.get("name", "input"), meta["shape"], meta.get("dtype", "float32"))]
    names = forward_arguments(path)
    missing = [n for n in names if n not in (input_shapes or {})]
    if missing:
        raise SpecError(f"{path} has no extra/{INPUT_FILE} (it was not made by aiot), so the "
                        f"shapes of its forward({', '.join(names)}) are unknown: give "
                        + " ".join(f"--input-shape {n}=DxD" for n in missing)
                        + " (float32 assumed)")
    # Shapes for other names are another model's in the same sweep: each input takes its own.
    return [entry(name, input_shapes[name], "float32") for name in names]


def forward_arguments(path: str) -> list[str]:
    """The names of a lite module's ``forward`` arguments (without ``self``), read from the
    TorchScript code ``_save_for_lite_interpreter`` keeps beside the bytecode.

    Calling a lite module with another number of tensors than its forward takes crashes the
    process (SIGSEGV in torch 2.13), so the count must be known before the first call.
    """
    import torch

    try:
        scripted = torch.jit.load(path, map_location="cpu")
    except Exception as exc:  # noqa: BLE001 - a bytecode-only file: no schema to read
        raise ValueError(f"{path}: cannot read its forward's arguments ({exc})") from None
    arguments = scripted.forward.schema.arguments
    return [a.name for a in arguments if a.name != "self"]


def _flatten(out) -> list:
    """The module's result as a flat list of tensors (a tensor, or nested tuples/lists/dicts)."""
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in _flatten(item)]
    if isinstance(out, dict):
        return [t for item in out.values() for t in _flatten(item)]
    return [out]


class Session(SessionBase):
    """One loaded module; inputs are set once and ``invoke`` runs it.

    A lite module declares no outputs either: ``outputs`` is empty until the first
    ``invoke``, after which it lists what came out (``output_0``, ...).
    """
    def __init__(self, path: str, threads: int, input_shapes: dict | None = None) -> None:
        import torch
        from torch.jit.mobile import _load_for_lite_interpreter

        # Intra-op threads, as for the other backends; the process runs one model.
        torch.set_num_threads(threads)
        meta = input_meta(path)
        inputs = _inputs(path, meta, input_shapes)
        self._torch = torch
        self._path = path
        self._module = _load_for_lite_interpreter(path)
        if meta is None:  # the shapes made the signature; those of other names are not ours
            input_shapes = {i["name"]: i["shape"] for i in inputs}
        self._declare(inputs, [], input_shapes)
        self._x = None
        self._out = None

    def set_inputs(self, arrays) -> None:
        check_arrays(self.inputs, arrays)
        self._x = [self._torch.from_numpy(a) for a in arrays]

    def invoke(self) -> None:
        with self._torch.no_grad():
            self._out = self._module(*self._x)

    def placement(self) -> dict:
        """XNNPACK's prepacked operators against aten's, from the module's bytecode."""
        return module_placement(bytecode_ops(self._path),
                                bool(self._torch._C._is_xnnpack_enabled()))

    def profile_start(self) -> None:
        """Record every operator the lite interpreter dispatches from here on, with the
        shapes of its inputs (``torch.autograd.profiler``)."""
        self._profiler = self._torch.autograd.profiler.profile(record_shapes=True)
        self._profiler.__enter__()

    def profile_stop(self) -> list[dict]:
        """One row per operator call, with its self CPU time in µs.

        A lite module keeps no layer names, so an operator at distinct input shapes (each
        convolution of a CNN) is told apart by them. Self time, not total: ``aten::conv2d``
        calls ``aten::_convolution`` calls the kernel, and totals would count it three times.
        """
        self._profiler.__exit__(None, None, None)
        rows = []
        for event in self._profiler.function_events:
            shapes = [s for s in (event.input_shapes or []) if s]
            where = f" [{'x'.join(map(str, shapes[0]))}]" if shapes else ""
            rows.append({"name": event.name + where, "type": event.name,
                         "us": float(event.self_cpu_time_total)})
        return rows

    def outputs_all(self) -> list:
        import numpy as np

        arrays = [t.numpy() if hasattr(t, "numpy") else np.asarray(t) for t in _flatten(self._out)]
        if not self.outputs:
            self.outputs = [entry(positional("output", i), list(a.shape), a.dtype)
                            for i, a in enumerate(arrays)]
        return arrays


class _Opaque(dict):
    """Whatever a pickle builds from a global (tensors, storages): nothing of it is made,
    so reading the bytecode runs no code of the file."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def __setstate__(self, state) -> None:
        pass

    def append(self, item) -> None:
        pass

    def extend(self, items) -> None:
        pass


class _Bytecode(pickle.Unpickler):
    def find_class(self, module, name):
        return _Opaque

    def persistent_load(self, pid):
        return None


def bytecode_ops(path: str) -> dict[str, int]:
    """How many times the module's methods call each operator (``OP``/``OPN`` instructions of
    ``bytecode.pkl``, by ``name.overload``).

    Raises:
        ValueError: not a lite-interpreter module, or no bytecode in it.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.endswith("/bytecode.pkl")]
            if not names:
                raise ValueError(f"{path} has no bytecode.pkl")
            table = _Bytecode(io.BytesIO(archive.read(names[0]))).load()
    except (zipfile.BadZipFile, pickle.UnpicklingError, EOFError) as exc:
        raise ValueError(f"{path}: unreadable bytecode ({exc})") from None
    calls: Counter = Counter()
    for method in table[1:] if isinstance(table, tuple) else ():
        parts = method[1] if isinstance(method, tuple) and len(method) > 1 else ()
        found = dict(p for p in parts if isinstance(p, tuple) and len(p) == 2)
        operators = [f"{op[0]}.{op[1]}" if op[1] else op[0] for op in found.get("operators", ())]
        for instruction in found.get("instructions", ()):
            if instruction[0] in ("OP", "OPN") and 0 <= instruction[1] < len(operators):
                calls[operators[instruction[1]]] += 1
    return dict(calls)


def module_placement(ops: dict[str, int], xnnpack: bool) -> dict:
    """The placement of a module calling ``ops`` (:func:`bytecode_ops`) on a torch with or
    without XNNPACK (``torch._C._is_xnnpack_enabled()``)."""
    total = sum(ops.values())
    if not xnnpack:
        return placement_entry("aten", "module bytecode", total=total, delegated=total,
                               note="this torch is built without XNNPACK: every operator runs "
                                    "on aten's CPU kernels, as this build always does")
    prepacked = {op: n for op, n in ops.items() if op.startswith("prepacked::")}
    return placement_entry("xnnpack", "module bytecode", total=total,
                           delegated=sum(prepacked.values()),
                           outside={op: n for op, n in sorted(ops.items()) if op not in prepacked})


def open(path: str, threads: int, input_shapes: dict | None = None) -> Session:  # noqa: A001
    """Load ``path`` for inference with ``threads`` intra-op threads (``input_shapes``: the
    inputs of a lite module aiot did not make, ``{name: dims}``)."""
    return Session(path, threads, input_shapes)


PROFILER = "PyTorch profiler (torch.autograd.profiler, self CPU time per operator)"
#: The lite interpreter needs nothing at load time to be profiled.
open_profiled = open
