"""aiot.models: the PyTorch model zoo (architectures written from the papers; only EfficientNet-Lite0 brings weights, its packaged ImageNet ones).

Binarizers (BiBench) live in :mod:`aiot.models.bibench`, quantizers (RobustMQ's DoReFa, PACT,
LSQ) in :mod:`aiot.models.quant`.

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

from typing import TYPE_CHECKING

from aiot.core.lazy import lazy_attributes

# The public names, loaded on first use: the zoo imports torch, and the lighter modules of
# this layer (model references, datasets) are read by commands that never build a model.
_PUBLIC = {
    "Complexity": "complexity", "count_complexity": "complexity",
    "AIOTBENCH_TABLE_IV": "preprocessing", "CIFAR10_MEAN": "preprocessing",
    "CIFAR10_STD": "preprocessing", "FASHION_MNIST_MEAN": "preprocessing",
    "FASHION_MNIST_STD": "preprocessing", "IMAGENET_MEAN": "preprocessing",
    "IMAGENET_STD": "preprocessing", "aiotbench_input": "preprocessing",
    "InputSpec": "spec", "ModelSpec": "spec", "load_weights": "spec",
    "ZOO": "zoo", "get_model_spec": "zoo", "model_specs": "zoo",
}

if TYPE_CHECKING:
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


__getattr__ = lazy_attributes(__name__, _PUBLIC)


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
