"""A shape that runs, proposed for an input whose dims the file leaves free.

A hint of 1 for every free dim is not one: a detector fed 1x3x1x1 fails inside the graph
(ONNX Runtime's Concat of feature maps that no longer line up), so the proposal reads what
the file says about itself first (ONNX ``metadata_props`` such as Ultralytics' ``imgsz``;
symbolic dim names such as ``batch``, ``height``, ``width``, ``sequence``) and only then
falls back to typical sizes, saying which it did.
"""

from __future__ import annotations

import ast
import logging
import re
from pathlib import Path

log = logging.getLogger(__name__)

#: Typical sizes where the file says nothing: an image classifier's 224 (a multiple of 32,
#: as every stride-32 backbone needs), a YOLO-style detector's 640 (its input is "images"),
#: a transformer's 128 tokens.
IMAGE_SIDE, DETECTOR_SIDE, SEQUENCE = 224, 640, 128

_BATCH = re.compile(r"^(n|b|bs|batch.*|.*_batch|num_images|unk__\d+)$", re.I)
_HEIGHT = re.compile(r"(^h$|height|^rows?$)", re.I)


def onnx_facts(path: Path | None) -> tuple[dict, dict[str, list[str]]]:
    """``(metadata_props, {input: [dim names]})`` of an ONNX file (empty when unreadable or
    ONNX is not installed)."""
    if path is None or Path(path).suffix.lower() != ".onnx":
        return {}, {}
    try:
        import onnx

        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - a hint falls back to typical sizes
        log.debug("no ONNX facts for %s: %s", path, exc)
        return {}, {}
    meta = {p.key: p.value for p in model.metadata_props}
    names = {i.name: [d.dim_param for d in i.type.tensor_type.shape.dim]
             for i in model.graph.input}
    return meta, names


def _imgsz(meta: dict) -> tuple[int, int] | None:
    """Ultralytics' ``imgsz`` (``"[640, 640]"`` or ``"640"``) as ``(height, width)``."""
    text = meta.get("imgsz") or meta.get("img_size") or meta.get("image_size")
    if not text:
        return None
    try:
        value = ast.literal_eval(str(text))
    except (ValueError, SyntaxError):
        return None
    if isinstance(value, int):
        value = [value, value]
    if (isinstance(value, (list, tuple)) and len(value) == 2
            and all(isinstance(v, int) and v > 0 for v in value)):
        return int(value[0]), int(value[1])
    return None


def _spatial(dims: list[int], names: list[str]) -> tuple[int, int] | None:
    """Indices of (height, width) of an image-like rank-4 input, NCHW or NHWC."""
    if len(dims) != 4:
        return None
    if any(_HEIGHT.search(n or "") for n in names):
        h = next(i for i, n in enumerate(names) if _HEIGHT.search(n or ""))
        return (h, h + 1) if h + 1 < 4 else None
    if dims[1] in (1, 3, 4):
        return 2, 3
    if dims[3] in (1, 3, 4):
        return 1, 2
    return None


def _batch_names(all_names: dict[str, list[str]]) -> set[str]:
    """Symbolic names the file gives the batch: those of the inputs' first dims (an RNN's
    state ``[layers, N, hidden]`` shares its ``N`` with the audio's ``[N, samples]``)."""
    return {names[0] for names in all_names.values() if names and names[0]}


def _is_state_batch(dims: list[int], i: int) -> bool:
    """Dim ``i`` is the batch of a recurrent state laid out as PyTorch's LSTM/GRU keep it,
    ``[layers x directions, N, hidden]``: rank 3, a fixed first dim of 2 to 8 (1 would be a
    batch of one before a free sequence, ``[1, T, features]``), a fixed last."""
    return len(dims) == 3 and i == 1 and 2 <= dims[0] <= 8 and dims[2] > 0


def propose(spec: dict, path: Path | None = None, facts=None) -> tuple[list[int], str]:
    """``(dims, why)``: a shape for ``spec`` (an input of the agent's signature, -1 for a
    free dim) that a model of its kind runs at, and where its sizes came from."""
    dims = [int(d) if d is not None else -1 for d in spec["shape"]]
    meta, all_names = facts if facts is not None else onnx_facts(path)
    names = all_names.get(spec["name"]) or [""] * len(dims)
    names = (names + [""] * len(dims))[:len(dims)]
    out = list(dims)
    sources: list[str] = []
    batch_names = _batch_names(all_names)
    for i, d in enumerate(dims):
        if d < 0 and (i == 0 or _BATCH.match(names[i] or "-") or names[i] in batch_names
                      or _is_state_batch(dims, i)):
            out[i] = 1  # the batch
    spatial = _spatial(dims, names)
    if spatial and any(out[i] < 0 for i in spatial):
        h, w = spatial
        from_meta = _imgsz(meta)
        if from_meta:
            sizes, why = from_meta, "imgsz in the model's metadata"
        elif out[h] > 0 or out[w] > 0:  # a text line: 48 high, 4 times as wide
            fixed = max(out[h], out[w])
            sizes = (fixed, 4 * fixed) if out[h] > 0 else (4 * fixed, fixed)
            why = "a guess: 4 times the fixed side, as text recognizers take"
        else:
            side = DETECTOR_SIDE if "image" in spec["name"].lower() else IMAGE_SIDE
            sizes, why = (side, side), f"a guess: a typical {side}x{side} image"
        for index, size in zip(spatial, sizes):
            if out[index] < 0:
                out[index] = size
        sources.append(why)
    for i, d in enumerate(out):
        if d < 0:
            out[i] = SEQUENCE
            role = names[i] or f"dim {i}"
            sources.append(f"a guess: {SEQUENCE} for {role}")
    return out, "; ".join(dict.fromkeys(sources)) or "the batch set to 1"
