"""Preprocessed dataset shards for on-device accuracy: ``x.npy`` (float32) and ``y.npy`` (int64)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from aiot.core.fileio import write_atomic
from aiot.models.model_ref import resolve_model


def _save_npy_atomic(path: Path, array) -> None:
    import numpy as np

    write_atomic(path, lambda tmp: np.save(tmp, array, allow_pickle=False))


def prepare_shard(model: str, dataset: str, limit: int | None, seed: int,
                  cache_root: Path) -> tuple[Path, Path]:
    """The test split of ``dataset`` preprocessed for ``model``'s input spec, cached on disk.

    Returns:
        Paths of ``x.npy`` and ``y.npy``; the folder name hashes model input spec and dataset
        selection, so a change of either makes a new shard.
    """
    from aiot.models import get_model_spec
    from aiot.models.datasets import dataset_fingerprint, load_dataset

    spec = get_model_spec(resolve_model(model, quantized_ok=True).name)  # tiny_cnn_lsq8: tiny_cnn's
    key = json.dumps({"input": spec.input.to_dict(),
                      "data": dataset_fingerprint(dataset, "test", limit, seed)}, sort_keys=True)
    folder = cache_root / "shards" / hashlib.sha256(key.encode()).hexdigest()[:16]
    x_path, y_path = folder / "x.npy", folder / "y.npy"
    if x_path.exists() and y_path.exists():
        return x_path, y_path
    folder.mkdir(parents=True, exist_ok=True)
    x, y = load_dataset(dataset, spec.input, split="test", limit=limit, seed=seed)
    _save_npy_atomic(y_path, y)
    _save_npy_atomic(x_path, x)
    return x_path, y_path
