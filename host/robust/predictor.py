"""The Predictor protocol: a batch of model inputs in, a batch of class scores out.

Suites only ever talk to a Predictor, so the same code measures the PyTorch reference on the
host and a deployed artifact on a device. Every predictor counts the images it was asked
about (``queries``): black-box attacks are budgeted in queries.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

#: Rows per call when a suite evaluates a large set (bounds memory and message size).
BATCH = 64


@runtime_checkable
class Predictor(Protocol):
    """Scores for a batch of preprocessed inputs.

    ``predict`` takes float32 ``(N, *input shape)`` (the model's layout) and returns float32
    ``(N, classes)`` scores (logits, or whatever the artifact outputs: argmax is what counts).
    """

    name: str
    queries: int

    def predict(self, x: np.ndarray) -> np.ndarray: ...

    def close(self) -> None: ...


class TorchPredictor:
    """The PyTorch reference on the host (eval mode, no gradients)."""

    def __init__(self, model, name: str = "pytorch") -> None:
        self.model = model.eval()
        self.name = name
        self.queries = 0

    def predict(self, x: np.ndarray) -> np.ndarray:
        import torch

        self.queries += len(x)
        with torch.inference_mode():
            out = self.model(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)))
        return out.detach().float().numpy().reshape(len(x), -1)

    def close(self) -> None:
        pass


def predict_all(predictor: Predictor, x: np.ndarray, batch: int = BATCH) -> np.ndarray:
    """Scores for every row of ``x``, asked ``batch`` rows at a time."""
    if len(x) == 0:
        return np.zeros((0, 0), np.float32)
    return np.concatenate([predictor.predict(x[i:i + batch]) for i in range(0, len(x), batch)])


def predict_labels(predictor: Predictor, x: np.ndarray, batch: int = BATCH) -> np.ndarray:
    """Top-1 class of every row of ``x``."""
    return predict_all(predictor, x, batch).argmax(axis=1) if len(x) else np.zeros(0, np.int64)
