"""A model's inputs as its runtime reads them, checked against what the user gives, up front.

The signature (each input's name, dtype, shape with -1 for a dynamic dim, quantization) is
read by the device agent's own ``inspect`` command with the runtime that will run the file,
here on the host, so a dynamic dim without ``--input-shape``, a ``--inputs`` file that lacks
an input or holds the wrong dtype, or a file its runtime refuses, is one line before any run
instead of a failed record per device.
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path

from aiot.host.errors import ArtifactError, UsageError

log = logging.getLogger(__name__)


class RefusedArtifact(ArtifactError):
    """The user's artifact file is refused by its runtime: input to fix, not a failure."""

    exit_code = 2


def read_npz(path: Path) -> dict:
    """``{name: array}`` of a ``--inputs`` file (no pickles: arrays only).

    Raises:
        UsageError: missing, not a .npz, damaged, or holding object arrays.
    """
    import zipfile

    import numpy as np

    path = Path(path)
    if not path.is_file():
        raise UsageError(f"--inputs file {path} does not exist", "check the path")
    try:
        with np.load(path, allow_pickle=False) as found:
            if not isinstance(found, np.lib.npyio.NpzFile):
                raise UsageError(f"--inputs file {path.name} is one array, not a .npz",
                                 "save it with numpy.savez(FILE, name=array, ...)")
            return {name: found[name] for name in found.files}
    except UsageError:
        raise
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        detail = str(exc).splitlines()[0][:120] if str(exc) else ""
        raise UsageError(f"--inputs file {path.name} is not a readable .npz of arrays "
                         f"({type(exc).__name__}: {detail})",
                         "save it with numpy.savez(FILE, name=array, ...) (no object arrays)"
                         ) from None


def check_run_inputs(request) -> dict | None:
    """Refuse, before any run, what the model's inputs make impossible; returns the signature
    of a user's artifact (None where aiot converts the model, whose inputs it knows).

    Raises:
        UsageError: a data set for a model that is not a zoo image classifier, an unresolved
            dynamic dim, a ``--input-shape`` that does not fit, a ``--inputs`` mismatch.
        ArtifactError: the runtime refuses the file.
    """
    user_model = request.model_path is not None or ":" in request.model
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
    check_inputs(request.model, signature, artifact_shapes(request, signature), npz)
    return signature


def is_artifact_file(request) -> bool:
    """Whether the request names a user's artifact file (measured as it is)."""
    path = request.model_path
    return path is not None and path.suffix != ".py" and not _is_program(path)


def artifact_signature(request) -> dict | None:
    """The declared inputs and outputs of a request's artifact file (None: not a file, or
    timed by a native tool or emit-only), read by the runtime that runs it; cached."""
    if request.native or not is_artifact_file(request):
        return None
    from aiot.converters import get_converter

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


def check_shape_names(shapes: dict | None, signatures: list[dict], converts: bool) -> None:
    """Every ``--input-shape`` name is an input with a dynamic dim of some artifact in the
    sweep (a model aiot converts takes its one shape whatever the name)."""
    if not shapes or converts or not signatures:
        return
    dynamic = set().union(*(_dynamic_names(sig) for sig in signatures))
    unknown = [n for n in shapes if n not in dynamic]
    if unknown:
        names = sorted(dynamic)
        raise UsageError(f"no model here has an input '{unknown[0]}' with a dynamic dim "
                         f"(dynamic inputs: {', '.join(names) or 'none'})",
                         "--input-shape sets dynamic dims only; aiot models info FILE lists "
                         "each input's shape")


def _is_program(path: Path) -> bool:
    from aiot.host.model_ref import detect_format

    return detect_format(path) == "pt2"


@functools.lru_cache(maxsize=16)
def _loaded(reference: str, sha256: str | None, binarize: str | None, shapes_json: str) -> None:
    from aiot.converters.source import load_user_model
    from aiot.host.model_ref import resolve_model

    del sha256  # part of the cache key: an edited file is loaded again
    load_user_model(resolve_model(reference, binarize), json.loads(shapes_json))


def _check_loads(request) -> None:
    """Import the user's code and call the factory once (cached): its errors are the
    user's to fix, before any run rather than in a failed record per device and format."""
    _loaded(request.reference(), request.model_sha256, request.binarize,
            json.dumps(request.shapes(), sort_keys=True))


def check_inputs(model: str, signature: dict, shapes: dict | None, npz: dict | None) -> None:
    """The user's ``--input-shape`` and ``--inputs`` against the artifact's inputs."""
    inputs = signature["inputs"]
    names = [i["name"] for i in inputs]
    listed = ", ".join(names) or "none"
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
            _check_override(model, name, dims, shapes[name])
            continue
        dynamic = [i for i, d in enumerate(dims) if d is None or d < 0]
        if dynamic:
            example = "x".join(str(d if d is not None and d >= 0 else 1) for d in dims) or "1"
            raise UsageError(f"input '{name}' has dynamic dims {dynamic}",
                             f"give --input-shape {name}={example} or --inputs FILE.npz")


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


def _check_override(model: str, name: str, dims: list, given) -> None:
    fits = len(dims) == len(given) and all(
        d is None or d < 0 or d == g for d, g in zip(dims, given, strict=True))
    if not fits:
        raise UsageError(f"--input-shape {name}={'x'.join(map(str, given))} does not fit "
                         f"{model}'s input '{name}' of shape {dims} (-1: any size)",
                         "only dynamic dims (-1) can be set")


@functools.lru_cache(maxsize=64)
def read_signature(backend: str, artifact: Path, sha256: str, shapes_json: str = "null") -> dict:
    """Inputs and outputs of ``artifact`` as the agent's runtime ``backend`` declares them
    (-1 for a dynamic dim).

    Cached per file content (``sha256``); runs in aiot's own interpreter, or in the
    toolchain that holds the runtime (LCE, ExecuTorch), as parity does. ``shapes_json``
    (``{name: dims}``) is for a lite-interpreter module without a signature of its own.

    Raises:
        ArtifactError: the runtime refuses the file.
    """
    from aiot.converters.parity import agent_events

    del sha256  # part of the cache key only
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
            raise RefusedArtifact(f"{Path(artifact).name}: {backend} refuses it: "
                                  f"{event['message']}",
                                  "check that the file is complete and of a version the "
                                  "runtime reads")
    raise ArtifactError(f"{Path(artifact).name}: the agent's inspect gave no signature",
                        "run with --verbose to see its output")
