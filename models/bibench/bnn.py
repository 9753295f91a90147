"""BNN (Courbariaux et al., 2016; BiBench eq. 12-13): sign activations and weights, no scaling.

Both binarizers use the clipped straight-through estimator: the gradient passes where
|x| <= 1 and is zero elsewhere. Inference is ``sign(a) (*) sign(w)`` with nothing else,
so BNN deploys to LCE and daBNN as is.
"""

from __future__ import annotations

from aiot.models.bibench.base import BinarizedConv2d, BinarizedLinear


class BNNConv2d(BinarizedConv2d):
    """BNN convolution: the base layer's defaults are exactly BNN."""

    algorithm = "bnn"


class BNNLinear(BinarizedLinear):
    """BNN linear layer."""

    algorithm = "bnn"
