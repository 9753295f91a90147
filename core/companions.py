"""Models that are more than one file: an ONNX model's external data (``.onnx`` + ``.data``),
a Caffe2 predict net's init net (``.predict_net.pb`` + ``.init_net.pb``).

ONNX keeps large tensors outside the protobuf, in files its initializers name by a path
relative to the model (``location``). Such a model runs only with those files beside it, so
each of them is pushed next to it on the device and hashed into the model's identity (the
``sha256`` a record keeps): a changed ``.data`` file is another model. A path that leaves
the model's folder (absolute, or through ``..``) is refused, as ONNX Runtime refuses it.
"""

from __future__ import annotations

import hashlib
import mmap
from pathlib import Path

from aiot.core.errors import UsageError
from aiot.core.fileio import sha256_file

#: A Caffe2 model is a predict net with its init net (the weights) beside it.
PREDICT_SUFFIX, INIT_SUFFIX = ".predict_net.pb", ".init_net.pb"


def init_net_path(artifact: Path) -> Path:
    """``m.caffe2.predict_net.pb`` → ``m.caffe2.init_net.pb`` (else ``<stem>.init_net.pb``)."""
    artifact = Path(artifact)
    name = artifact.name
    stem = name[: -len(PREDICT_SUFFIX)] if name.endswith(PREDICT_SUFFIX) else artifact.stem
    return artifact.with_name(stem + INIT_SUFFIX)


def onnx_external_data(model: Path) -> list[Path]:
    """The external data files ``model`` names, in order of first use; none for a model that
    holds its tensors (the protobuf is parsed only when it mentions a ``location``).

    Raises:
        UsageError: a data file outside the model's folder, or missing.
    """
    model = Path(model)
    if not _mentions_location(model):
        return []
    import onnx

    try:
        proto = onnx.load(str(model), load_external_data=False)
    except Exception:  # noqa: BLE001 - not ONNX: detect_format says so in its own words
        return []
    folder = model.parent.resolve()
    found: dict[Path, None] = {}
    for tensor in _tensors(proto.graph):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        location = {e.key: e.value for e in tensor.external_data}.get("location", "")
        path = (folder / location).resolve()
        if not location or Path(location).is_absolute() or not path.is_relative_to(folder):
            raise UsageError(f"{model.name}: tensor '{tensor.name}' keeps its data in "
                             f"'{location}', outside the model's folder",
                             "keep the external data files beside the model (onnx.save_model "
                             "with a plain file name as location)")
        if not path.is_file():
            raise UsageError(f"{model.name}: tensor '{tensor.name}' keeps its data in "
                             f"'{location}', which is not there", "put the model's .data file "
                             "beside it, under the name it was saved with")
        found.setdefault(path)
    return list(found)


def files_sha256(files: list[Path]) -> str:
    """One file's own sha256; for several (a model and its data files), the sha256 of each
    file's name relative to the first one's folder and its sha256, one per line."""
    if len(files) == 1:
        return sha256_file(files[0])
    folder = Path(files[0]).resolve().parent
    lines = [f"{Path(f).resolve().relative_to(folder).as_posix()}\0{sha256_file(f)}\n" for f in files]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def artifact_identity(path: Path, fmt: str | None) -> tuple[str, list[Path]]:
    """``(sha256, files)`` of a user's artifact: every file it needs (an ONNX model's data
    files with it) and their joint hash, the identity its records keep."""
    files = [Path(path), *(onnx_external_data(path) if fmt == "onnx" else [])]
    return files_sha256(files), files


def _mentions_location(model: Path) -> bool:
    """Whether the file holds the bytes ``location`` (every external-data entry does)."""
    try:
        with open(model, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return data.find(b"location") >= 0
    except (OSError, ValueError):  # an empty file cannot be mapped
        return False


def _tensors(graph):
    """Every tensor of ``graph``: initializers, node attributes, subgraphs (If, Loop, Scan)."""
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from _tensors(attr.g)
            for sub in attr.graphs:
                yield from _tensors(sub)
