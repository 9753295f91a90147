"""``serve``: one long-lived agent answering batched predict requests.

``serve`` keeps one process and one loaded model for many batched predictions, read from
stdin as JSON lines (see :func:`serve`): black-box attacks ask thousands of questions, and
starting Python, importing the runtime and loading the model per question would dominate.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import sys
import time

from . import AGENT_VERSION, backends
from .process import pin
from .spec import RunSpec
from .wire import emit, first_line

#: Element types a ``serve`` request's ``data`` may hold (little-endian on the wire).
WIRE_DTYPES = ("float32", "float16", "float64", "uint8", "int8", "int32", "int64")


class RequestError(ValueError):
    """A ``serve`` request is malformed: it gets an ``error`` reply and the session goes on."""


def serve(spec: RunSpec, requests=None) -> int:
    """Load the model once, then answer requests read one JSON object per line.

    Emits ``ready`` once the model is loaded. Each ``{"op": "predict", "id", "shape",
    "dtype", "data"}`` line (``data``: base64 of the little-endian array, batch first) gets a
    ``predictions`` line (one output row per input row) or, if the request is malformed or
    the runtime refuses it, an ``error`` line carrying its ``id``; either way the session
    keeps serving. ``{"op": "close"}`` or the end of the requests ends it with 0.
    A model that does not load raises, as in ``run``, and ``main`` reports it.

    Args:
        spec: a validated run spec (``backend``, ``artifact``, ``threads``, ``cpus``).
        requests: the request lines (bytes or str); stdin's when None.
    """
    import numpy as np

    backend = backends.load(spec.backend)
    pin(spec.cpus)
    session = backends.open_session(backend, spec)
    emit("ready", backend=backend.NAME, runtime_version=backend.version(),
         agent_version=AGENT_VERSION, threads=spec.threads,
         input_shape=list(session.input_shape), input_dtype=np.dtype(session.input_dtype).name)
    for line in sys.stdin.buffer if requests is None else requests:
        if not line.strip():
            continue
        reply = _answer(line, session)
        if reply is None:
            return 0
        event, fields = reply
        try:
            emit(event, **fields)
        except BrokenPipeError:  # the host went away: nobody is left to answer
            return 0
    return 0


def _answer(line: bytes | str, session) -> tuple[str, dict] | None:
    """The reply to one request line as ``(event, fields)``; None for ``close``."""
    request_id = None
    try:
        request = _request(line)
        if request.get("op") == "close":
            return None
        request_id = request.get("id")
        if not isinstance(request_id, (int, str)) or isinstance(request_id, bool):
            request_id = None
            raise RequestError("a request needs an integer or string 'id'")
        op = request.get("op")
        if op != "predict":
            raise RequestError(f"unknown op {op!r}; known: predict, close")
        return "predictions", {"id": request_id, **_predict_rows(session, _inputs(request, session))}
    except RequestError as exc:
        return "error", {"id": request_id, "type": "RequestError", "message": str(exc)}
    except Exception as exc:  # the runtime failed on this input; the model stays loaded
        return "error", {"id": request_id, "type": type(exc).__name__, "message": first_line(exc)}


def _request(line: bytes | str) -> dict:
    try:
        request = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RequestError(f"a request must be one JSON object per line: {exc}") from None
    if not isinstance(request, dict):
        raise RequestError("a request must be a JSON object")
    return request


def _inputs(request: dict, session):
    """The request's batch as ``(N, *input_shape)`` in the runtime's element type.

    Every row must have the model's own shape (``input_shape`` without its batch of 1):
    a mere element count would let an NHWC batch pass for an NCHW model unnoticed.
    """
    import numpy as np

    shape, dtype = request.get("shape"), request.get("dtype")
    if not isinstance(shape, list) or not shape or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise RequestError(f"'shape' must be a non-empty list of sizes, got {shape!r}")
    if dtype not in WIRE_DTYPES:
        raise RequestError(f"'dtype' must be one of {', '.join(WIRE_DTYPES)}, got {dtype!r}")
    row = list(session.input_shape[1:])
    if shape[1:] != row:
        raise RequestError(f"input rows of shape {shape[1:]}; the model takes {row} "
                           f"(input shape {list(session.input_shape)})")
    wire = np.dtype(dtype).newbyteorder("<")
    try:
        raw = base64.b64decode(request.get("data") or "", validate=True)
    except (binascii.Error, TypeError) as exc:
        raise RequestError(f"'data' is not base64: {exc}") from None
    if len(raw) != math.prod(shape) * wire.itemsize:
        raise RequestError(f"'data' holds {len(raw)} bytes; {shape} of {dtype} "
                           f"needs {math.prod(shape) * wire.itemsize}")
    batch = np.frombuffer(raw, wire).reshape(shape[0], *session.input_shape)
    return batch.astype(session.input_dtype)


def _predict_rows(session, batch) -> dict:
    """One inference per row (artifacts take a batch of 1); the ``predictions`` fields."""
    import numpy as np

    out = None
    compute_ns = 0
    for i, row in enumerate(batch):
        t0 = time.perf_counter_ns()
        result = session.run(np.ascontiguousarray(row))
        compute_ns += time.perf_counter_ns() - t0
        flat = np.asarray(result).reshape(-1)
        if out is None:
            out = np.empty((len(batch), flat.size), "<f4")
        out[i] = flat  # copied now: a runtime may reuse its output buffer on the next run
    out = np.zeros((0, 0), "<f4") if out is None else out
    return {"shape": list(out.shape), "dtype": "float32",
            "data": base64.b64encode(out.tobytes()).decode("ascii"), "compute_ms": compute_ns / 1e6}
