"""How artifact files are named: the model (binarized, quantized), the format, and what sets
a conversion apart from the default one (options, weights), so no two ever share a file."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path


def artifact_stem(model_name: str, binarize: str | None, quantize: str | None = None) -> str:
    """``resnet18`` or, binarized, ``resnet18.bnn`` (quantized ``resnet18.lsq8``): how
    artifact files name the model (a run's label is ``resnet18_bnn``)."""
    if quantize:
        return f"{model_name}.{quantize.replace(':', '')}"
    if not binarize:
        return model_name
    from aiot.models.bibench import get_algorithm

    return f"{model_name}.{get_algorithm(binarize).name}"


def artifact_name(model_name: str, fmt: str, extension: str, variant: str = "") -> str:
    """``resnet18`` + ``tflite`` → ``resnet18.tflite``; ``onnx`` → ``resnet18.onnx``.

    Formats whose extension already names them get no infix; others get one
    (``resnet18.lce.tflite``) so two formats sharing an extension never collide. A
    ``variant`` (:func:`artifact_variant`) goes after the model: ``resnet18.quant-int8.tflite``.
    """
    stem = f"{model_name}.{variant}" if variant else model_name
    return f"{stem}{extension}" if extension == f".{fmt}" else f"{stem}.{fmt}{extension}"


#: How long the options part of a file name may be before it is replaced by a hash.
_MAX_OPTIONS_NAME = 40
_NAME_SAFE = re.compile(r"^[A-Za-z0-9_.+-]+$")  # "." for numbers (sleep_ms-0.5); never "/"


def artifact_variant(converter, options: dict, weights_sha256: str | None = None) -> str:
    """What sets an artifact apart from the model's default conversion, for its file name.

    Non-default converter options as ``key-value`` (``quant-int8``), and ``w-<sha256[:8]>``
    for weights loaded from a file, so that an int8 and a float artifact, or a trained and
    an untrained one, never overwrite each other's file (or cache). Options that are long
    or not file-name-safe become ``opt-<hash>`` rather than being mangled into a name two
    option sets could share. Empty for the defaults: the plain names stay as they were.
    """
    changed = {k: str(v) for k, v in sorted(options.items())
               if str(v) != str(converter.options.get(k, (None,))[0])}
    parts = []
    if changed:
        text = "_".join(f"{k}-{v}" for k, v in changed.items())
        if len(text) > _MAX_OPTIONS_NAME or not all(map(_NAME_SAFE.match, (*changed, *changed.values()))):
            text = "opt-" + hashlib.sha256(json.dumps(changed, sort_keys=True).encode()).hexdigest()[:8]
        parts.append(text)
    if weights_sha256:
        parts.append(f"w-{weights_sha256[:8]}")
    return ".".join(parts)


def artifact_files(converter, artifact: Path) -> list[Path]:
    """Every file of the artifact (one, or e.g. Caffe2's predict net and init net)."""
    return list(converter.artifact_files(artifact))
