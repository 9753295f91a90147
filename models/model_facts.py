"""Parameter and MAC counts of zoo models, cached on disk.

Counting needs a forward pass through each model (seconds for ImageNet-size ones), so the
numbers are cached under the cache dir, keyed by a hash of the zoo's source files: editing a
model invalidates its count.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from aiot.core.errors import MissingDependency
from aiot.core.fileio import write_text_atomic
from aiot.core.paths import cache_dir

log = logging.getLogger(__name__)
#: The counts of a model whose builder needs an optional package that is not installed.
UNKNOWN = {"params": None, "macs": None}


def _zoo_source_hash() -> str:
    digest = hashlib.sha256()
    for item in sorted(resources.files("aiot.models").iterdir(), key=lambda p: p.name):
        if item.name.endswith(".py"):
            digest.update(item.name.encode() + item.read_bytes())
    return digest.hexdigest()[:16]


def _cache_file() -> Path:
    return cache_dir() / f"complexity-{_zoo_source_hash()}.json"


def complexities(names: list[str], on_step: Callable[[str], None] | None = None) -> dict[str, dict]:
    """``{name: {"params": int, "macs": int}}`` for zoo models, counting only uncached ones.

    A model that needs a package that is not installed (EfficientNet-Lite0) gets None counts,
    which are not cached: the listing works without it and counts it once it is installed.
    """
    from aiot.models import get_model_spec

    path = _cache_file()
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        cache = {}
    missing = [n for n in names if n not in cache]
    for name in missing:
        if on_step:
            on_step(name)
        try:
            c = get_model_spec(name).complexity()
        except MissingDependency as exc:
            log.info("%s is listed without counts: %s", name, exc.message)
            continue
        cache[name] = {"params": int(c.params), "macs": int(c.macs)}
    if missing:
        write_text_atomic(path, json.dumps(cache))
    return {n: cache.get(n, UNKNOWN) for n in names}
