"""A model's inputs and outputs, shape overrides, and the arrays a run feeds it.

Every backend session describes its model with the same entries (``inputs`` and ``outputs``)::

    {"name": "x", "shape": [-1, 8], "dtype": "float32", "quantization": None}

``shape`` has -1 for a dynamic dim, ``dtype`` is a NumPy dtype name (``"string"`` for a string
tensor, which NumPy cannot hold as such), and ``quantization`` is ``{"scale": float,
"zero_point": int}`` for an integer-quantized tensor, else None. Sessions also keep ``shapes``:
the concrete shape each input is set to now, still -1 where a dynamic dim is open.

The run spec may fix dynamic dims (``input_shapes``: ``{name: [dims]}``, :func:`resolve`) and
name a pushed ``.npz`` with one array per input (``inputs``, :func:`prepare`); otherwise the
inputs are generated from the spec's seed (:func:`generate`).

Standard library and NumPy only, like the rest of the agent.
"""

from __future__ import annotations

import hashlib

DYNAMIC = -1


class SpecError(ValueError):
    """The run spec is malformed (or does not fit the model it names)."""


def quantization(scale, zero_point) -> dict | None:
    """The ``quantization`` field of an entry: None unless ``scale`` is a positive number."""
    if scale is None or not float(scale) > 0:
        return None
    return {"scale": float(scale), "zero_point": int(zero_point or 0)}


def entry(name: str, shape, dtype, quant: dict | None = None) -> dict:
    """One signature entry; a dim that is not a non-negative int (None, a symbol) is -1."""
    import numpy as np

    dims = [int(d) if isinstance(d, (int, np.integer)) and int(d) >= 0 else DYNAMIC
            for d in shape]
    dtype_name = dtype if dtype == "string" else np.dtype(dtype).name
    return {"name": str(name), "shape": dims, "dtype": dtype_name, "quantization": quant}


def positional(kind: str, index: int) -> str:
    """The name of an input or output a runtime does not name (ExecuTorch, a lite module)."""
    return f"{kind}_{index}"


def export_order(outputs: list[dict]) -> list[int]:
    """Indexes of ``outputs`` in the order the model returned them.

    A runtime may list positionally named outputs sorted as text (a ``.tflite`` signature
    puts ``output_10`` before ``output_2``); names ``<stem>_<number>`` of one stem are put
    back in number order. Any other naming is the file's own order, kept as it is.
    """
    parts = [str(o["name"]).rpartition("_") for o in outputs]
    if len(parts) < 2 or len({p[0] for p in parts}) != 1 or not all(p[2].isdigit() for p in parts):
        return list(range(len(outputs)))
    return sorted(range(len(outputs)), key=lambda i: int(parts[i][2]))


def all_outputs(session, x):
    """One inference's every output, flattened and side by side in the order the model
    returned them (:func:`export_order`): a row of the agent's ``.npy`` predictions, and what
    the host's parity check compares (it splits them by size). ``x``: the one input's array,
    or a list of arrays, one per input in the session's order."""
    import numpy as np

    if isinstance(x, list):
        session.set_inputs(x)
    else:
        session.set_input(x)
    session.invoke()
    outputs = session.outputs_all()
    order = export_order(session.outputs) if len(session.outputs) == len(outputs) \
        else range(len(outputs))
    return np.concatenate([np.array(outputs[k], copy=True).reshape(-1) for k in order])


def example(shape) -> str:
    """``DxD`` for a ``--input-shape`` hint: the fixed dims, 1 in place of each dynamic one."""
    return "x".join(str(d if d >= 0 else 1) for d in shape) or "scalar"


def resolve(inputs: list[dict], input_shapes: dict | None) -> list[list[int]]:
    """The shape each input runs at: its declared dims, dynamic ones set by ``input_shapes``.

    Dims left dynamic stay -1 (the run's :func:`prepare` then needs an ``.npz``). Only a
    dynamic dim can be set: an override that changes a fixed dim would feed the model a shape
    it was not built for, so it is refused like one of the wrong rank.

    Raises:
        SpecError: an override names no input, or does not fit the input's shape.
    """
    shapes = [list(spec["shape"]) for spec in inputs]
    if not input_shapes:
        return shapes
    names = [spec["name"] for spec in inputs]
    for name, dims in input_shapes.items():
        if name not in names:
            raise SpecError(f"run spec field 'input_shapes' names '{name}', which is no input "
                            f"of the model (its inputs: {', '.join(names) or 'none'})")
        declared = shapes[names.index(name)]
        fits = len(dims) == len(declared) and all(
            d == DYNAMIC or d == g for d, g in zip(declared, dims))
        if not fits:
            raise SpecError(f"run spec field 'input_shapes' gives '{name}' shape {list(dims)}; "
                            f"the model's input '{name}' is {declared} (-1: a dynamic dim, the "
                            f"only kind an override can set)")
        shapes[names.index(name)] = [int(g) for g in dims]
    return shapes


def check_arrays(inputs: list[dict], arrays) -> None:
    """Raise ValueError unless there is one array per input (``set_inputs``' contract)."""
    if len(arrays) != len(inputs):
        names = ", ".join(spec["name"] for spec in inputs) or "none"
        raise ValueError(f"the model takes {len(inputs)} input(s) ({names}), got {len(arrays)}")


def _load_npz(path: str) -> dict:
    import zipfile

    import numpy as np

    try:
        found = np.load(path, allow_pickle=False)
    except OSError as exc:
        raise SpecError(f"run spec field 'inputs': cannot read {path} ({exc.strerror or exc})") \
            from None
    except (ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise SpecError(f"run spec field 'inputs': {path} is not a readable .npz of arrays "
                        f"({type(exc).__name__}: {str(exc)[:120]})") from None
    if not isinstance(found, np.lib.npyio.NpzFile):
        raise SpecError(f"run spec field 'inputs' must name a .npz of arrays; {path} holds "
                        "a single array")
    with found:
        others = [n for n in found.zip.namelist() if not n.endswith(".npy") and not n.endswith("/")]
        if others:  # NumPy hands such a member back as raw bytes (a pickle, say): not an array
            raise SpecError(f"run spec field 'inputs': {path} holds '{others[0][:60]}', which is "
                            "not a .npy array")
        try:
            return {name: found[name] for name in found.files}
        except (ValueError, zipfile.BadZipFile, EOFError) as exc:  # e.g. an object array
            raise SpecError(f"run spec field 'inputs': {path} is not a readable .npz of "
                            f"arrays ({type(exc).__name__}: {str(exc)[:120]})") from None


def _from_npz(spec: dict, shape: list[int], found: dict, path: str, batch: bool = False):
    """The user's array for input ``spec``, checked against its dtype and shape (with
    ``batch``, a stack of such inputs along a new first axis)."""
    import numpy as np

    name = spec["name"]
    if name not in found:
        raise SpecError(f"inputs file {path} has no array '{name}' (the model's inputs need "
                        f"one per name; the file holds: {', '.join(sorted(found)) or 'none'})")
    array = np.require(found[name], requirements="C")  # ascontiguousarray makes 0-d 1-d
    dims = list(array.shape[1:] if batch else array.shape)
    fits = array.dtype.name == spec["dtype"] and len(dims) == len(shape) and all(
        d == DYNAMIC or d == g for d, g in zip(shape, dims)) and (array.ndim > 0 or not batch)
    if not fits:
        given = f"{array.dtype.name} {list(array.shape)}"
        raise SpecError(f"input '{name}': the model takes {spec['dtype']} {shape} (-1: any "
                        f"size){', batch first' if batch else ''}, inputs file gives {given}")
    return array


def load_batches(inputs: list[dict], shapes: list[list[int]], path: str) -> list:
    """One array per input from the ``.npz`` at ``path``, each a batch of that input along a
    new first axis (``predict``: one inference per row), all of the same length.

    Raises:
        SpecError: an input missing, of the wrong dtype or row shape, or batches of
            different lengths.
    """
    found = _load_npz(path)
    arrays = [_from_npz(spec, shape, found, path, batch=True)
              for spec, shape in zip(inputs, shapes)]
    if len({len(a) for a in arrays}) > 1:
        sizes = ", ".join(f"{spec['name']}: {len(a)}" for spec, a in zip(inputs, arrays))
        raise SpecError(f"inputs file {path} holds batches of different lengths ({sizes})")
    return arrays


def generate(spec: dict, shape: list[int], rng, bounds: tuple[int, int] | None = None):
    """A seeded array for input ``spec`` of ``shape``, by element type.

    Floats are standard normal. A quantized int8/uint8 input draws uniformly over the whole
    range of its type: it stands for a real value's quantized image, any of which is valid.
    Other integer inputs are uniform in ``bounds`` where the model gives one (the size of
    the embedding an input indexes), else in [0, 10): they are usually indices or counts
    (embedding, gather, top-k, lengths), which must stay small to be in range for the model.
    Booleans are a fair coin.

    Raises:
        SpecError: an element type nothing sensible can be made up for (strings).
    """
    import numpy as np

    if spec["dtype"] == "string" or np.dtype(spec["dtype"]).kind not in "fiub":
        raise SpecError(f"input '{spec['name']}' holds {spec['dtype']}, which the agent cannot "
                        "make up: give --inputs FILE.npz")
    dtype = np.dtype(spec["dtype"])
    if dtype.kind == "f":
        return _filled(shape, dtype, rng.standard_normal)
    if dtype.kind == "b":
        return _filled(shape, np.dtype(bool), lambda n: rng.integers(0, 2, size=n))
    if spec["quantization"] is not None and dtype.name in ("int8", "uint8"):
        info = np.iinfo(dtype)
        return np.asarray(rng.integers(info.min, info.max, size=shape, endpoint=True,
                                       dtype=dtype))
    low, high = bounds or MADE_UP_INTS
    return _filled(shape, dtype, lambda n: rng.integers(low, high, size=n))


#: Values drawn at a time by :func:`_filled` (float64 or int64: 8 MiB).
_CHUNK = 1 << 20


def _filled(shape, dtype, draw):
    """An array of ``shape`` and ``dtype`` filled with ``draw(n)`` in chunks: the very values
    one draw of the whole shape gives (a Generator's stream does not depend on how it is cut),
    without that draw's float64/int64 copy of the whole input, 2 to 8 times its size."""
    import numpy as np

    out = np.empty(shape, dtype)
    flat = out.reshape(-1)  # a view: the array is new, so contiguous
    for start in range(0, flat.size, _CHUNK):
        flat[start:start + _CHUNK] = draw(min(_CHUNK, flat.size - start))
    return out


#: The range made-up integer inputs (neither quantized nor boolean) are drawn from.
MADE_UP_INTS = (0, 10)


def prepare(inputs: list[dict], shapes: list[list[int]], seed, npz_path: str | None,
            values: dict | None = None, ranges: dict | None = None):
    """``(arrays, used)``: one array per input, and the ``inputs`` block of a result.

    With ``npz_path`` every array comes from that file (``source`` "npz"), each under its
    input's name, with its dtype and a shape that fits (a dynamic dim takes the array's size).
    Otherwise each is generated (:func:`generate`, ``source`` "generated") from its own
    stream: the first float input from ``default_rng(seed)``, so a single-input float model
    gets the very input older agents made, and input ``i`` otherwise from
    ``default_rng([seed, i])``, so no input's values depend on another's shape. An input
    named in ``values`` is that number throughout (``source`` "given", its ``value``); a name
    that is no input of this model is another model's of the sweep, unless none of them is
    (a typo: refused). A made-up integer input says the range it was drawn from (``range``):
    the one ``ranges`` gives it (the model's: an embedding's size, ``range_from`` says so),
    else :data:`MADE_UP_INTS`.

    Raises:
        SpecError: a dynamic dim with neither an override nor a file; a file that lacks an
            input or gives the wrong dtype or shape; an input that cannot be generated.
    """
    import numpy as np

    found = _load_npz(npz_path) if npz_path else None
    arrays = []
    first_float = next((i for i, spec in enumerate(inputs)
                        if spec["dtype"] != "string" and np.dtype(spec["dtype"]).kind == "f"),
                       None)
    values = values or {}
    names = {spec["name"] for spec in inputs}
    if values and not names & set(values):  # a sweep's values may name other models' inputs
        unknown = sorted(values)
        raise SpecError(f"--input-value names no input of the model: {', '.join(unknown)} "
                        f"(its inputs: {', '.join(spec['name'] for spec in inputs) or 'none'})")
    for i, (spec, shape) in enumerate(zip(inputs, shapes)):
        if spec["name"] in values:
            arrays.append(_given(spec, shape, values[spec["name"]]))
            continue
        if found is not None:
            arrays.append(_from_npz(spec, shape, found, npz_path))
            continue
        dynamic = [k for k, d in enumerate(shape) if d == DYNAMIC]
        if dynamic:
            raise SpecError(f"input '{spec['name']}' has dynamic dims {dynamic}: give "
                            f"--input-shape {spec['name']}={example(shape)} or --inputs FILE.npz")
        rng = np.random.default_rng(seed if i == first_float else [seed, i])
        arrays.append(generate(spec, shape, rng, _bounds(ranges, spec)))
    used = [{"name": spec["name"], "shape": list(array.shape), "dtype": array.dtype.name,
             "quantization": spec["quantization"],
             "sha256": hashlib.sha256(array.tobytes()).hexdigest(),
             **_source(spec, array, found, values, ranges)}
            for spec, array in zip(inputs, arrays)]
    return arrays, used


def made_up_clause(used: list[dict]) -> str | None:
    """Where a run fails on inputs it made up, which integer ones were made up and how to give
    them (``--input-value``); None when no integer input was made up."""
    made = [u for u in used if u.get("range") and not u.get("range_from")]
    if not made:
        return None
    names = ", ".join(f"'{u['name']}' {u['dtype']} {list(u['shape'])}" for u in made)
    return (f"the model failed on made-up values in [{made[0]['range'][0]}, "
            f"{made[0]['range'][1]}) for integer input {names} (give real ones: --input-value "
            f"{made[0]['name']}=NUMBER or --inputs FILE.npz)")


def _given(spec: dict, shape: list[int], value):
    """Input ``spec`` at ``shape`` filled with the user's ``value`` (``--input-value``)."""
    import numpy as np

    if DYNAMIC in shape:
        raise SpecError(f"input '{spec['name']}' has dynamic dims: give --input-shape "
                        f"{spec['name']}={example(shape)} with its --input-value")
    dtype = np.dtype(spec["dtype"])
    array = np.full(shape, value, dtype=dtype)
    if array.size and float(array.reshape(-1)[0]) != float(value):
        raise SpecError(f"--input-value {spec['name']}={value} does not fit its {dtype.name}")
    return array


def _bounds(ranges: dict | None, spec: dict) -> tuple[int, int] | None:
    """The model's range for input ``spec`` (``prepare``'s ``ranges``), or None."""
    given = (ranges or {}).get(spec["name"])
    return tuple(given["range"]) if given else None


def _source(spec: dict, array, found, values: dict, ranges: dict | None = None) -> dict:
    """Where an input's values came from, as the result's ``inputs`` block says it."""
    if spec["name"] in values:
        return {"source": "given", "value": values[spec["name"]]}
    if found is not None:
        return {"source": "npz"}
    if array.dtype.kind in "iu" and spec["quantization"] is None:
        model = _bounds(ranges, spec)
        if model is not None:
            return {"source": "generated", "range": list(model),
                    "range_from": ranges[spec["name"]].get("range_from") or "model"}
        return {"source": "generated", "range": list(MADE_UP_INTS)}
    return {"source": "generated"}


def validate_overrides(value) -> None:
    """Check the run spec's ``input_shapes``: null or ``{name: [positive ints]}``."""
    if value is None:
        return
    ok = isinstance(value, dict) and all(
        isinstance(name, str) and name and isinstance(dims, list) and all(
            isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims)
        for name, dims in value.items())
    if not ok:
        raise SpecError(f"run spec field 'input_shapes' must map input names to lists of "
                        f"positive integers (or be null), got {value!r}")
