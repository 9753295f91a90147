"""What every noise type of one suite run reads: images, cameras, model, reference predictions."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from aiot.host.robust.predictor import Predictor, TorchPredictor, predict_all
from aiot.host.robust.sysnoise import camera
from aiot.host.robust.sysnoise.pipeline import Pipeline, Stages, model_batch
from aiot.host.robust.sysnoise.scoring import OptionResult


@dataclass
class TypeReport:
    """One noise type's outcome: its rows (reference rows first), notes and extra tables."""

    name: str
    rows: list[OptionResult]
    notes: list[str] = field(default_factory=list)
    summary: dict[str, float] = field(default_factory=dict)
    tables: list[dict] = field(default_factory=list)


class SuiteContext:
    """The shared state of a suite run; everything expensive is computed once, on first use.

    Args:
        target: what is evaluated (:class:`~aiot.host.robust.target.Target`).
        spec: the model's :class:`~aiot.models.ModelSpec`.
        model: the eval-mode PyTorch reference.
        evalset: the images (uint8, any sizes) and labels (None: agreement metrics only).
        predictor: scores the pre-processing types' inputs (default: the PyTorch reference).
        workspace: sessions and artifacts for the deployed types.
        devices: devices for the platform type (the first also runs the precision type).
        crop: centre-crop share of the resize step.
        progress: called with a short line before each slow step.
    """

    def __init__(self, target, spec, model, evalset, predictor: Predictor, workspace=None,
                 devices: list[str] | None = None, crop: float = 1.0,
                 progress: Callable[[str], None] | None = None) -> None:
        self.target, self.spec, self.model, self.evalset = target, spec, model, evalset
        self.predictor, self.workspace, self.crop = predictor, workspace, crop
        self.devices = list(devices or [target.device])
        self.progress = progress or (lambda _line: None)
        self.labels = evalset.labels
        self.sources = _uniform_channels([camera.as_gray_or_rgb(image) for image in evalset.images])
        self.gray = self.sources[0].ndim == 2
        self.target_size = tuple(spec.input.shape[1:])
        sides = [min(image.shape[:2]) for image in self.sources]
        self.cameras = {c.name: c for c in camera.cameras(sides, self.target_size, crop)}
        self.provenance: dict = {}
        self._stages: dict[str, Stages] = {}

    def stages(self, camera_name: str = "down") -> Stages:
        """The pipeline stages over ``camera_name``'s JPEGs (captured and encoded once)."""
        if camera_name not in self._stages:
            cam = self.cameras[camera_name]
            self.progress(f"capturing {len(self.sources)} JPEGs ({camera_name} camera, {cam.describe()})…")
            jpegs = camera.capture_jpegs(self.sources, cam)
            self._stages[camera_name] = Stages(jpegs, self.gray, self.target_size, self.crop)
        return self._stages[camera_name]

    def predict(self, images) -> np.ndarray:
        """The pre-processing predictor's scores for model-size uint8 images."""
        return predict_all(self.predictor, model_batch(images, self.spec))

    @functools.cached_property
    def reference_inputs(self) -> np.ndarray:
        """The reference pipeline's model input (down camera): what every model-side type runs."""
        return model_batch(self.stages("down").images(Pipeline()), self.spec)

    @functools.cached_property
    def reference_scores(self) -> np.ndarray:
        """The PyTorch reference's scores on :attr:`reference_inputs`."""
        return predict_all(TorchPredictor(self.model), self.reference_inputs)

    @functools.cached_property
    def reference_predictions(self) -> np.ndarray:
        """The pre-processing predictor's top-1 on the reference pipeline (down camera)."""
        return predict_all(self.predictor, self.reference_inputs).argmax(axis=1)


def _uniform_channels(images: list[np.ndarray]) -> list[np.ndarray]:
    """All gray, or all RGB (gray ones replicated) when the set mixes them."""
    if all(image.ndim == 2 for image in images) or all(image.ndim == 3 for image in images):
        return images
    return [np.repeat(image[..., None], 3, axis=2) if image.ndim == 2 else image for image in images]
