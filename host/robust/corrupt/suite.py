"""The natural-corruption suite: corrupt the uint8 images, preprocess, predict, score.

Every image set goes through the model's own preprocessing
(:func:`aiot.host.robust.data.model_input`) and then the predictor. With a format, the deployed
artifact's predictions are the ones scored and the PyTorch reference runs beside it on the same
inputs, so the result also says how often the two agree on corrupted images.

OM_robust needs a full-precision and a binarized model: ``CorruptConfig.compare_binarized`` names
the BiBench algorithm of a second model of the same architecture (its weights in
``compare_weights``), evaluated exactly like the target on the same corrupted images.

Unlabelled photos (``--dataset photos``) are first brought to the model's input size
(:mod:`.photos`), and each predictor's top-1 on the clean images is its label: every accuracy is
then top-1 agreement with the clean prediction, and the summary keys say so (``*_agreement``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from aiot.core.errors import UsageError
from aiot.host.robust.corrupt import imagenet_c, photos, sequences, summary
from aiot.host.robust.data import PHOTOS, eval_set, model_input
from aiot.host.robust.deployed import open_deployed
from aiot.host.robust.metrics import accuracy, flip_probability, flip_rate, mean_over
from aiot.host.robust.predictor import TorchPredictor, predict_labels
from aiot.host.robust.target import Target, reference_model

log = logging.getLogger(__name__)

# Rows per predictor call: 28-px inputs are 3 KiB, so larger batches cost little memory and
# save a round trip per batch on a device.
_BATCH = 256


@dataclass(frozen=True)
class CorruptConfig:
    """What one ``aiot robust corrupt`` run evaluates.

    Args:
        corruptions: ImageNet-C corruption names (see :data:`imagenet_c.CORRUPTIONS`).
        severities: severities in 1..5.
        dataset: test images (``fashion-mnist``, ``digits``, ``folder:PATH``) or the
            unlabelled ``photos`` (scored by agreement with the clean prediction).
        limit: images (a seeded, class-balanced subset; None: the whole test split).
        seed: seed of the subset, of every random corruption and of the sequences.
        frames: frames per perturbation sequence; None skips the flip probability.
        compare_binarized: BiBench algorithm of a binarized twin (OM_robust); None: no twin.
        compare_weights: the twin's state-dict file.
    """

    corruptions: tuple[str, ...] = imagenet_c.CORRUPTIONS
    severities: tuple[int, ...] = imagenet_c.SEVERITIES
    dataset: str = "fashion-mnist"
    limit: int | None = 200
    seed: int = 0
    frames: int | None = sequences.DEFAULT_FRAMES
    compare_binarized: str | None = None
    compare_weights: Path | None = None

    def to_dict(self) -> dict:
        return {"corruptions": list(self.corruptions), "severities": list(self.severities),
                "dataset": self.dataset, "limit": self.limit, "seed": self.seed,
                "frames": self.frames,
                "compare_binarized": self.compare_binarized,
                "compare_weights": str(self.compare_weights) if self.compare_weights else None}


def compare_target(target: Target, config: CorruptConfig) -> Target | None:
    """The binarized twin of a full-precision target, or None.

    Raises:
        UsageError: the target is binarized itself, twin weights come without an algorithm,
            the weights file does not exist, or the dataset has no labels.
    """
    if config.compare_binarized is None:
        if config.compare_weights is not None:
            raise UsageError("--compare-weights needs --compare-binarized ALG",
                             "name the algorithm the weights were trained with")
        return None
    if config.dataset.strip().lower() == PHOTOS:
        raise UsageError("--compare-binarized needs labelled images: OM_robust compares "
                         "accuracy gaps", "use fashion-mnist, digits or a labelled folder:PATH")
    if target.binarize:
        raise UsageError("--compare-binarized compares a full-precision model with its "
                         "binarized twin", "drop --binarize (the target must be the FP32 model)")
    if config.compare_weights is not None and not Path(config.compare_weights).is_file():
        raise UsageError(f"weights file {config.compare_weights} does not exist",
                         "train one with `aiot train MODEL --binarize ALG`")
    return Target(target.model, config.compare_weights, config.compare_binarized, target.fmt,
                  target.device, dict(target.options), target.threads)


class Evaluated:
    """A model's PyTorch reference and, optionally, its deployed artifact (scored instead)."""

    def __init__(self, spec, reference, deployed=None, label: str | None = None) -> None:
        self.spec, self.reference, self.deployed = spec, reference, deployed
        runs_on = deployed.name if deployed is not None else reference.name
        self.name = f"{label} ({runs_on})" if label else runs_on

    @classmethod
    def open(cls, target: Target, workspace, provenance: dict | None = None) -> Evaluated:
        """The target's reference model and, with a format, its artifact converted and pushed."""
        spec, model = reference_model(target)
        deployed = open_deployed(target, workspace) if target.fmt else None
        if deployed is not None and provenance is not None:
            provenance.update(deployed.provenance)
        return cls(spec, TorchPredictor(model), deployed, target.label)

    def labels(self, images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Top-1 of ``(evaluated, reference)``; the same array twice without a deployed artifact."""
        x = model_input(images, self.spec)
        reference = predict_labels(self.reference, x, _BATCH)
        if self.deployed is None:
            return reference, reference
        return predict_labels(self.deployed, x, _BATCH), reference

    def close(self) -> None:
        if self.deployed is not None:
            self.deployed.close()


@dataclass
class Scores:
    """Accuracies of one evaluated model (and of its PyTorch reference, when deployed).

    Without labels each predictor's clean top-1 is its own label (:meth:`set_clean`), so the
    accuracies are top-1 agreement with the clean prediction and ``clean`` is 1 by definition.
    """

    name: str
    clean: float = 0.0
    reference_clean: float = 0.0
    clean_agreement: float = 1.0                     # evaluated vs reference on clean images
    labels: np.ndarray | None = None                 # what the evaluated model is scored against
    reference_labels: np.ndarray | None = None       # what the reference is scored against
    acc: dict = field(default_factory=dict)          # corruption -> severity -> accuracy
    reference_acc: dict = field(default_factory=dict)
    agreement: dict = field(default_factory=dict)    # corruption -> severity -> top-1 agreement
    flips: dict = field(default_factory=dict)        # perturbation -> FP
    reference_flips: dict = field(default_factory=dict)

    def set_clean(self, labels, predicted, reference) -> None:
        """Score the clean top-1; ``labels=None``: each predictor's clean top-1 is its label."""
        self.labels = predicted if labels is None else labels
        self.reference_labels = reference if labels is None else labels
        self.clean = accuracy(predicted, self.labels)
        self.reference_clean = accuracy(reference, self.reference_labels)
        self.clean_agreement = 1.0 - flip_rate(reference, predicted)

    def add(self, corruption: str, severity: int, predicted, reference) -> None:
        self.acc.setdefault(corruption, {})[severity] = accuracy(predicted, self.labels)
        self.reference_acc.setdefault(corruption, {})[severity] = accuracy(
            reference, self.reference_labels)
        self.agreement.setdefault(corruption, {})[severity] = 1.0 - flip_rate(reference, predicted)


def run_corrupt(target: Target, config: CorruptConfig, workspace, provenance: dict | None = None,
                progress: Callable[[str], None] | None = None) -> dict:
    """Evaluate ``target`` under the configured corruptions and sequences; the suite's result dict.

    Raises:
        UsageError: a bad comparison setup.
    """
    twin_target = compare_target(target, config)
    source = eval_set(config.dataset, config.limit, config.seed)
    models = [Evaluated.open(target, workspace, provenance)]
    try:
        if twin_target is not None:
            models.append(Evaluated.open(twin_target, workspace))
        # Photos of many sizes are corrupted at the model's input size (ImageNet-C's 224 px).
        data = photos.at_model_size(source, models[0].spec) if source.ragged else source
        scores = evaluate(models, data, config, progress)
    finally:
        for model in models:
            model.close()
    described = photos.describe(source, models[0].spec) if source.ragged else None
    return build_result(scores, config, data, deployed=target.fmt is not None, described=described)


def evaluate(models: list[Evaluated], data, config: CorruptConfig,
             progress: Callable[[str], None] | None = None) -> list[Scores]:
    """Clean and corrupted accuracies of every model, and the first model's flip probabilities.

    ``data`` holds images of one size; without labels each predictor is scored against its own
    clean top-1 (agreement with the clean prediction).
    """
    progress = progress or (lambda text: log.info(text))
    scores = [Scores(model.name) for model in models]
    for model, score in zip(models, scores, strict=True):
        score.set_clean(data.labels, *model.labels(data.images))
    started = time.perf_counter()
    pairs = [(c, s) for c in config.corruptions for s in config.severities]
    for step, (corruption, severity) in enumerate(pairs, start=1):
        progress(f"{corruption} severity {severity} ({step}/{len(pairs)})…")
        images = imagenet_c.corrupted_set(data, corruption, severity, config.seed)
        for model, score in zip(models, scores, strict=True):
            score.add(corruption, severity, *model.labels(images))
    log.info("corruptions: %d sets of %d images in %.1f s", len(pairs), len(data.images),
             time.perf_counter() - started)
    if config.frames:
        for name in sequences.PERTURBATIONS:
            progress(f"{name} sequences ({config.frames} frames)…")
            predicted, reference = _sequence_labels(models[0], data, name, config)
            scores[0].flips[name] = flip_probability(predicted)
            scores[0].reference_flips[name] = flip_probability(reference)
    return scores


def _sequence_labels(model: Evaluated, data, name: str, config: CorruptConfig):
    """``(evaluated, reference)`` top-1 of every frame, ``(images, frames)`` each.

    Images are taken a few at a time so one predictor call holds about ``_BATCH`` frames.
    """
    frames, step = config.frames, max(1, _BATCH // config.frames)
    predicted, reference = [], []
    for start in range(0, len(data.images), step):
        chunk = sequences.sequences(data.images[start:start + step], name, frames, config.seed,
                                    data.indices[start:start + step])
        ours, ref = model.labels(chunk.reshape(-1, *chunk.shape[2:]))
        predicted.append(ours.reshape(-1, frames))
        reference.append(ref.reshape(-1, frames))
    return np.concatenate(predicted), np.concatenate(reference)


# Summary keys of an unlabelled run: the same numbers, computed from agreement with the clean
# prediction instead of accuracy, under names that say so.
_UNLABELLED_KEYS = {"clean_accuracy": "clean_agreement", "mNR": "mNR_agreement",
                    "mean_G": "mean_G_agreement", "mean_NCI": "mean_NCI_agreement",
                    "reference_clean_accuracy": "reference_clean_agreement",
                    "reference_mNR": "reference_mNR_agreement"}


def build_result(scores: list[Scores], config: CorruptConfig, data, deployed: bool,
                 described: dict | None = None) -> dict:
    """The result dict every suite stores (tables, curves, summary, notes), JSON-safe.

    ``described`` replaces ``data.describe()`` (the source of images brought to the model's
    size). Without labels ``clean_accuracy`` is None and the summary's accuracy keys are
    renamed ``*_agreement`` (see :data:`_UNLABELLED_KEYS`).
    """
    main, labelled = scores[0], data.labelled
    headline = summary.summarize(main.clean, main.acc)
    tables = [_accuracy_table("accuracy", main, config, labelled)]
    if deployed:
        headline["reference_clean_accuracy"] = main.reference_clean
        reference = summary.summarize(main.reference_clean, main.reference_acc)
        headline["reference_mNR"] = reference["mNR"]
        headline["agreement"] = mean_over(_flatten(main.agreement))
        headline["agreement_on_clean"] = main.clean_agreement
        tables.append(_agreement_table(main, config))
    if main.flips:
        headline["mFP"] = mean_over(main.flips)
        if deployed:
            headline["reference_mFP"] = mean_over(main.reference_flips)
        tables.append(_flip_table(main, config, deployed))
    curves = [_severity_curve("accuracy_vs_severity", main, labelled)]
    if len(scores) > 1:
        twin = scores[1]
        headline["om_robust"] = summary.om_robust_of(main.clean, main.acc, twin.clean, twin.acc)
        headline["compare_clean_accuracy"] = twin.clean
        headline["compare_mNR"] = summary.summarize(twin.clean, twin.acc)["mNR"]
        if deployed:
            headline["compare_agreement"] = mean_over(_flatten(twin.agreement))
        tables += [_accuracy_table("accuracy_binarized", twin, config), _gap_table(main, twin)]
        curves.append(_severity_curve("accuracy_vs_severity_binarized", twin))
    if not labelled:
        headline = {_UNLABELLED_KEYS.get(key, key): value for key, value in headline.items()}
    return summary.json_safe({
        "suite": "corrupt", "clean_accuracy": main.clean if labelled else None,
        "summary": headline, "tables": tables, "curves": curves,
        "notes": _notes(config, data, deployed, len(scores) > 1, described),
        "data": described or data.describe(), "libraries": _libraries()})


def _flatten(table: dict) -> dict:
    """``{corruption: {severity: v}}`` -> ``{"corruption/severity": v}``."""
    return {f"{c}/{s}": v for c, by in table.items() for s, v in by.items()}


def _severity_columns(config: CorruptConfig) -> list[str]:
    return [f"s{s}" for s in config.severities]


def _accuracy_table(name: str, score: Scores, config: CorruptConfig, labelled: bool = True) -> dict:
    per = summary.per_corruption(score.clean, score.acc)
    rows = [[c, *(by[s] for s in config.severities), per[c]["NR"], per[c]["G"], per[c]["NCI"]]
            for c, by in score.acc.items()]
    means = summary.summarize(score.clean, score.acc)
    by_severity = [mean_over({c: by[s] for c, by in score.acc.items()}) for s in config.severities]
    rows.append(["mean", *by_severity, means["mNR"], means["mean_G"], means["mean_NCI"]])
    title = (f"Top-1 accuracy under corruption: {score.name} (clean {score.clean:.4f})"
             if labelled else
             f"Top-1 agreement with the clean prediction under corruption: {score.name}")
    return {"name": name, "rows": rows, "title": title,
            "columns": ["corruption", *_severity_columns(config), "NR", "G", "NCI"]}


def _agreement_table(score: Scores, config: CorruptConfig) -> dict:
    rows = [[c, *(by[s] for s in config.severities), mean_over({str(s): v for s, v in by.items()})]
            for c, by in score.agreement.items()]
    return {"name": "agreement", "rows": rows,
            "title": f"Top-1 agreement of {score.name} with PyTorch on corrupted images",
            "columns": ["corruption", *_severity_columns(config), "mean"]}


def _flip_table(score: Scores, config: CorruptConfig, deployed: bool) -> dict:
    rows = []
    for name, fp in score.flips.items():
        top, unit = sequences.PERTURBATIONS[name]
        row = [name, f"0 → {top:g} {unit}", config.frames, fp]
        rows.append(row + [score.reference_flips[name]] if deployed else row)
    columns = ["perturbation", "parameter", "frames", "FP"] + (["FP pytorch"] if deployed else [])
    return {"name": "flip_probability", "columns": columns, "rows": rows,
            "title": f"Flip probability over perturbation sequences: {score.name}"}


def _gap_table(fp: Scores, bi: Scores) -> dict:
    fp_gap = {c: v["G"] for c, v in summary.per_corruption(fp.clean, fp.acc).items()}
    bi_gap = {c: v["G"] for c, v in summary.per_corruption(bi.clean, bi.acc).items()}
    rows = [[c, g, bi_gap[c], g / bi_gap[c] if bi_gap[c] else None] for c, g in fp_gap.items()]
    return {"name": "om_robust", "rows": rows,
            "title": "Corruption gaps of the FP32 model and its binarized twin (OM_robust)",
            "columns": ["corruption", "G fp32", "G binarized", "G / G_bi"]}


def _severity_curve(name: str, score: Scores, labelled: bool = True) -> dict:
    series = {c: [[0, score.clean], *([s, a] for s, a in sorted(by.items()))]
              for c, by in score.acc.items()}
    what = "Accuracy" if labelled else "Agreement with the clean prediction"
    return {"name": name, "title": f"{what} vs severity: {score.name}", "series": series,
            "x_label": "severity (0 = clean)",
            "y_label": "top-1 accuracy" if labelled else "top-1 agreement with clean"}


def _notes(config: CorruptConfig, data, deployed: bool, twin: bool,
           described: dict | None = None) -> list[str]:
    height, width = data.images.shape[1:3]
    size = f"{height}" if height == width else f"{height}x{width}"
    library = imagenet_c.library_version()
    if (height, width) == (224, 224):
        notes = [(f"ImageNet-C's own parameters at their native 224 px ({library}); compare "
                  "only with results of the same library and version.")]
    else:
        notes = [(f"ImageNet-C params at {size} px ({library}): not CIFAR-10-C, whose parameters "
                  "differ; compare only with results of the same library and version.")]
    if described is not None:
        notes.append(_resize_note(described, height, width))
    if not data.labelled:
        notes.append("No labels: each predictor's top-1 on the clean images is its label, so every "
                     "'accuracy' here (tables, curves, NR / G / NCI) is top-1 agreement with the "
                     "clean prediction; clean_agreement is 1 by definition, G = NCI = 1 - NR, and "
                     "the summary's keys end in _agreement.")
    if data.images.ndim == 3:
        notes.append("Gray images are corrupted as RGB (gray replicated) and brought back to gray "
                     "by luminance (Pillow's convert('L'), exact for unchanged pixels).")
    notes.append(f"Each image's corruption is seeded from (seed {config.seed}, corruption, "
                 f"severity, its index in the {_source(data)}), so the pixels are reproducible.")
    if config.frames:
        notes.append(f"Flip probability: our own sequences of {config.frames} frames per image, "
                     "from the clean image to the maximum parameter in equal steps, with the noise "
                     "field and direction drawn once per image (ImageNet-P draws new noise per "
                     "frame).")
    if deployed:
        scored = ("Accuracies are the deployed artifact's" if data.labelled else
                  "The deployed artifact is scored against its own clean top-1 (PyTorch against "
                  "PyTorch's)")
        notes.append(f"{scored}; 'agreement' is its top-1 agreement with the PyTorch reference "
                     "on the same corrupted inputs, 'agreement_on_clean' on the clean ones.")
    if twin:
        notes.append("OM_robust = sqrt(mean_c (G_c / G_c^bi)^2) over one architecture; "
                     "corruptions whose binarized gap is 0 are left out.")
    return notes


def _source(data) -> str:
    return "photo set" if data.name == PHOTOS else "test split"


def _resize_note(described: dict, height: int, width: int) -> str:
    sides = [min(shape[:2]) for shape in described["image_shapes"]]
    return (f"{len(sides)} photos (shorter side {min(sides)}-{max(sides)} px) were first "
            f"brought to {height}x{width} uint8 RGB as the sysnoise suite does "
            f"({described['resize']}, shorter side to {described['resized_side']} px, centre crop "
            f"{height}x{width}), then corrupted at that size and normalised by the model's "
            "preprocessing.")


def _libraries() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in (imagenet_c.LIBRARY, "numpy", "scipy", "scikit-image", "opencv-python-headless",
                 "pillow", "numba", "torch"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found
