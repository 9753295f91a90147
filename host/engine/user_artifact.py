"""A user's artifact file measured as it is: what a run records in place of a conversion."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aiot.converters import get_converter
from aiot.converters.naming import artifact_files
from aiot.core.companions import artifact_identity
from aiot.core.errors import UsageError
from aiot.core.fileio import sha256_file
from aiot.models.model_ref import detect_format

#: What the record says of parity for a file aiot did not convert.
NO_PARITY = {"checked": False, "reason": "a user's artifact: no PyTorch original to compare with"}


@dataclass(frozen=True)
class UserArtifact:
    """The fields of a :class:`~aiot.converters.api.ConversionResult` a run reads."""

    artifact: Path
    sha256: str
    size_bytes: int  # every file of it (a Caffe2 predict net with its init net)
    parity: dict
    seconds: float = 0.0
    cached: bool = True


def user_artifact(request) -> tuple[UserArtifact, dict] | None:
    """``(artifact, sidecar-like facts)`` for a request naming an artifact file, else None
    (the file is the user's code or a ``.pt2`` program, which convert).

    Raises:
        UsageError: the file is gone, or changed since the sweep that names it was planned.
    """
    path = Path(request.model_path)
    if path.suffix == ".py":
        return None
    if not path.is_file():
        raise UsageError(f"model file {path.name} is gone", "restore it or name another file")
    fmt = detect_format(path)
    if fmt == "pt2":
        return None
    sha, _files = artifact_identity(path, fmt)  # with an ONNX model's data files
    if request.model_sha256 and sha != request.model_sha256:
        raise UsageError(f"{path.name} changed since this sweep was planned",
                         "run the command again to measure the new file")
    files = artifact_files(get_converter(fmt), path)
    artifact = UserArtifact(path, sha, sum(f.stat().st_size for f in files), dict(NO_PARITY))
    source = {"kind": "artifact", "name": path.name, "sha256": sha, "format": fmt}
    if len(files) > 1:  # the data files it needs, each by its name beside it and its hash
        source["files"] = [{"name": f.resolve().relative_to(path.resolve().parent).as_posix(),
                            "sha256": sha256_file(f), "size_bytes": f.stat().st_size}
                           for f in files]
    facts = {"format": fmt, "converter": None, "toolchain": None, "parity": artifact.parity,
             "source": source, "input": None}
    return artifact, facts
