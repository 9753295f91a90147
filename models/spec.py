"""What a zoo entry is: the input it expects (:class:`InputSpec`) and how to build it (:class:`ModelSpec`).

A :class:`ModelSpec` is a frozen description; the network itself is built on demand by
:meth:`ModelSpec.build`, so importing the zoo costs nothing and every caller gets a fresh,
independent ``nn.Module``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiot.core.errors import ArtifactError, first_line
from aiot.core.safe_load import UnpicklingRefused, load_tensors
from aiot.models.complexity import Complexity, count_built

if TYPE_CHECKING:  # torch is imported where a model is built or a tensor made: resolving a
    # zoo name (a cached sweep, a --help page) needs none
    import torch
    from torch import nn

log = logging.getLogger(__name__)

LAYOUTS = ("NCHW", "NHWC")
CHANNEL_ORDERS = ("RGB", "BGR", "GRAY")


@dataclass(frozen=True)
class InputSpec:
    """The tensor a model expects, and how raw 0-255 pixels become that tensor.

    Normalisation is ``(x / 255 - mean) / std`` per channel, i.e. mean and std are in the
    0-1 pixel scale (the convention of torchvision). AIoTBench's Table IV gives them in
    the 0-255 scale; divide by 255 to get these values.

    Args:
        shape: ``(C, H, W)`` without the batch dimension, whatever the layout.
        layout: memory layout of the batched tensor, ``"NCHW"`` or ``"NHWC"``.
        channel_order: ``"RGB"``, ``"BGR"`` or ``"GRAY"`` (one channel).
        mean: per-channel mean (one value, or one per channel).
        std: per-channel standard deviation (one value, or one per channel).
    """

    shape: tuple[int, int, int]
    layout: str = "NCHW"
    channel_order: str = "RGB"
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)

    def __post_init__(self) -> None:
        # Normalise lists (e.g. from JSON) to tuples so the spec stays hashable.
        object.__setattr__(self, "shape", tuple(int(v) for v in self.shape))
        object.__setattr__(self, "mean", tuple(float(v) for v in self.mean))
        object.__setattr__(self, "std", tuple(float(v) for v in self.std))
        if len(self.shape) != 3 or min(self.shape) < 1:
            raise ValueError(f"InputSpec.shape must be (C, H, W) with positive sizes, got {self.shape}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"InputSpec.layout must be one of {LAYOUTS}, got {self.layout!r}")
        if self.channel_order not in CHANNEL_ORDERS:
            raise ValueError(
                f"InputSpec.channel_order must be one of {CHANNEL_ORDERS}, got {self.channel_order!r}"
            )
        channels = self.shape[0]
        if (self.channel_order == "GRAY") != (channels == 1):
            raise ValueError(f"channel_order {self.channel_order} does not fit {channels} channels")
        for label, values in (("mean", self.mean), ("std", self.std)):
            if len(values) not in (1, channels):
                raise ValueError(f"InputSpec.{label} needs 1 or {channels} values, got {len(values)}")
        if min(self.std) <= 0:
            raise ValueError(f"InputSpec.std must be positive, got {self.std}")

    @property
    def channels(self) -> int:
        """Number of channels C."""
        return self.shape[0]

    @property
    def height(self) -> int:
        """Image height H in pixels."""
        return self.shape[1]

    @property
    def width(self) -> int:
        """Image width W in pixels."""
        return self.shape[2]

    def batch_shape(self, batch: int = 1) -> tuple[int, ...]:
        """Shape of a batch of ``batch`` inputs in this spec's layout.

        Args:
            batch: batch size (at least 1).

        Returns:
            ``(N, C, H, W)`` for NCHW, ``(N, H, W, C)`` for NHWC.
        """
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        c, h, w = self.shape
        return (batch, c, h, w) if self.layout == "NCHW" else (batch, h, w, c)

    def normalize(self, pixels: torch.Tensor) -> torch.Tensor:
        """Apply ``(x / 255 - mean) / std`` to a batch of 0-255 pixels in this spec's layout.

        Channel order is not changed here: ``pixels`` must already be in ``channel_order``.

        Args:
            pixels: float or integer tensor shaped like :meth:`batch_shape`.

        Returns:
            A new float32 tensor; the input is not modified.
        """
        import torch

        view = (1, -1, 1, 1) if self.layout == "NCHW" else (1, 1, 1, -1)
        mean = torch.tensor(self.mean, dtype=torch.float32).view(view)
        std = torch.tensor(self.std, dtype=torch.float32).view(view)
        return (pixels.to(torch.float32) / 255.0 - mean) / std

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (lists, strings, numbers) for sidecars and provenance."""
        return {
            "shape": list(self.shape),
            "layout": self.layout,
            "channel_order": self.channel_order,
            "mean": list(self.mean),
            "std": list(self.std),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InputSpec:
        """Inverse of :meth:`to_dict`."""
        return cls(
            shape=tuple(data["shape"]),
            layout=data.get("layout", "NCHW"),
            channel_order=data.get("channel_order", "RGB"),
            mean=tuple(data.get("mean", (0.0,))),
            std=tuple(data.get("std", (1.0,))),
        )


@dataclass(frozen=True)
class ModelSpec:
    """One entry of the model zoo: metadata plus a builder for the PyTorch module.

    Args:
        name: registry name, e.g. ``"resnet18"``, ``"resnet18_cifar"``, ``"tiny_cnn"``.
        family: architecture family, e.g. ``"resnet18"``.
        variant: ``"imagenet"``, ``"cifar"``, ``"mnist"`` or ``"test"``.
        paper: the paper whose setting this entry reproduces: ``"AIoTBench"``, ``"BiBench"``
            or ``"aiot"`` (our own adaptation).
        input: the input the model expects.
        num_classes: size of the logits vector.
        reference_flops_m: the paper's reference multiply-accumulates in millions, or None
            where the paper gives none. Our own count is :meth:`complexity`.
        description: one or two sentences for ``aiot models list`` and sidecars.
        builder: zero-argument callable returning a freshly initialised ``nn.Module``.
        default_weights: zero-argument callable returning the state-dict file of the model's
            own pretrained weights (e.g. shipped in a package), or None where the zoo has
            none. :meth:`weights_file` resolves it; :meth:`build` never applies it implicitly.
    """

    name: str
    family: str
    variant: str
    paper: str
    input: InputSpec
    num_classes: int
    reference_flops_m: float | None
    description: str
    builder: Callable[[], nn.Module] = field(repr=False, compare=False)
    default_weights: Callable[[], Path] | None = field(default=None, repr=False, compare=False)
    # Filled lazily by complexity(); not part of equality or repr.
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def build(self, weights: str | os.PathLike[str] | None = None) -> nn.Module:
        """A fresh model in ``eval()`` mode.

        Initialisation uses the global torch RNG, so ``torch.manual_seed(s)`` before the call
        makes it deterministic.

        Args:
            weights: optional path to a ``state_dict`` saved with ``torch.save`` (a dict with a
                ``"state_dict"`` key is accepted too). None gives the fresh initialisation,
                also for a model with :attr:`default_weights` (pass ``weights_file()``).

        Returns:
            The model, on CPU, in eval mode.

        Raises:
            ArtifactError: the weights file is missing, unreadable, or does not fit the model.
        """
        model = self.builder()
        if weights is not None:
            load_weights(model, weights, self.name)
        return model.eval()

    def weights_file(self, weights: str | os.PathLike[str] | None = None) -> Path | None:
        """The weights to load: ``weights`` if given, else the default pretrained file.

        Returns:
            A path, or None for a model without default weights (a fresh initialisation).

        Raises:
            MissingDependency: the package that ships the default weights is not installed.
        """
        if weights is not None:
            return Path(weights)
        return Path(self.default_weights()) if self.default_weights is not None else None

    def example_input(self, batch: int = 1, seed: int = 0) -> torch.Tensor:
        """A deterministic, realistically scaled input batch.

        Pixels are drawn uniformly from 0..255 and normalised with :attr:`input`, so values
        have the range a real preprocessed image would have (useful for quantization and
        parity checks), independent of the global RNG.

        Args:
            batch: batch size.
            seed: seed of a private generator.

        Returns:
            float32 tensor of shape ``input.batch_shape(batch)``.
        """
        import torch

        generator = torch.Generator().manual_seed(seed)
        pixels = torch.randint(0, 256, self.input.batch_shape(batch), generator=generator)
        return self.input.normalize(pixels)

    def complexity(self) -> Complexity:
        """Parameters and multiply-accumulates of one image, counted from the graph (cached)."""
        if "complexity" not in self._cache:
            self._cache["complexity"] = count_built(self.builder, (1, *self.input.shape))
        return self._cache["complexity"]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able summary (no counts, which need a build; see :meth:`complexity`)."""
        return {
            "name": self.name,
            "family": self.family,
            "variant": self.variant,
            "paper": self.paper,
            "input": self.input.to_dict(),
            "num_classes": self.num_classes,
            "reference_flops_m": self.reference_flops_m,
            "description": self.description,
        }


def load_weights(model: nn.Module, path: str | os.PathLike[str], name: str = "model") -> None:
    """Load a saved ``state_dict`` into ``model`` strictly, turning every failure into one error.

    Args:
        model: the freshly built module.
        path: file written by ``torch.save(model.state_dict(), path)``.
        name: model name for the error message.

    Raises:
        ArtifactError: missing file, unreadable/corrupt file, not a state dict, or keys and
            shapes that do not match the model. The message names the file.
        UnpicklingRefused: the file holds pickled objects other than tensors (never loaded).
    """
    import torch

    file = Path(path)
    if not file.is_file():
        raise ArtifactError(f"weights file '{file}' for {name} not found")
    try:
        # weights-only (aiot.core.safe_load): a state dict is plain tensors, and a file that
        # holds anything else is refused in one line, never unpickled.
        state = load_tensors(file, f"weights file '{file}' for {name}")
    except UnpicklingRefused:
        raise
    except Exception as exc:  # torch raises several types for truncated/foreign files
        raise ArtifactError(
            f"weights file '{file}' for {name} is unreadable: {type(exc).__name__}: "
            f"{first_line(str(exc), 10_000)}",
            "expected a file written by torch.save(model.state_dict(), path)",
        ) from exc
    if isinstance(state, Mapping) and isinstance(state.get("state_dict"), Mapping):
        state = state["state_dict"]
    if not isinstance(state, Mapping) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ArtifactError(
            f"weights file '{file}' for {name} does not hold a state_dict",
            "expected a file written by torch.save(model.state_dict(), path)",
        )
    _check_keys(model, state, file, name)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:  # shape mismatches
        first = str(exc).strip().splitlines()
        raise ArtifactError(
            f"weights file '{file}' does not fit {name}: {first[-1].strip() if first else exc}",
            "were the weights saved from a different model or variant?",
        ) from exc
    log.debug("loaded %d tensors from %s into %s", len(state), file, name)


def _check_keys(model: nn.Module, state: Mapping[str, Any], file: Path, name: str) -> None:
    """Raise a readable ArtifactError for missing or unexpected state-dict keys."""
    expected = set(model.state_dict())
    missing = sorted(expected - set(state))
    unexpected = sorted(set(state) - expected)
    if not (missing or unexpected):
        return
    parts = []
    if missing:
        parts.append(f"{len(missing)} missing (e.g. {', '.join(missing[:3])})")
    if unexpected:
        parts.append(f"{len(unexpected)} unexpected (e.g. {', '.join(unexpected[:3])})")
    raise ArtifactError(
        f"weights file '{file}' does not fit {name}: keys {'; '.join(parts)}",
        "were the weights saved from a different model or variant?",
    )
