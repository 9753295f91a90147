"""The Converter base class, the format registry, and the format table built from it."""

from __future__ import annotations

import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiot.core import toolchains
from aiot.core.errors import UsageError
from aiot.core.registry import Registry
from aiot.models.model_ref import ARTIFACT, ModelRef, a_format
from aiot.models.quant.deploy import deployment_refusal
from aiot.models.quant.methods import parse_quantize


@dataclass(frozen=True)
class Availability:
    """Whether a format can be produced here, and if not, why and which extra fixes it."""

    ok: bool
    reason: str = ""
    extra: str | None = None
    hint: str | None = None  # how to fix it when it is not a pip extra (e.g. a toolchain)


def modules_available(modules: dict[str, str], extra: str) -> Availability:
    """Availability from ``{import name: pip name}`` without importing anything heavy."""
    missing = [pip for mod, pip in modules.items() if importlib.util.find_spec(mod) is None]
    if missing:
        return Availability(False, f"{', '.join(missing)} not installed", extra)
    return Availability(True)


def toolchain_available(name: str) -> Availability:
    """Availability of a format whose toolchain lives in an isolated environment."""
    if toolchains.installed(name) is None:
        return Availability(False, f"the {name} toolchain environment is not installed",
                            hint=f"run: aiot toolchains install {name}")
    return Availability(True)


def toolchain_versions(name: str) -> dict[str, str]:
    """Versions recorded when toolchain ``name`` was installed (empty if it is not)."""
    return dict((toolchains.installed(name) or {}).get("versions", {}))


class Converter(ABC):
    """One artifact format; every format subclasses it. Subclasses are light objects (one
    instance each, registered in :data:`CONVERTERS`); heavy imports live in ``export``.

    Required of every subclass (class attributes, then three methods):
        name: the format name on the command line ("onnx", "tflite").
        extension: file extension of the artifact, with the dot.
        backend: the device-agent backend that runs it, or None for emit-only formats.
        description: one line for ``aiot convert --list``.
        atol: default parity tolerance (max absolute error on the logits).
        options: option name → (default, help); validated before work starts.

    The optional members below have the defaults a plain format needs; a format overrides
    those that apply to it. The ones that are None here are capabilities: None says the
    format has no such thing, a method in the subclass says it has.
    """

    name: str
    extension: str
    backend: str | None
    description: str
    atol: float
    options: dict[str, tuple[str, str]]

    #: aiot's own test format (``null``): usable by name, never listed, never in ``all``.
    internal: bool = False
    #: The artifact holds a model of several inputs (ONNX, TFLite, a lite module, a .pte);
    #: ``export`` then gets a tuple of example tensors, one per input, and the input names
    #: on ``model.aiot_input_names`` (:mod:`aiot.converters.inputs`). False: one input only,
    #: refused before any work.
    several_inputs: bool = False
    #: The runtime knows the inputs by the model's names; False: by position only
    #: (``input_0``, …: ExecuTorch), and the sidecar's ``inputs`` say each one's
    #: ``runtime_name``, so the host can name them to the agent.
    keeps_input_names: bool = True
    #: One line for ``aiot convert --list`` on what keeps the format from its runtime's
    #: fastest path here (e.g. a torch without XNNPACK for .ptl); the sidecar says it per
    #: artifact. None: nothing does.
    limits: str | None = None
    #: ``export`` also receives ``spec=`` (the zoo ModelSpec, None for user code), e.g. to
    #: preprocess calibration images for the model's input.
    uses_spec: bool = False
    #: False skips the parity step, for formats whose outputs mean nothing next to
    #: PyTorch's (the ``null`` test format); the sidecar's parity is then null.
    parity_check: bool = True
    #: The format executes binary convolutions as such (LCE, daBNN): ``--format all`` gives
    #: it only models with binary layers, a binarized model is always frozen for it, and its
    #: logits are judged as they are (in float formats, or with residual additions, a
    #: binarized model is judged on top-1).
    binary_native: bool = False
    #: With ``binary_inputs``: whether the values in front of the first binary layer equal
    #: PyTorch's (compared as floats), or only their signs do (daBNN's sign shifts).
    stem_by_value: bool = True
    #: With ``binary_inputs``: whether the runtime binarizes 0 to +1 as PyTorch does
    #: (daBNN's bit packing makes it -1).
    positive_at_zero: bool = True

    #: ``reference_outputs(artifact, inputs) -> ndarray`` ``(N, classes)``: for an emit-only
    #: format (backend None), a NumPy executor of the format's semantics that parity compares
    #: with PyTorch. None: no such executor (an emit-only format then has no parity check).
    reference_outputs: Callable[[Path, Any], Any] | None = None
    #: ``binary_inputs(model, artifact, inputs, names) -> {layer name: ndarray}``: what each
    #: binary layer of the artifact binarizes (NCHW) for ``inputs``; a binarized model is then
    #: judged by those signs (:mod:`aiot.converters.sign_parity`). None: not shown.
    binary_inputs: Callable[..., dict] | None = None
    #: ``describe(artifact) -> {"inputs", "outputs", "note"}``: the signature of an emit-only
    #: format's file, read by aiot (no runtime here runs it). None: aiot cannot read it.
    describe: Callable[[Path], dict] | None = None

    @abstractmethod
    def availability(self) -> Availability:
        """Cheap check (no heavy imports) of whether export can run here."""

    @abstractmethod
    def toolchain_versions(self) -> dict[str, str]:
        """Versions of every package that shaped the artifact."""

    @abstractmethod
    def export(self, model, example, out_path: Path, options: dict[str, str]) -> dict:
        """Write the artifact to ``out_path`` atomically; return extra sidecar facts (e.g.
        ops). With ``uses_spec`` it is also called with ``spec=``."""

    def check_options(self, options: dict[str, str]) -> None:
        """Raise UsageError for bad option values (``options`` resolved) before any work."""

    def artifact_files(self, artifact: Path) -> list[Path]:
        """Every file of the artifact, the main one first (Caffe2: predict net + init net);
        deleted, pushed and hashed together."""
        return [artifact]

    def parity_tolerance(self, options: dict[str, str]) -> dict:
        """``{"atol", "rtol", "min_top1"}`` for parity with these options (quantized TFLite is
        judged on top-1 agreement over real images, not on its logits)."""
        return {"atol": self.atol, "rtol": 1e-3, "min_top1": None}

    def deployed_form(self, model, example) -> tuple[object, dict | None]:
        """``(the model the runtime runs, facts or None)`` for a binarized ``model``: a format
        whose runtime cannot run the training graph as it is says what it changes (daBNN
        drops clamps that float layers read); parity is measured against the changed model.
        Here: the model as it is, nothing changed."""
        return model, None


CONVERTERS: Registry[Converter] = Registry("format")


def user_converters() -> list[Converter]:
    """The formats users see (``convert --list``, ``--format all``, hints): all but aiot's
    own test formats (``internal = True``, e.g. ``null``), which stay usable by name."""
    return [conv for conv in CONVERTERS if not conv.internal]


def several_input_formats() -> list[str]:
    """The user formats whose artifacts hold several inputs (for a refusal's hint)."""
    return [conv.name for conv in user_converters() if conv.several_inputs]


def all_formats(runs_in=None) -> tuple[list[str], list[str]]:
    """``--format all`` for a run or sweep: ``(formats, left out)``. Every user format whose
    toolchain is here and that can be timed: by the agent's runtime, or, given ``runs_in``
    (the formats of a ``--native`` tool), by that tool; ``left out`` says why for the others
    (``convert --format all`` shows those as rows)."""
    formats, left_out = [], []
    for conv in user_converters():
        if runs_in is not None and conv.name not in runs_in:
            left_out.append(f"{conv.name} (not run by the --native tool)")
        elif runs_in is None and conv.backend is None:
            left_out.append(f"{conv.name} (emit-only: --native times it)")
        elif not conv.availability().ok:
            left_out.append(f"{conv.name} ({conv.availability().reason})")
        else:
            formats.append(conv.name)
    return formats, left_out


def _has_binary_layers(ref) -> bool | None:
    """Whether the model ``ref`` names has binary convolutions: a binarized one has, a zoo
    model is built to look (``tiny_bnn`` is binary without ``--binarize``); None: the user's
    code, not known before it converts."""
    if ref.binarize:
        return True
    if ref.kind != "zoo":
        return None
    from aiot.models import get_model_spec  # the zoo: imports torch
    from aiot.models.binary import BinaryConv2d

    return any(isinstance(m, BinaryConv2d) for m in get_model_spec(ref.name).build().modules())


def formats_for(formats: list[str], ref) -> tuple[list[str], list[str]]:
    """Of ``--format all``'s ``formats``, ``(those the model ``ref`` converts to, left out
    with why)``: a binary-native format (LCE) takes models with binary layers only, and a
    binarized model only the formats BiBench's Table 4 says its algorithm deploys to, a
    quantized one only where :mod:`aiot.models.quant.deploy` says it deploys."""
    from aiot.models.bibench import LIBRARIES, verdict

    fits, left_out = [], []
    for fmt in formats:
        conv = get_converter(fmt)
        if conv.binary_native and _has_binary_layers(ref) is False:
            left_out.append(f"{fmt} (binary-native: for models with binary layers)")
        elif ref.binarize and conv.name in LIBRARIES and verdict(ref.binarize, conv.name).refused:
            left_out.append(f"{fmt} ({verdict(ref.binarize, conv.name).reason})")
        elif ref.quantize and deployment_refusal(parse_quantize(ref.quantize), conv.name):
            left_out.append(f"{fmt} ({deployment_refusal(parse_quantize(ref.quantize), conv.name)})")
        else:
            fits.append(fmt)
    return fits, left_out


def get_converter(name: str) -> Converter:
    """The converter registered as ``name``; UnknownName with suggestions otherwise."""
    return CONVERTERS.get(name)


def check_format(ref: ModelRef, fmt: str) -> str:
    """``fmt`` canonicalised; an artifact's named format must be the file's own."""
    name = get_converter(fmt).name
    if ref.kind == ARTIFACT and name != ref.format:
        raise UsageError(f"{ref.name} is {a_format(ref.format)} artifact, not {name}",
                         f"drop --format or give --format {ref.format}")
    return name


def resolve_options(converter: Converter, given: dict[str, str] | None) -> dict[str, str]:
    """Defaults merged with ``given``; unknown option names are a UsageError."""
    given = dict(given or {})
    unknown = sorted(set(given) - set(converter.options))
    if unknown:
        valid = ", ".join(converter.options) or "none"
        raise UsageError(f"format '{converter.name}' has no option {', '.join(unknown)}",
                         f"valid options: {valid}")
    return {key: given.get(key, default) for key, (default, _help) in converter.options.items()}


def format_table() -> list[dict]:
    """One row per registered format, for ``aiot convert --list``."""
    rows = []
    for conv in user_converters():
        avail = conv.availability()
        rows.append({
            "name": conv.name, "extension": conv.extension, "backend": conv.backend,
            "available": avail.ok, "reason": avail.reason, "extra": avail.extra,
            "hint": avail.hint or (f"pip install 'aiot[{avail.extra}]'" if avail.extra else None),
            "description": conv.description, "limits": conv.limits,
            "options": {k: f"{h} [default: {d}]" for k, (d, h) in conv.options.items()},
        })
    return rows
