"""aiot.models: the PyTorch model zoo (architectures written from the papers; only EfficientNet-Lite0 brings weights, its packaged ImageNet ones).

Usage::

    from aiot.models import get_model_spec

    spec = get_model_spec("mobilenet_v2_cifar")
    model = spec.build()                 # fresh, eval() mode
    logits = model(spec.example_input())
    print(spec.complexity().macs)

Public names: :data:`ZOO` (the registry), :func:`get_model_spec`, :class:`ModelSpec`,
:class:`InputSpec`, :class:`Complexity`, :func:`count_complexity`, :func:`model_specs`,
:func:`aiotbench_input` and :data:`AIOTBENCH_TABLE_IV` (AIoTBench's per-framework inputs).
"""

from aiot.models.complexity import Complexity, count_complexity
from aiot.models.preprocessing import (
    AIOTBENCH_TABLE_IV,
    CIFAR10_MEAN,
    CIFAR10_STD,
    FASHION_MNIST_MEAN,
    FASHION_MNIST_STD,
    IMAGENET_MEAN,
    IMAGENET_STD,
    aiotbench_input,
)
from aiot.models.spec import InputSpec, ModelSpec, load_weights
from aiot.models.zoo import ZOO, get_model_spec, model_specs

__all__ = [
    "AIOTBENCH_TABLE_IV",
    "CIFAR10_MEAN",
    "CIFAR10_STD",
    "FASHION_MNIST_MEAN",
    "FASHION_MNIST_STD",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "ZOO",
    "Complexity",
    "InputSpec",
    "ModelSpec",
    "aiotbench_input",
    "count_complexity",
    "get_model_spec",
    "load_weights",
    "model_specs",
]
