"""What the ``aiot robust`` suites' work shares: the suite's target (model, weights, deployed
format, device) checked before any work, and the record/workspace plumbing (the options only
they take: :mod:`aiot.host.cli.robust_options`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aiot.converters.api import zoo_ref
from aiot.converters.base import get_converter
from aiot.core.errors import UsageError
from aiot.host.cli._output import state
from aiot.host.cli.options import parse_options
from aiot.host.cli.robust_bits import bit_models
from aiot.host.devices.resolve import resolve_name
from aiot.host.engine.preflight import announce_weights
from aiot.host.engine.weights import WeightsChoice, choose_weights
from aiot.host.engine.workspace import Workspace
from aiot.host.robust.data import PHOTOS
from aiot.host.robust.target import Target
from aiot.host.store.store import open_store
from aiot.models.model_ref import a_format
from aiot.models.quant.deploy import DEPLOY_FORMATS, deployment_refusal
from aiot.models.quant.methods import parse_quantize


def make_target(model: str, weights: Path | None, binarize: str | None, fmt: str | None,
                device: str | None, opts: list[str] | None, dataset: str | None = None):
    """The suite's Target, every name checked before any work.

    Without ``--weights`` the model runs with the newest ``aiot train`` of it on
    ``dataset`` (:func:`aiot.host.engine.weights.choose_weights`); :func:`announce_target` says
    which, once every check has passed.
    """
    # The suites need an image classifier (data set, classes, corruptions): a zoo model,
    # <zoo>_<algorithm> or <zoo>_<method><bits>; a user's file or code is refused here in one line.
    ref = zoo_ref(model, binarize, quantized_ok=True)
    if fmt is not None:
        fmt = get_converter(fmt).name
        if ref.quantize:
            _check_deploys(ref, fmt)
    check_weights_file(weights, "--weights")
    picked = choose_weights(ref, weights, _labelled(dataset))
    return Target(ref.name, picked.path, ref.binarize, fmt, resolve_name(device),
                  parse_options(opts), weights_origin=picked.origin, quantize=ref.quantize)


def suite_targets(options: dict, device: str | None) -> list:
    """The suite's Target for each model of ``--model`` (and ``--bits``) on ``device``, from a
    suite command's ``options`` by parameter name; every name checked before any work."""
    return [make_target(m, options["weights"], options["binarize"], options["fmt"], device,
                        options["opt"], options["dataset"])
            for m in bit_models(options["model"], options["bits"], options["weights"])]


def _check_deploys(ref, fmt: str) -> None:
    """A quantized model runs on a device only where :mod:`aiot.models.quant.deploy` says it
    deploys (LSQ 8-bit as int8 ONNX or ExecuTorch XNNPACK); the others stay measurable on the host model."""
    reason = deployment_refusal(parse_quantize(ref.quantize), fmt)
    if reason:
        raise UsageError(f"{ref.label()} cannot be evaluated as {a_format(fmt)} artifact: {reason}",
                         f"drop --format to measure it on the host model (PyTorch); "
                         f"deployed: {ref.name}_lsq8 -f {DEPLOY_FORMATS[0]}")


def announce_target(target, dataset: str | None) -> None:
    """Say which weights the suite scores when they were picked for it, and warn when they
    are untrained (its clean accuracy is then chance level); after every check, before work."""
    choice = WeightsChoice(target.weights, target.weights_origin or "given")
    announce_weights([(target.zoo_name, target.binarize, choice)], dataset)


def _labelled(dataset: str | None) -> str | None:
    """The data set whose trainings apply: the unlabelled photos have none of their own."""
    return None if dataset in (None, PHOTOS) else dataset


def check_weights_file(path: Path | None, option: str, what: str = "weights") -> None:
    """A named state-dict file must exist, checked before any record or conversion starts."""
    if path is not None and not Path(path).is_file():
        raise UsageError(f"{what} file {path} does not exist",
                         f"train one with `aiot train MODEL` or pass an existing {option} file")


@contextmanager
def suite_context(ctx, target=None, dataset: str | None = None) -> Iterator[tuple]:
    """``(store, workspace)`` for one suite run, closed afterwards; with ``target``, its
    weights are announced first (:func:`announce_target`)."""
    if target is not None:
        announce_target(target, dataset)
    results = state(ctx).results_dir()
    store = open_store(results)
    workspace = Workspace(results)
    try:
        yield store, workspace
    finally:
        workspace.close()
        store.close()
