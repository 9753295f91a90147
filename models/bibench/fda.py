"""FDA, Fourier-series decomposition of the sign (Xu et al., 2021; BiBench eq. 30-32).

The square wave ``sign(t)`` on one period equals ``4/pi * sum_i sin((2i+1) w t) / (2i+1)``;
FDA keeps the exact sign in the forward pass and back-propagates the derivative of the
first ``n`` terms, ``4w/pi * sum_{i<n} cos((2i+1) w t)``, for weights and activations alike.
``n`` grows during training (:meth:`update`: 1 term in the first epoch up to
:data:`MAX_TERMS` in the last), moving the estimator from smooth to sign-like. We use a
period of 4 (``w = pi/2``), so the series is the sign on (-2, 2).

While training, a small noise-adaptation module ``eta(t) = relu(t W1) W2`` (each filter's
flattened weights ``t`` through a bottleneck of :data:`HIDDEN` units) is added to the
binarized weights to absorb the series' truncation error (eq. 31-32); it is dropped at
inference, so deployed weights are plain signs. alpha = mean |W| per output channel.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from aiot.models.bibench.base import BinarizedConv2d, BinarizedLinear, channel_mean_abs, sign_with

MAX_TERMS = 10
HIDDEN = 16
OMEGA = math.pi / 2


def fourier_derivative(terms: int):
    """The derivative of the first ``terms`` terms of the sign's Fourier series."""

    def derivative(t: Tensor) -> Tensor:
        total = torch.zeros_like(t)
        for i in range(terms):
            total = total + torch.cos((2 * i + 1) * OMEGA * t)
        return total * (4 * OMEGA / math.pi)

    return derivative


class _FDA:
    algorithm = "fda"
    terms = 1

    def _init_noise_adaptation(self) -> None:
        fan_in = self.weight[0].numel()
        self.noise_in = nn.Linear(fan_in, HIDDEN, bias=False)
        self.noise_out = nn.Linear(HIDDEN, fan_in, bias=False)
        nn.init.zeros_(self.noise_out.weight)  # starts as exactly BNN-with-alpha

    def act_sign(self, x: Tensor) -> Tensor:
        return sign_with(x, fourier_derivative(self.terms))

    def weight_sign(self, w: Tensor) -> Tensor:
        binary = sign_with(w, fourier_derivative(self.terms))
        if not self.training:
            return binary
        flat = w.flatten(1)
        return binary + self.noise_out(torch.relu(self.noise_in(flat))).view_as(w)

    def weight_scale(self, w: Tensor) -> Tensor:
        return channel_mean_abs(w)

    def update(self, epoch: int, max_epochs: int) -> None:
        progress = 0.0 if max_epochs <= 1 else (epoch - 1) / (max_epochs - 1)
        self.terms = 1 + round((MAX_TERMS - 1) * progress)

    def scale_params(self) -> int:
        return self.weight.shape[0]


class FDAConv2d(_FDA, BinarizedConv2d):
    """FDA convolution."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._init_noise_adaptation()


class FDALinear(_FDA, BinarizedLinear):
    """FDA linear layer."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._init_noise_adaptation()
