"""The two ``nn.Module`` faces attack libraries need (imported only when an attack runs).

* :class:`PixelModel`: the PyTorch reference taking [0, 1] NCHW pixels, normalising inside,
  so gradient attacks (torchattacks, ART, pyautoattack) measure ε in pixel units and clip to
  [0, 1] as they do by default.
* :class:`ScoreFacade`: a predictor behind an oracle, dressed as a module for score-based
  torchattacks attacks (SPSA, Square). Nothing backpropagates through it; its one dummy
  parameter is how torchattacks finds the device.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class PixelModel(nn.Module):
    """``model((pixels - mean) / std)``, in the model's own layout.

    Args:
        model: the eval-mode PyTorch model (takes normalised input).
        spec: its :class:`~aiot.models.InputSpec` (mean, std, layout).
    """

    def __init__(self, model: nn.Module, spec) -> None:
        super().__init__()
        self.model = model.eval()
        channels = spec.shape[0]
        view = (1, channels, 1, 1)
        self.register_buffer("mean", torch.tensor(spec.mean, dtype=torch.float32).expand(channels).reshape(view))
        self.register_buffer("std", torch.tensor(spec.std, dtype=torch.float32).expand(channels).reshape(view))
        self.nhwc = spec.layout == "NHWC"
        # torchattacks puts a model back into the mode it found it in: an (in)advertently
        # training-mode wrapper would leave the reference in training mode (batch statistics).
        self.eval()

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        x = (pixels - self.mean) / self.std
        return self.model(x.permute(0, 2, 3, 1) if self.nhwc else x)


class ScoreFacade(nn.Module):
    """Log-probabilities from an oracle's predictor, for attacks that only read scores.

    Args:
        oracle: an :class:`~aiot.host.robust.attacks.oracle.Oracle` (counts and budgets queries).
    """

    def __init__(self, oracle) -> None:
        super().__init__()
        self.oracle = oracle
        self.dummy = nn.Parameter(torch.zeros(1), requires_grad=False)
        self.eval()

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        scores = self.oracle.log_probs(pixels.detach().cpu().numpy())
        return torch.from_numpy(np.ascontiguousarray(scores, dtype=np.float32)).to(pixels.device)


def reference_module(model: nn.Module, spec) -> PixelModel:
    """The white-box target: ``model`` wrapped to take [0, 1] pixels, gradients allowed."""
    module = PixelModel(model, spec)
    for parameter in module.parameters():
        parameter.requires_grad_(False)  # attacks differentiate w.r.t. the input only
    return module
