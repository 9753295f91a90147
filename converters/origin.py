"""What a conversion starts from: a zoo model (built, binarized or quantized, with its weights)
or a user's module, with its example inputs, their names and draw ranges, and what the user
gives the parity check (:class:`~aiot.converters.inputs.InputFeed`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aiot.converters.inputs import (
    InputFeed,
    input_facts,
    integer_ranges,
    parity_inputs,
    with_given_values,
)
from aiot.converters.naming import artifact_stem
from aiot.converters.outputs import with_flat_outputs
from aiot.converters.parity import parity_images
from aiot.converters.source import load_user_model
from aiot.core.errors import UsageError
from aiot.core.fileio import sha256_file
from aiot.models.model_ref import ZOO, resolve_model

RANDOM_INIT_SEED = 0


def build_source_model(model_name: str, weights: Path | None = None, binarize: str | None = None):
    """The PyTorch model a conversion starts from: loaded weights, or a seeded random init.

    Without ``weights``, a model with packaged pretrained weights gets those
    (:func:`source_weights`). Seeding makes an untrained model reproducible, so its artifact
    can be cached and its accuracy compared with PyTorch's in a later process. With
    ``binarize``, the model is binarized with that BiBench algorithm first, so ``weights`` are
    those of the binarized model (``aiot train --binarize``). ``model_name`` is a zoo name
    or ``<zoo>_<algorithm>`` (``resnet18_bnn``).
    """
    import torch

    from aiot.models import get_model_spec
    from aiot.models.bibench import build_binarized

    spec = get_model_spec(model_name) if model_name in _zoo_names() else None
    if spec is None:
        ref = zoo_ref(model_name, binarize)
        spec, binarize = get_model_spec(ref.name), ref.binarize
    torch.manual_seed(RANDOM_INIT_SEED)
    return spec, build_binarized(spec, binarize, source_weights(spec, weights, binarize))


def _zoo_names() -> set[str]:
    from aiot.models import model_specs  # the zoo: imports torch

    return {spec.name for spec in model_specs()}


def zoo_ref(model_name: str, binarize: str | None, quantized_ok: bool = False):
    """The zoo reference ``model_name`` names; user files and code are refused here (and
    quantized models unless ``quantized_ok``: see :func:`resolve_model`)."""
    ref = resolve_model(model_name, binarize, quantized_ok=quantized_ok)
    if ref.kind != ZOO:
        raise UsageError(f"{ref.name} is not a zoo model; this needs an image classifier of the "
                         "zoo (its input size, classes and data set)",
                         "name a zoo model: aiot models list")
    return ref


@dataclass
class Source:
    """What a conversion starts from, zoo or user code: the module and how to feed it."""

    label: str  # how the artifact file is named
    model: object
    example: object  # one batch-1 tensor, or a tuple of them (several inputs)
    facts: dict  # the sidecar's "source"
    input: dict  # the sidecar's "input" (the first input's, for readers of one input)
    spec: object = None  # the zoo entry, None for user code
    weights: Path | None = None
    outputs: list | None = None  # the sidecar's "outputs" when the model has several
    inputs: list | None = None  # the sidecar's "inputs" of a user model: names, dtypes, ranges
    ranges: list | None = None  # each input's IntegerRange (None: not an integer input)
    values: dict | None = None  # ``--input-value``: inputs held at a number in parity
    given: object = None  # ``--inputs FILE.npz``: the parity batch itself, in ``example``'s form

    def noise(self, count: int, seed: int):
        """Seeded parity inputs: the zoo's image-like noise, else dtype-aware noise drawn in
        each integer input's range; the user's own batch (``--inputs``) where given."""
        if self.spec is not None:
            return self.spec.example_input(batch=count, seed=seed)
        if self.given is not None:
            return self.given
        made = parity_inputs(self.example, count, seed, self.ranges)
        return with_given_values(made, self.inputs, self.values)

    @property
    def several(self) -> bool:
        """Whether the model takes several inputs."""
        return isinstance(self.example, tuple)

    def images(self, count: int):
        """Real images for parity: zoo classifiers only (a user model's domain is unknown)."""
        return parity_images(self.spec, count) if self.spec is not None else None


def load_source(ref, weights: Path | None, input_shapes: dict | None,
                 feed: InputFeed | None = None) -> Source:
    """The zoo model or the user's module of ``ref``, binarized when ``ref.binarize``."""
    if ref.kind == ZOO:
        if ref.quantize:
            from aiot.converters.qdq import build_quantized_source

            spec, model = build_quantized_source(ref, weights, RANDOM_INIT_SEED)
        else:
            spec, model = build_source_model(ref.name, weights, ref.binarize)
        weights = source_weights(spec, weights, ref.binarize or ref.quantize)
        return Source(artifact_stem(spec.name, ref.binarize, ref.quantize), model,
                       spec.example_input(batch=1, seed=0),
                       {"model": spec.name, "binarize": getattr(model, "binarized_with", None),
                        "quantize": ref.quantize,
                        "weights": str(weights) if weights else None,
                        "weights_sha256": sha256_file(Path(weights)) if weights else None,
                        "random_init_seed": None if weights else RANDOM_INIT_SEED},
                       {**spec.input.to_dict(), "batch": 1, "dtype": "float32"}, spec, weights)
    from aiot.models.spec import load_weights

    feed = feed or InputFeed()
    user = load_user_model(ref, input_shapes)
    if weights is not None:
        load_weights(user.model, weights, ref.name)
    if ref.binarize:
        from aiot.models.bibench import binarize as binarize_model

        if isinstance(user.example, tuple):
            raise UsageError(f"{ref.name} takes {len(user.example)} inputs "
                             f"({', '.join(user.names)}); BiBench's binarization is for "
                             "image models of one input", "convert it without --binarize")
        binarize_model(user.model, ref.binarize, tuple(user.example.shape))
        user.model.eval()
    model, outputs = with_flat_outputs(user.model, user.example, ref.name)
    ranges = integer_ranges(model, user.example)
    inputs = input_facts(user.example, user.names, ranges)
    values = feed.values_for(ref.name, inputs)
    stem = (ref.module or ref.path.stem if ref.factory else Path(ref.name).stem)
    label = f"{stem}.{ref.factory}" if ref.factory else stem
    label = artifact_stem(f"{label}-{ref.sha256[:8]}" if ref.sha256 else label, ref.binarize)
    return Source(label, model, user.example,
                   {**ref.source(), "model": ref.name,
                    "binarize": getattr(user.model, "binarized_with", ref.binarize),
                    "weights": Path(weights).name if weights else None,
                    "weights_sha256": sha256_file(Path(weights)) if weights else None,
                    "random_init_seed": None if weights else RANDOM_INIT_SEED},
                   {k: v for k, v in inputs[0].items() if k != "name"}, None, weights, outputs,
                   inputs=_with_values(inputs, values), ranges=ranges, values=values,
                   given=feed.batch_for(ref.name, inputs, user.example))


def _with_values(inputs: list[dict], values: dict) -> list[dict]:
    """The sidecar's ``inputs`` with the value each held input was given (``value``)."""
    return [{**i, "value": values[i["name"]]} if i["name"] in values else i for i in inputs]


def source_weights(spec, weights: Path | None, binarize: str | None = None) -> Path | None:
    """``weights``, else the model's default pretrained file (full precision only), else None.

    A binarized (or quantized: pass its method) model's weights differ from the
    full-precision ones, so it never gets them.
    """
    if binarize:
        return Path(weights) if weights is not None else None
    return spec.weights_file(weights)
