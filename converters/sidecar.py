"""The ``<artifact>.aiot.json`` sidecar: what an artifact is and where it came from."""

from __future__ import annotations

import json
from pathlib import Path

from aiot.core.errors import ArtifactError
from aiot.core.fileio import sha256_file, write_text_atomic

SIDECAR_SCHEMA = 1
SUFFIX = ".aiot.json"


def sidecar_path(artifact: Path) -> Path:
    """``model.tflite`` → ``model.tflite.aiot.json``."""
    return artifact.with_name(artifact.name + SUFFIX)


def write_sidecar_facts(artifact: Path, data: dict) -> tuple[Path, dict]:
    """Write the sidecar beside ``artifact`` atomically; returns its path and its contents as
    :func:`read_sidecar` would read them (parsed from the text written, not read back)."""
    path = sidecar_path(artifact)
    text = json.dumps({"schema": SIDECAR_SCHEMA, **data}, indent=2, sort_keys=True) + "\n"
    write_text_atomic(path, text)
    return path, json.loads(text)


def read_sidecar(artifact: Path) -> dict:
    """The sidecar of ``artifact``.

    Raises:
        ArtifactError: missing, unreadable, or of a newer schema.
    """
    path = sidecar_path(artifact)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ArtifactError(f"{artifact} has no sidecar ({path.name})",
                            "re-create it with: aiot convert MODEL --format FORMAT") from None
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"sidecar {path} is unreadable: {exc}") from None
    if not isinstance(data, dict) or data.get("schema", 0) > SIDECAR_SCHEMA:
        raise ArtifactError(f"sidecar {path} has an unknown schema", "upgrade aiot")
    return data


def verify_artifact(artifact: Path) -> dict:
    """Check the artifact's size and sha256 against its sidecar; returns the sidecar.

    Raises:
        ArtifactError: naming the file, if it is missing, truncated or altered.
    """
    artifact = Path(artifact)
    if not artifact.is_file():
        raise ArtifactError(f"artifact {artifact} does not exist")
    sidecar = read_sidecar(artifact)
    expected = sidecar.get("artifact", {})
    size = artifact.stat().st_size
    if size != expected.get("size_bytes"):
        raise ArtifactError(f"artifact {artifact} is {size} bytes, its sidecar says "
                            f"{expected.get('size_bytes')}: truncated or replaced",
                            "re-convert it with --fresh")
    if sha256_file(artifact) != expected.get("sha256"):
        raise ArtifactError(f"artifact {artifact} does not match the sha256 in its sidecar",
                            "re-convert it with --fresh")
    return sidecar
