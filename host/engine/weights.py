"""Which weights a command runs a model with, and how a record names them.

``aiot train`` caches its weights (:func:`aiot.host.training.trainer.weights_file`); a later
``run``, ``sweep``, ``push``, ``convert`` or ``robust`` without ``--weights`` uses the
newest training of that model (and binarization) on the data set it measures, so the
accuracy of a trained model is never silently that of a random init. The choice is made
once, on the CLI, and travels with the run; every record says which weights it used:

- ``given``: ``--weights FILE``;
- ``trained``: the newest cached ``aiot train`` of the model on the data set;
- ``packaged``: the model's own pretrained file (e.g. EfficientNet-Lite0's ImageNet weights);
- ``random``: none of those, a seeded random init ("untrained (random init)");
- ``own``: a user's code or program, as its factory builds it.

Records name a weights file by its name and sha256, never by its host path.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from aiot.core.errors import AiotError
from aiot.core.fileio import sha256_file
from aiot.core.paths import weights_dir
from aiot.host.training.trainer import SUMMARY_VERSION
from aiot.models.model_ref import ZOO

log = logging.getLogger(__name__)

GIVEN, TRAINED, PACKAGED, RANDOM, OWN = "given", "trained", "packaged", "random", "own"
#: How a record describes weights of no training at all (the CLI warns when it measures
#: accuracy with them: the figure is chance level, not the model's).
UNTRAINED = "untrained (random init)"


@dataclass(frozen=True)
class TrainedWeights:
    """One finished ``aiot train`` found in the weights cache."""

    path: Path
    sha256: str
    dataset: str  # canonical
    test_accuracy: float | None
    key: str
    mtime_ns: int


@dataclass(frozen=True)
class WeightsChoice:
    """The weights a model runs with and where they came from (see the module doc)."""

    path: Path | None
    origin: str
    trained: TrainedWeights | None = None

    @property
    def untrained(self) -> bool:
        return self.origin == RANDOM

    def describe(self) -> str:
        """One line for messages: what a user would call these weights."""
        if self.origin == RANDOM:
            return UNTRAINED
        if self.origin == OWN:
            return "as the model's code builds it"
        name = self.path.name if self.path else "?"
        if self.origin == TRAINED:
            summary = _summary(self.path) if self.trained is None and self.path else None
            dataset = self.trained.dataset if self.trained else (summary or {}).get("config", {}).get("dataset")
            return f"trained on {dataset} ({name})" if dataset else f"trained ({name})"
        return f"{self.origin} ({name})"


def trained_weights(model: str, binarize: str | None = None, dataset: str | None = None,
                    folder: Path | None = None, quantize: str | None = None) -> list[TrainedWeights]:
    """Finished trainings of zoo ``model`` (with ``binarize``, or quantized with ``quantize``,
    ``lsq:4``) in the weights cache, newest first; only those on ``dataset`` when it is given.
    A training's weights fit only the model it trained: float, binarized or quantized alike.

    A training counts once its JSON summary (written last, after the weights) is there;
    summaries that cannot be read are skipped. Weights are checked against their sha256
    by :func:`choose_weights`, not here (hashing every file would be slow).
    """
    folder = Path(folder) if folder is not None else _cache_folder()
    if folder is None or not folder.is_dir():
        return []
    algorithm, quantization = _algorithm(binarize), _quantization(quantize)
    wanted = _canonical_dataset(dataset) if dataset else None
    found = []
    for summary_path in folder.glob("*.json"):
        try:
            summary = json.loads(summary_path.read_text(encoding="utf-8"))
            config = summary["config"]
            if (summary.get("v") != SUMMARY_VERSION or summary.get("model") != model
                    or _algorithm(config.get("binarize")) != algorithm
                    or _quantization(config.get("quantize")) != quantization):
                continue
            trained_on = _canonical_dataset(config["dataset"])
            weights = summary_path.with_name(summary["weights_file"])
            if (wanted and trained_on != wanted) or not weights.is_file():
                continue
            found.append(TrainedWeights(weights, summary["weights_sha256"], trained_on,
                                        summary.get("test_accuracy"), summary.get("key", ""),
                                        summary_path.stat().st_mtime_ns))
        except (OSError, ValueError, KeyError, TypeError, AiotError) as exc:
            log.debug("skipping training summary %s: %s", summary_path, exc)
    return sorted(found, key=lambda t: t.mtime_ns, reverse=True)


def choose_weights(ref, weights: Path | None = None, dataset: str | None = None) -> WeightsChoice:
    """The weights ``ref`` (a :class:`~aiot.models.model_ref.ModelRef`) runs with.

    ``--weights`` wins; a zoo model then takes the newest intact training of it on
    ``dataset`` (on any data set when none is measured: the model as the user trained it),
    then its packaged weights, then a seeded random init. A training on another data set is
    never used for accuracy on this one (its classes need not mean the same).
    """
    if weights is not None:
        return WeightsChoice(Path(weights), GIVEN)
    if ref.kind != ZOO:
        return WeightsChoice(None, OWN)
    for found in trained_weights(ref.name, ref.binarize, dataset, quantize=ref.quantize):
        if sha256_file(found.path) == found.sha256:
            return WeightsChoice(found.path, TRAINED, found)
        log.warning("cached weights %s do not match their training summary; not using them", found.path)
    from aiot.models import get_model_spec

    spec = get_model_spec(ref.name)
    if not ref.binarize and not ref.quantize and spec.default_weights is not None:
        return WeightsChoice(spec.weights_file(), PACKAGED)
    return WeightsChoice(None, RANDOM)


def weights_provenance(path: Path | None, origin: str | None, sha256: str | None = None) -> dict:
    """What a record keeps about its weights: origin, file name and sha256 (no host path),
    and for a cached training its data set and test accuracy."""
    if path is None:
        origin = origin if origin in (OWN, RANDOM) else RANDOM
        return {"origin": origin, "file": None, "sha256": None,
                "label": UNTRAINED if origin == RANDOM else "as the model's code builds it"}
    path = Path(path)
    facts = {"origin": origin or GIVEN, "file": path.name,
             "sha256": sha256 or (sha256_file(path) if path.is_file() else None)}
    summary = _summary(path)
    if summary is not None:
        facts["trained"] = {"dataset": summary["config"].get("dataset"),
                            "test_accuracy": summary.get("test_accuracy"),
                            "epochs": summary["config"].get("epochs"), "key": summary.get("key")}
    where = f" on {facts['trained']['dataset']}" if "trained" in facts else ""
    facts["label"] = {TRAINED: f"trained{where}, newest cached (default)", GIVEN: f"given{where}",
                      PACKAGED: "packaged pretrained"}.get(facts["origin"], facts["origin"])
    return facts


def _summary(path: Path) -> dict | None:
    """The training summary beside a weights file, if ``aiot train`` wrote it."""
    try:
        summary = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        return summary if summary.get("weights_file") == path.name and "config" in summary else None
    except (OSError, ValueError, AttributeError):
        return None


def _cache_folder() -> Path | None:
    """The weights cache, or None when it cannot be created (then there is nothing in it)."""
    try:
        return weights_dir()
    except AiotError:
        return None


def _algorithm(binarize: str | None) -> str | None:
    if not binarize:
        return None
    from aiot.models.bibench import get_algorithm

    return get_algorithm(binarize).name


def _quantization(quantize: str | None) -> str | None:
    """``lsq:4`` as ``aiot train --quantize`` records it (None: full precision)."""
    if not quantize:
        return None
    from aiot.models.quant.methods import parse_quantize

    return parse_quantize(quantize).option


def _canonical_dataset(name: str) -> str:
    from aiot.models.datasets.load import canonical_name

    return canonical_name(name)
