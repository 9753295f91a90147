"""Input conventions: AIoTBench's Table IV and the standard dataset statistics.

AIoTBench (Table IV) found that each (framework, model) pair it ran needed its own layout,
channel order and normalisation, "searched through repeated experiments". We record the
table verbatim (converted from the paper's 0-255 scale to :class:`InputSpec`'s 0-1 scale by
dividing mu and sigma by 255) so runners can reproduce the paper's per-framework inputs.

The zoo's own models are PyTorch models with torchvision's layer layout, so their
``ModelSpec.input`` uses the *PyTorch Mobile* row, which for all six models is the usual
ImageNet statistics, RGB, NCHW.
"""

from __future__ import annotations

from aiot.core.errors import UnknownName
from aiot.models.spec import InputSpec

#: ImageNet mean/std in the 0-1 scale (torchvision; AIoTBench's PyTorch rows: 123.675/255 ...).
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

#: CIFAR-10 statistics as used by BiBench's mmcls configs (mean 125.307, 122.961, 113.8575 and
#: std 51.5865, 50.847, 51.255 on the 0-255 scale). The std is the widespread per-pixel
#: value (0.2023, ...), not the dataset-wide one (0.2470, ...); keep it for compatibility.
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2023, 0.1994, 0.2010)

#: Fashion-MNIST training-set statistics (0-1 scale).
FASHION_MNIST_MEAN = (0.2860,)
FASHION_MNIST_STD = (0.3530,)

#: Framework keys of :data:`AIOTBENCH_TABLE_IV`.
FRAMEWORKS = ("tflite", "caffe2", "pytorch")

# Rows of Table IV: framework -> model -> (input shape as printed, channel order, mu, sigma),
# mu and sigma on the paper's 0-255 scale.
_TABLE_IV_RAW: dict[str, dict[str, tuple[str, str, tuple[float, ...], tuple[float, ...]]]] = {
    "tflite": {
        "resnet50": ("224x224x3", "BGR", (103.939, 116.779, 123.68), (1.0, 1.0, 1.0)),
        "inception_v3": ("299x299x3", "RGB", (127.5, 127.5, 127.5), (127.5, 127.5, 127.5)),
        "densenet121": ("224x224x3", "RGB", (123.675, 116.28, 103.53), (58.395, 57.12, 57.375)),
        "squeezenet": ("224x224x3", "RGB", (127.5, 127.5, 127.5), (255.0, 255.0, 255.0)),
        "mobilenet_v2": ("224x224x3", "RGB", (127.5, 127.5, 127.5), (127.5, 127.5, 127.5)),
        "mnasnet": ("224x224x3", "RGB", (127.5, 127.5, 127.5), (127.5, 127.5, 127.5)),
    },
    "caffe2": {
        "resnet50": ("3x224x224", "BGR", (127.5, 127.5, 127.5), (127.5, 127.5, 127.5)),
        "inception_v3": ("3x299x299", "BGR", (127.5, 127.5, 127.5), (127.5, 127.5, 127.5)),
        "densenet121": ("3x224x224", "RGB", (123.675, 116.28, 103.53), (58.395, 57.12, 57.375)),
        "squeezenet": ("3x224x224", "BGR", (127.5, 127.5, 127.5), (1.0, 1.0, 1.0)),
        "mobilenet_v2": ("3x224x224", "BGR", (103.53, 116.28, 123.675), (57.375, 57.12, 58.395)),
        "mnasnet": ("3x224x224", "RGB", (123.675, 116.28, 103.53), (58.395, 57.12, 57.375)),
    },
    "pytorch": {
        model: ("3x299x299" if model == "inception_v3" else "3x224x224", "RGB",
                (123.675, 116.28, 103.53), (58.395, 57.12, 57.375))
        for model in ("resnet50", "inception_v3", "densenet121", "squeezenet", "mobilenet_v2", "mnasnet")
    },
}  # fmt: skip


def _to_spec(shape_text: str, order: str, mu: tuple[float, ...], sigma: tuple[float, ...]) -> InputSpec:
    dims = tuple(int(v) for v in shape_text.split("x"))
    if dims[0] == 3:  # printed as CxHxW
        layout, chw = "NCHW", dims
    else:  # printed as HxWxC
        layout, chw = "NHWC", (dims[2], dims[0], dims[1])
    return InputSpec(
        shape=chw,
        layout=layout,
        channel_order=order,
        mean=tuple(round(m / 255.0, 6) for m in mu),
        std=tuple(round(s / 255.0, 6) for s in sigma),
    )


#: AIoTBench Table IV as InputSpecs, keyed by ``(framework, model family)``.
AIOTBENCH_TABLE_IV: dict[tuple[str, str], InputSpec] = {
    (framework, model): _to_spec(*row)
    for framework, rows in _TABLE_IV_RAW.items()
    for model, row in rows.items()
}


def aiotbench_input(family: str, framework: str = "pytorch") -> InputSpec:
    """The input AIoTBench used for ``family`` under ``framework`` (its Table IV).

    Args:
        family: ``resnet50``, ``inception_v3``, ``densenet121``, ``squeezenet``,
            ``mobilenet_v2`` or ``mnasnet``.
        framework: ``tflite``, ``caffe2`` or ``pytorch`` (PyTorch Mobile).

    Returns:
        The :class:`InputSpec` of that row.

    Raises:
        UnknownName: the pair is not in the table.
    """
    key = (framework.strip().lower(), family.strip().lower())
    if key not in AIOTBENCH_TABLE_IV:
        known = [f"{f}/{m}" for f, m in AIOTBENCH_TABLE_IV]
        raise UnknownName("AIoTBench Table IV row", f"{key[0]}/{key[1]}", known)
    return AIOTBENCH_TABLE_IV[key]
