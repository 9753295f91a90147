"""A model's inputs as its runtime reads them, checked against what the user gives, up front.

The signature (each input's name, dtype, shape with -1 for a dynamic dim, quantization) is
read by the device agent's own ``inspect`` command with the runtime that will run the file,
here on the host, so a dynamic dim without ``--input-shape``, a ``--inputs`` file that lacks
an input or holds the wrong dtype, or a file its runtime refuses, is one line before any run
instead of a failed record per device.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import math
from pathlib import Path
from typing import NamedTuple

from aiot.converters import get_converter
from aiot.converters.parity import agent_events
from aiot.converters.source import load_user_model
from aiot.core.errors import ArtifactError, UsageError, first_line
from aiot.core.isolation import isolated
from aiot.core.quiet import toolchain_output_to_log
from aiot.device_agent import backends
from aiot.device_agent.backends.tflite_io import custom_ops
from aiot.host.engine.shape_guess import propose
from aiot.models.model_ref import detect_format, resolve_model

log = logging.getLogger(__name__)


class RefusedArtifact(ArtifactError):
    """The user's artifact file is refused by its runtime: input to fix, not a failure."""

    exit_code = 2


class NpzMember(NamedTuple):
    """One array of a ``--inputs`` file as its ``.npy`` header declares it (not loaded)."""

    shape: tuple
    dtype: object  # numpy.dtype

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def read_npz(path: Path) -> dict[str, NpzMember]:
    """``{name: NpzMember}`` of a ``--inputs`` file, from each member's ``.npy`` header only:
    a compressed member is never inflated to learn its shape (a few MB of zip can declare
    gigabytes), and nothing but arrays is accepted (no pickles, no other files).

    Raises:
        UsageError: missing, not a .npz, damaged, a member that is not a ``.npy`` array or
            holds Python objects, or arrays larger than :data:`MAX_INPUT_BYTES` together.
    """
    import zipfile

    path = Path(path)
    if not path.is_file():
        raise UsageError(f"--inputs file {path} does not exist", "check the path")
    hint = "save it with numpy.savez(FILE, name=array, ...) (no object arrays)"
    try:
        with path.open("rb") as head:
            if head.read(6) == b"\x93NUMPY":
                raise UsageError(f"--inputs file {path.name} is one array, not a .npz",
                                 "save it with numpy.savez(FILE, name=array, ...)")
        with zipfile.ZipFile(path) as archive:
            members = {}
            for info in archive.infolist():
                if info.is_dir():
                    continue
                name = info.filename.removesuffix(".npy")
                members[name] = _npy_header(archive, info, path.name)
    except UsageError:
        raise
    except (ValueError, OSError, zipfile.BadZipFile, EOFError, NotImplementedError) as exc:
        detail = first_line(str(exc), 120)
        raise UsageError(f"--inputs file {path.name} is not a readable .npz of arrays "
                         f"({type(exc).__name__}: {detail})", hint) from None
    total = sum(m.nbytes for m in members.values())
    if total > MAX_INPUT_BYTES:
        raise UsageError(f"--inputs file {path.name} declares {_gib(total)} of arrays, more "
                         f"than the {_gib(MAX_INPUT_BYTES)} one inference may take",
                         "check the arrays' shapes")
    return members


def _npy_header(archive, info, file_name: str) -> NpzMember:
    """Shape and dtype of one zip member from its ``.npy`` header (the first bytes only)."""
    import numpy as np

    shown = "".join(c if c.isprintable() else "?" for c in info.filename[:60])
    if not info.filename.endswith(".npy"):
        raise UsageError(f"--inputs file {file_name}: member '{shown}' is not a .npy array "
                         "(a pickle or another file)",
                         "save the inputs with numpy.savez(FILE, name=array, ...) only")
    with archive.open(info) as member:
        if member.read(6) != b"\x93NUMPY":
            raise UsageError(f"--inputs file {file_name}: member '{shown}' is not a .npy array "
                             "(a pickle or another file named .npy)",
                             "save the inputs with numpy.savez(FILE, name=array, ...) only")
        version = tuple(member.read(2))
        readers = {(1, 0): np.lib.format.read_array_header_1_0,
                   (2, 0): np.lib.format.read_array_header_2_0}
        if version not in readers:
            raise ValueError(f"member '{shown}' has .npy format version {version}")
        shape, _fortran, dtype = readers[version](member)
    if dtype.hasobject:
        raise UsageError(f"--inputs file {file_name}: array '{shown.removesuffix('.npy')}' holds "
                         "Python objects (loading it would unpickle them)",
                         "save plain numeric arrays: numpy.savez(FILE, name=array.astype(...))")
    return NpzMember(tuple(shape), dtype)


def check_run_inputs(request) -> dict | None:
    """Refuse, before any run, what the model's inputs make impossible; returns the signature
    of a user's artifact (None where aiot converts the model, whose inputs it knows).

    Raises:
        UsageError: a data set for a model that is not a zoo image classifier, an unresolved
            dynamic dim, a ``--input-shape`` that does not fit, a ``--inputs`` mismatch.
        ArtifactError: the runtime refuses the file.
    """
    user_model = request.model_path is not None or ":" in request.model
    if not (user_model and is_artifact_file(request)) and request.shapes():
        # aiot converts the model: it is traced (and run) at these shapes, in float32.
        check_input_bytes(request.model, {n: (d, "float32") for n, d in request.shapes().items()})
    if request.dataset and user_model:
        raise UsageError(f"--dataset measures a zoo image classifier's accuracy; "
                         f"{request.model} is your own model",
                         "drop --dataset (latency needs none), or name a zoo model")
    if user_model and not is_artifact_file(request):
        _check_loads(request)
        return None  # it converts: aiot knows the inputs of what it makes
    signature = artifact_signature(request)
    if signature is None:
        return None
    npz = read_npz(request.inputs) if request.inputs else None
    shapes = artifact_shapes(request, signature)
    check_inputs(request.model, signature, shapes, npz, request.model_path)
    if npz is None:  # generated on the device: each input's bytes at its dtype
        check_input_bytes(request.model, {
            i["name"]: ((shapes or {}).get(i["name"], i["shape"]), i["dtype"])
            for i in signature["inputs"]})
    return signature


#: The most bytes the inputs of one inference may take when aiot makes them up (or traces a
#: model at ``--input-shape``): beyond it a typo (an extra digit) would be tried on every
#: device and fail there for want of memory, if it did not take the device down first.
MAX_INPUT_BYTES = 2 << 30


def check_input_bytes(model: str, inputs: dict[str, tuple[list[int], str]]) -> None:
    """Refuse inputs (``{name: (dims, dtype)}``) whose bytes at their own dtype add up to more
    than :data:`MAX_INPUT_BYTES`; a dynamic dim (-1) counts as 1, a string input as nothing."""
    import numpy as np

    sizes = {}
    for name, (dims, dtype) in inputs.items():
        if dtype == "string":
            continue
        sizes[name] = math.prod(max(int(d), 1) for d in dims) * np.dtype(dtype).itemsize
    total = sum(sizes.values())
    if total <= MAX_INPUT_BYTES:
        return
    name = max(sizes, key=sizes.get)
    dims, dtype = inputs[name]
    raise UsageError(f"the inputs of {model} would take {_gib(total)} per inference (input "
                     f"'{name}' {'x'.join(map(str, dims))} {dtype}: {_gib(sizes[name])}), more "
                     f"than the {_gib(MAX_INPUT_BYTES)} aiot makes up for one run",
                     "check --input-shape for a typo, or give the inputs as --inputs FILE.npz")


def _gib(size: int) -> str:
    return f"{size / 2**30:,.1f} GiB" if size >= 2**30 else f"{size / 2**20:,.1f} MiB"


def is_artifact_file(request) -> bool:
    """Whether the request names a user's artifact file (measured as it is)."""
    path = request.model_path
    return path is not None and path.suffix != ".py" and not _is_program(path)


def artifact_signature(request) -> dict | None:
    """The declared inputs and outputs of a request's artifact file (None: not a file, or
    timed by a native tool or emit-only), read by the runtime that runs it; cached."""
    if request.native or not is_artifact_file(request):
        return None
    backend = get_converter(request.format).backend
    if backend is None:
        return None  # emit-only: a native tool times it, with its own flags
    sha = request.model_sha256 or ""
    try:
        return read_signature(backend, request.model_path, sha)
    except UsageError:
        if backend != "pytorch_mobile" or not request.shapes():
            raise
    # A lite-interpreter module saved without aiot's description declares no inputs: the
    # user's shapes are its signature, every one of them the user's to set.
    found = read_signature(backend, request.model_path, sha,
                           json.dumps(request.shapes(), sort_keys=True))
    return {**found, "declares_no_inputs": True}


def _dynamic_names(signature: dict) -> set[str]:
    """Inputs whose shape the user may set: those with a dynamic dim (all of a module that
    declares no inputs)."""
    return {i["name"] for i in signature["inputs"]
            if signature.get("declares_no_inputs") or any(d < 0 for d in i["shape"])}


def artifact_shapes(request, signature: dict | None) -> dict | None:
    """The ``--input-shape`` values for this artifact: those naming an input with a dynamic
    dim. A sweep's shapes may be meant for its other models; a fixed input runs as it is
    (a name that fits no model of the sweep is refused up front)."""
    shapes = request.shapes()
    if not shapes or signature is None:
        return None
    dynamic = _dynamic_names(signature)
    return {name: dims for name, dims in shapes.items() if name in dynamic} or None


def _is_program(path: Path) -> bool:
    return detect_format(path) == "pt2"


@functools.lru_cache(maxsize=16)
def _loaded(reference: str, sha256: str | None, binarize: str | None, shapes_json: str) -> None:
    del sha256  # part of the cache key: an edited file is loaded again
    # Rebuilding the factory's module here imports the libraries its classes come from
    # (transformers, and torchao under it): what they print on import is for --verbose.
    with toolchain_output_to_log(log):
        load_user_model(resolve_model(reference, binarize), json.loads(shapes_json))


def _check_loads(request) -> None:
    """Import the user's code and call the factory once (cached): its errors are the
    user's to fix, before any run rather than in a failed record per device and format."""
    _loaded(request.reference(), request.model_sha256, request.binarize,
            json.dumps(request.shapes(), sort_keys=True))


def check_inputs(model: str, signature: dict, shapes: dict | None, npz: dict | None,
                 path: Path | None = None) -> None:
    """The user's ``--input-shape`` and ``--inputs`` against the artifact's inputs; an input
    left with free dims is refused with a shape proposed from the file (``path``)."""
    inputs = signature["inputs"]
    names = [i["name"] for i in inputs]
    listed = ", ".join(names) or "none"
    free = []  # (spec, dims, free dim indices): every one named in one refusal
    for spec in inputs:
        name, dims = spec["name"], list(spec["shape"])
        given = (npz or {}).get(name)
        if npz is not None and given is None:
            raise UsageError(f"--inputs has no array '{name}' for {model} (its inputs: {listed})",
                             f"add it: numpy.savez(FILE, {name}=..., ...)")
        if given is not None:
            _check_array(model, spec, given)
            continue
        if shapes and name in shapes:
            _check_override(model, spec, shapes[name], path)
            continue
        dynamic = [i for i, d in enumerate(dims) if d is None or d < 0]
        if dynamic:
            free.append((spec, dims, dynamic))
    if free:
        raise _free_dims(model, free, path)


class FreeDims(UsageError):
    """Inputs of one model left with free dims: each with the shape proposed for it.

    Attributes:
        model: the model as the run names it.
        free: ``(input name, dims, free dim indices, proposed dims, why)`` per input.
    """

    def __init__(self, model: str, free: list[tuple[str, list, list, list, str]]) -> None:
        self.model, self.free = model, free
        super().__init__(self.what(), f"give {' '.join(self.flags())} ({self.why()}) or "
                                      "--inputs FILE.npz")

    def __reduce__(self):  # its arguments, not its message (a lab node's error is pickled)
        return FreeDims, (self.model, self.free)

    def what(self) -> str:
        """``input 'x' of m.onnx has dynamic dims [0, 3] (shape [-1, 3, 48, -1])``."""
        if len(self.free) == 1:
            (name, dims, dynamic, _, _), = self.free
            return f"input '{name}' of {self.model} has dynamic dims {dynamic} (shape {dims})"
        return f"{len(self.free)} inputs of {self.model} have dynamic dims: " + ", ".join(
            f"'{name}' {dims} (free: {dynamic})" for name, dims, dynamic, _, _ in self.free)

    def flags(self, scope: str | None = None) -> list[str]:
        """A whole ``--input-shape`` per input, ``MODEL:NAME=DxD`` with ``scope``."""
        prefix = f"{scope}:" if scope else ""
        return [f"--input-shape {prefix}{name}={'x'.join(map(str, proposed)) or '1'}"
                for name, _, _, proposed, _ in self.free]

    def why(self) -> str:
        """Where the proposed sizes came from."""
        return "; ".join(dict.fromkeys(why for *_, why in self.free))


def _free_dims(model: str, free: list, path: Path | None) -> FreeDims:
    """One refusal naming every input left with free dims, a whole ``--input-shape`` for each
    (a model of three such inputs is fixed in one try, not three)."""
    return FreeDims(model, [(spec["name"], dims, dynamic, *propose(spec, path))
                            for spec, dims, dynamic in free])


def free_dims_refusal(refused: list[FreeDims]) -> UsageError:
    """The refusals of the models of a run of several models as one: every model's free dims,
    each shape scoped to its model (``MODEL:NAME=DxD``: a bare ``x=…`` would set the ``x`` of
    every model that has it free)."""
    what = "; ".join(f.what() for f in refused)
    flags = [flag for f in refused for flag in f.flags(scope=f.model)]
    why = "; ".join(dict.fromkeys(f.why() for f in refused))
    return UsageError(f"{len(refused)} models have free input dims: {what}" if len(refused) > 1
                      else what, f"give {' '.join(flags)} ({why}) or --inputs MODEL:FILE.npz")


def _check_array(model: str, spec: dict, array) -> None:
    name, dims, dtype = spec["name"], list(spec["shape"]), spec["dtype"]
    if str(array.dtype) != dtype:
        raise UsageError(f"--inputs array '{name}' is {array.dtype}; {model}'s input '{name}' "
                         f"takes {dtype}", f"save it as {dtype}: array.astype('{dtype}')")
    fixed_ok = len(array.shape) == len(dims) and all(
        d is None or d < 0 or d == s for d, s in zip(dims, array.shape, strict=True))
    if not fixed_ok:
        raise UsageError(f"--inputs array '{name}' has shape {list(array.shape)}; {model}'s input "
                         f"'{name}' takes {dims} (-1: any size)", "save it in the model's shape")


def _check_override(model: str, spec: dict, given, path: Path | None) -> None:
    name, dims = spec["name"], list(spec["shape"])
    text = f"--input-shape {name}={'x'.join(map(str, given))}"
    if len(dims) != len(given):
        example = "x".join(map(str, propose(spec, path)[0])) or "scalar"
        raise UsageError(f"{text} has {len(given)} dims, but {model}'s input '{name}' has "
                         f"rank {len(dims)} (shape {dims}, -1: any size): the rank is wrong",
                         f"give {len(dims)} dims, e.g. {name}={example}")
    fixed = [i for i, (d, g) in enumerate(zip(dims, given, strict=True))
             if d is not None and d >= 0 and d != g]
    if fixed:
        raise UsageError(f"{text} does not fit {model}'s input '{name}' of shape {dims} "
                         f"(-1: any size): dim {fixed[0]} is fixed at {dims[fixed[0]]}",
                         "only dynamic dims (-1) can be set; keep the others")


@functools.lru_cache(maxsize=64)
def read_signature(backend: str, artifact: Path, sha256: str, shapes_json: str = "null") -> dict:
    """Inputs and outputs of ``artifact`` as the agent's runtime ``backend`` declares them
    (-1 for a dynamic dim).

    Cached per file content (``sha256``); read in a forked child of aiot's interpreter, or
    in the toolchain that holds the runtime (LCE, ExecuTorch), as parity does
    (:func:`~aiot.converters.parity.agent_events`). ``shapes_json`` (``{name: dims}``) is
    for a lite-interpreter module without a signature of its own.

    Raises:
        ArtifactError: the runtime refuses the file; ``RuntimeCrash`` (exit status 2) where
            it crashed, was killed or hung reading it.
    """
    del sha256  # part of the cache key only
    declared = _declared_signature(backend, Path(artifact))
    if declared is not None:
        return declared
    spec = {"artifact": str(Path(artifact).resolve())}
    if json.loads(shapes_json):
        spec["input_shapes"] = json.loads(shapes_json)
    events = agent_events(backend, "inspect", spec)
    for event in events:
        if event["event"] == "signature":
            return {"inputs": event["inputs"], "outputs": event["outputs"]}
        if event["event"] == "error" and event.get("type") == "SpecError":
            raise UsageError(f"{Path(artifact).name}: {event['message']}")  # says what to give
        if event["event"] == "error":
            raise _custom_op_refusal(backend, Path(artifact)) or RefusedArtifact(
                f"{Path(artifact).name}: {backend} refuses it: {event['message']}",
                "check that the file is complete and of a version the runtime reads")
    raise ArtifactError(f"{Path(artifact).name}: the agent's inspect gave no signature",
                        "run with --verbose to see its output")


def declared_reader(backend: str):
    """The backend's reader of a file's declared inputs and outputs that needs no runtime
    (``declared_signature(path) -> (inputs, outputs)``: ExecuTorch's), or None."""
    if backend not in backends.MODULES:
        return None
    module = importlib.import_module(backends.MODULES[backend], backends.__name__)
    return getattr(module, "declared_signature", None)


def _declared_signature(backend: str, artifact: Path) -> dict | None:
    """The signature the backend reads from the file itself, without its runtime (ExecuTorch:
    starting its toolchain's interpreter costs seconds); parsed in a forked child, as a
    runtime would be. None: the backend has no such reader.

    Raises:
        RefusedArtifact: the file is not a program of the backend's format.
        RuntimeCrash: the reader died or hung on the file.
    """
    read = declared_reader(backend)
    if read is None:
        return None
    found = json.loads(isolated(functools.partial(_declared_text, read, str(artifact.resolve())),
                                file=artifact.name, runtime=backend))
    if "error" in found:
        raise RefusedArtifact(f"{artifact.name}: {backend} refuses it: {found['error']}",
                              "check that the file is complete and of a version the "
                              "runtime reads")
    return found


def _declared_text(read, path: str) -> str:
    """``read(path)``'s inputs and outputs as JSON (in the child), or why it refused them."""
    try:
        inputs, outputs = read(path)
    except (OSError, ValueError) as exc:
        return json.dumps({"error": first_line(str(exc)) or "unreadable"})
    return json.dumps({"inputs": inputs, "outputs": outputs})


#: Custom ops LiteRT's builtin resolver registers itself (tensorflow/lite/kernels/register.cc).
_RESOLVED_CUSTOM = frozenset({"TFLite_Detection_PostProcess", "Mfcc", "AudioSpectrogram"})


def _custom_op_refusal(backend: str, artifact: Path) -> RefusedArtifact | None:
    """Why a refused ``.tflite`` cannot load, read from the file rather than the runtime's
    log: the custom ops it uses that the runtime does not define, named with what could
    run them. None: not a flatbuffer, or no such op (the refusal has another cause).

    The operator table is parsed in a forked child, as the runtime's own read is."""
    if backend not in ("litert", "lce"):
        return None
    found = json.loads(isolated(functools.partial(_custom_ops_text, str(artifact.resolve())),
                                file=artifact.name, runtime=backend))
    unknown = [op for op in found if op not in _RESOLVED_CUSTOM
               and not (backend == "lce" and op.startswith("Lce"))]
    if not unknown:
        return None
    one = len(unknown) == 1
    names = ", ".join(f"'{op}'" for op in unknown)
    runtime = "LiteRT" if backend == "litert" else "LCE"
    if backend == "litert" and all(op.startswith("Lce") for op in unknown):
        hint = ("Larq Compute Engine defines it: drop --format to run the file with LCE "
                "(aiot toolchains install lce)")
    elif all(op.startswith("Flex") for op in unknown):
        hint = ("a TensorFlow op (select TF ops) needs the Flex delegate, which aiot's "
                "runtimes lack: convert the model again with TFLite builtin ops only")
    else:
        hint = ("it needs the runtime that defines it (a delegate or a LiteRT build that "
                "registers it), or convert the model again without it")
    return RefusedArtifact(f"{artifact.name}: {backend} cannot load it: custom "
                           f"op{'' if one else 's'} {names} {'is' if one else 'are'} not among "
                           f"{runtime}'s builtin ops", hint)


def _custom_ops_text(path: str) -> str:
    """The custom op names of the ``.tflite`` at ``path`` as JSON (in the child); [] when
    the file is not a readable flatbuffer."""
    try:
        with open(path, "rb") as fh:
            return json.dumps(custom_ops(fh.read()))
    except (OSError, ValueError):
        return "[]"
