"""What a user may name as a model, resolved once: zoo entry, artifact file or their own code.

Every command that takes ``--model`` accepts the same references:

- a zoo name (``resnet18``), or ``<zoo>_<algorithm>`` for a binarized zoo model
  (``resnet18_bnn``, ``vgg_small_reactnet``: BiBench's naming), or ``<zoo>_<method><bits>``
  for a quantized one (``resnet18_lsq4``, ``tiny_cnn_dorefa8``: RobustMQ's methods), which
  only the commands that pass ``quantized_ok`` accept so far (training, description, the
  robustness suites, convert/run/sweep where :mod:`aiot.models.quant.deploy` says it deploys:
  lsq8 as onnx);
- an artifact file of a format aiot knows (``.tflite`` incl. LCE and quantized, ``.onnx``,
  ``.ort``, ``.pte``, ``.ptl``, ``.dab``, a Caffe2 ``predict_net.pb`` with its ``init_net.pb``
  beside it): its format comes from the file's bytes, it is measured as it is (no conversion,
  no parity: there is no PyTorch reference);
- the user's PyTorch code, ``path/to/file.py:factory`` or ``package.module:factory``, whose
  factory returns an ``nn.Module`` or ``(module, example_inputs)``, or a ``torch.export``
  program file (``.pt2``): these convert like zoo models.

Records name a file by its name and sha256, never by the host path, so the same file moved
elsewhere is the same model (and a sweep resumes).
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from aiot.core.companions import artifact_identity, init_net_path
from aiot.core.errors import UnknownName, UsageError
from aiot.core.fileio import sha256_file
from aiot.device_agent.backends.tflite_io import custom_ops
from aiot.models.quant.deploy import DEPLOY_FORMATS
from aiot.models.quant.methods import BITS, METHODS, parse_quantize, split_suffix

ZOO, ARTIFACT, CODE, PROGRAM = "zoo", "artifact", "code", "program"
#: A Keras model file (``.keras`` zip, ``.h5``/``.hdf5``): no runtime reads it; it converts
#: to TFLite with the TensorFlow of the ``lce`` toolchain.
KERAS = "keras"
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"

#: Extensions of artifact files by format, for messages and for files without a magic number.
ARTIFACT_EXTENSIONS = {".tflite": "tflite", ".onnx": "onnx", ".ort": "ort", ".pte": "executorch",
                       ".ptl": "ptl", ".dab": "dabnn", ".pb": "caffe2"}
_FACTORY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class ModelRef:
    """A resolved model reference.

    Attributes:
        kind: ``zoo``, ``artifact`` (a file measured as it is), ``code`` (a factory in the
            user's Python) or ``program`` (a ``torch.export`` ``.pt2``).
        name: how records and artifacts name it: the zoo name, the file name, or
            ``file.py:factory`` / ``module:factory``.
        binarize: the BiBench algorithm of a ``<zoo>_<algorithm>`` reference (else None).
        quantize: the RobustMQ ``method:bits`` of a ``<zoo>_<method><bits>`` reference.
        path: the file (artifact, ``.pt2`` or ``.py``) on this host; None for zoo names and
            importable modules. Never recorded.
        module: the importable module of a ``module:factory`` reference.
        factory: the factory's name for code references.
        format: an artifact's format as read from its bytes.
        sha256: the file's hash (artifact, program or source file).
    """

    kind: str
    name: str
    binarize: str | None = None
    path: Path | None = None
    module: str | None = None
    factory: str | None = None
    format: str | None = None
    sha256: str | None = None
    quantize: str | None = None

    @property
    def is_artifact(self) -> bool:
        return self.kind == ARTIFACT

    @property
    def converts(self) -> bool:
        """Whether aiot converts it (zoo, code, program) rather than running it as it is."""
        return self.kind != ARTIFACT

    def label(self) -> str:
        """``name`` with a short hash for files (``net.tflite@1a2b3c4d``), with its algorithm
        for a binarized zoo model (``resnet18_bnn``)."""
        if self.kind == ZOO:
            if self.quantize:
                return f"{self.name}_{self.quantize.replace(':', '')}"
            return f"{self.name}_{self.binarize}" if self.binarize else self.name
        return f"{self.name}@{self.sha256[:8]}" if self.sha256 else self.name

    def source(self) -> dict:
        """What a record keeps about where the model came from (no host paths)."""
        found = {"kind": self.kind, "name": self.name}
        if self.sha256:
            found["sha256"] = self.sha256
        if self.format and self.kind == ARTIFACT:
            found["format"] = self.format
        if self.binarize:
            found["binarize"] = self.binarize
        if self.quantize:
            found["quantize"] = self.quantize
        return found


def split_models(text: str | None) -> list[str]:
    """``--model``'s comma-separated list, keeping whole a file name that holds commas
    (``net,v2.onnx``, ``my,net.py:make``): at each place the longest run of pieces that names
    an existing file is one model, any other piece is one on its own.

    Raises:
        UsageError: no model given.
    """
    pieces = (text or "").split(",")
    models, start = [], 0
    while start < len(pieces):
        end = next((j for j in range(len(pieces), start + 1, -1)
                    if _names_file(",".join(pieces[start:j]).strip())), start + 1)
        model = ",".join(pieces[start:end]).strip()
        if model:
            models.append(model)
        start = end
    if not models:
        raise UsageError("no models given")
    return models


def _names_file(text: str) -> bool:
    """Whether ``text`` is an existing file, or ``file.py:factory`` of one."""
    left, sep, factory = text.rpartition(":")
    if sep and left.endswith(".py") and not _FACTORY.match(factory):
        return False  # "net.py:make,tiny_cnn": a factory name never holds a comma
    path = left if sep and left.endswith(".py") else text
    try:
        return Path(path).expanduser().is_file()
    except (OSError, ValueError):  # a name too long, a NUL byte: not a file
        return False


def resolve_model(text: str, binarize: str | None = None, quantize: str | None = None,
                  quantized_ok: bool = False) -> ModelRef:
    """Resolve what the user typed after ``--model``.

    Args:
        binarize: ``--binarize``; it may not contradict a ``<zoo>_<algorithm>`` name and makes
            no sense for an artifact file.
        quantize: ``--quantize METHOD:BITS``; likewise for ``<zoo>_<method><bits>`` names.
        quantized_ok: the caller handles quantized models; for the others a quantized
            reference is a UsageError (they would otherwise run the float model under its name).

    Raises:
        UnknownName: neither a file nor a zoo name (close zoo names in the hint).
        UsageError: a file that is missing, of an unknown kind, or a malformed code reference;
            a bit-width RobustMQ lacks; both binarized and quantized.
    """
    text = (text or "").strip()
    if not text:
        raise UsageError("no model given", "name a zoo model, an artifact file or file.py:factory")
    ref = _code_reference(text) or _file_reference(text) or _zoo_reference(text)
    ref = _with_quantize(_with_binarize(ref, binarize), quantize)
    if ref.quantize and not quantized_ok:
        raise UsageError(f"{ref.label()} is a quantized model, which this command does not run yet",
                         "aiot train --quantize trains it, aiot models info describes it, aiot robust "
                         "measures it and aiot run/sweep -f onnx deploy it at 8 bits (LSQ)")
    return ref


def _with_binarize(ref: ModelRef, binarize: str | None) -> ModelRef:
    if not binarize:
        return ref
    from aiot.models.bibench import get_algorithm

    algorithm = get_algorithm(binarize).name
    if ref.kind == ARTIFACT:
        raise UsageError(f"--binarize {binarize} cannot apply to the artifact file {ref.name}",
                         "binarize the PyTorch model before exporting it, or drop --binarize")
    if ref.binarize and ref.binarize != algorithm:
        raise UsageError(f"model {ref.name}_{ref.binarize} is already binarized with "
                         f"{ref.binarize}, not {algorithm}", "drop --binarize or the suffix")
    if ref.quantize:
        raise UsageError(f"model {ref.label()} is quantized; --binarize {binarize} cannot apply",
                         "binarize (1 bit) or quantize (2-8 bits), not both")
    return ModelRef(**{**ref.__dict__, "binarize": algorithm})


def _with_quantize(ref: ModelRef, quantize: str | None) -> ModelRef:
    if not quantize:
        return ref
    option = parse_quantize(quantize).option
    if ref.kind == ARTIFACT:
        raise UsageError(f"--quantize {quantize} cannot apply to the artifact file {ref.name}",
                         "quantize the PyTorch model before exporting it, or drop --quantize")
    if ref.binarize:
        raise UsageError(f"model {ref.label()} is binarized; --quantize {quantize} cannot apply",
                         "binarize (1 bit) or quantize (2-8 bits), not both")
    if ref.quantize and ref.quantize != option:
        raise UsageError(f"model {ref.label()} is already quantized with {ref.quantize}, not "
                         f"{option}", "drop --quantize or the suffix")
    return ModelRef(**{**ref.__dict__, "quantize": option})


def _code_reference(text: str) -> ModelRef | None:
    """``file.py:factory`` or ``package.module:factory``, else None."""
    left, sep, factory = text.rpartition(":")
    if not sep or not left or "\\" in text or re.match(r"^[A-Za-z]:[\\/]", text):
        return None
    is_file = left.endswith(".py")
    if not is_file and not _MODULE.match(left):
        return None
    if not _FACTORY.match(factory):
        raise UsageError(f"'{factory}' in model reference '{text}' is not a Python name",
                         "write path/to/file.py:factory or package.module:factory")
    if not is_file:
        return ModelRef(CODE, f"{left}:{factory}", module=left, factory=factory)
    path = Path(left).expanduser()
    if not path.is_file():
        raise UsageError(f"model file {left} does not exist",
                         "check the path of the .py file before ':factory'")
    return ModelRef(CODE, f"{path.name}:{factory}", path=path, factory=factory,
                    sha256=sha256_file(path))


def _file_reference(text: str) -> ModelRef | None:
    """An artifact or ``.pt2`` file; None for something that is not a path at all."""
    path = Path(text).expanduser()
    looks_like_path = ("/" in text or path.suffix.lower() in (*ARTIFACT_EXTENSIONS, ".pt2", ".py"))
    if not path.exists():
        if looks_like_path:
            raise UsageError(f"model file {text} does not exist", "check the path")
        return None
    if path.is_dir():
        raise UsageError(f"model {text} is a folder", "name the artifact file inside it")
    fmt = detect_format(path)
    sha, _files = artifact_identity(path, fmt)  # an ONNX model's data files are part of it
    if fmt == "pt2":
        return ModelRef(PROGRAM, path.name, path=path, sha256=sha)
    if fmt == KERAS:
        raise UsageError(f"{path.name} is a Keras model, which no runtime reads as it is",
                         f"aiot convert {path.name} -f tflite makes its .tflite (TensorFlow in "
                         "the lce toolchain); aiot run and sweep convert it themselves")
    return ModelRef(ARTIFACT, path.name, path=path, format=fmt, sha256=sha)


def _zoo_reference(text: str) -> ModelRef:
    from aiot.models import get_model_spec

    try:
        return ModelRef(ZOO, get_model_spec(text).name)
    except UnknownName as unknown:
        # only a derived name needs the algorithms (their layers import torch)
        from aiot.models.bibench import ALGORITHMS

        base, _, suffix = text.rpartition("_")
        if base and suffix.lower() in ALGORITHMS:
            try:
                return ModelRef(ZOO, get_model_spec(base).name,
                                binarize=ALGORITHMS.canonical(suffix))
            except UnknownName:
                pass
        chosen = split_suffix(suffix) if base else None  # resnet18_lsq3: say the widths
        if chosen:
            try:
                return ModelRef(ZOO, get_model_spec(base).name, quantize=chosen.option)
            except UnknownName:
                pass
        raise UnknownName("model", text, _zoo_names(),
                          also=_derived_names(ALGORITHMS.names())) from unknown


def _zoo_names() -> list[str]:
    from aiot.models import model_specs

    return [spec.name for spec in model_specs()]


def _derived_names(algorithms: list[str]) -> list[str]:
    """Every zoo model's ``<zoo>_<algorithm>`` and ``<zoo>_<method><bits>`` name: suggested
    for a typo (``resnet18_bnnn``), never listed."""
    suffixes = [*algorithms, *(f"{m}{b}" for m in METHODS.names() for b in BITS)]
    return [f"{name}_{suffix}" for name in _zoo_names() for suffix in suffixes]


def detect_format(path: Path) -> str:
    """The format of an artifact file from its bytes (and, for protobufs, its name).

    Returns a format name of the converter registry, or ``pt2`` for a ``torch.export``
    program.

    Raises:
        UsageError: a file of no known kind, naming what was read and what is accepted.
    """
    with open(path, "rb") as fh:
        head = fh.read(8)
    if len(head) >= 8 and head[4:8] == b"TFL3":
        return "lce" if _uses_lce_ops(path) else "tflite"
    if len(head) >= 8 and head[4:8] == b"ORTM":
        return "ort"
    if len(head) >= 8 and head[4:6] == b"ET" and head[6:8].isdigit():
        return "executorch"
    if head == HDF5_SIGNATURE:
        return KERAS
    if head[:4] == b"PK\x03\x04":
        return _zip_format(path)
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        _check_onnx(path)
        return "onnx"
    if suffix == ".dab":
        return "dabnn"
    if suffix == ".pb":
        return _caffe2_format(path)
    raise UsageError(f"cannot tell what kind of model {path.name} is",
                     "give a .tflite, .onnx, .ort, .pte, .ptl, .pt2, .keras, .h5, .dab or "
                     "Caffe2 predict_net.pb file, a zoo name or file.py:factory")


def _uses_lce_ops(path: Path) -> bool:
    """Whether a ``.tflite`` uses a Larq Compute Engine custom op (``LceBconv2d``, ...): its
    operator table names them; where that table does not parse, whether the bytes mention
    LCE's two commonest ops (the runtime then refuses the file in its own words)."""
    data = path.read_bytes()
    try:
        return any(op.startswith("Lce") for op in custom_ops(data))
    except ValueError:
        return any(needle in data for needle in (b"LceBconv2d", b"LceQuantize"))


def _zip_format(path: Path) -> str:
    """``.ptl`` (lite-interpreter bytecode) or ``.pt2`` (torch.export archive) from a zip."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, UnicodeDecodeError, NotImplementedError, ValueError, EOFError):
        # a damaged directory: an undecodable member name, an unknown zip version, bad sizes
        raise UsageError(f"{path.name} is a damaged zip archive",
                         "export the model again") from None
    if any(n.endswith("/bytecode.pkl") or n == "bytecode.pkl" for n in names):
        return "ptl"
    if any(n.endswith("archive_format") for n in names):
        return "pt2"
    if "config.json" in names and any(n.endswith(".weights.h5") for n in names):
        return KERAS  # Keras 3's .keras: the model's config beside its weights
    if any(n.endswith("/data.pkl") for n in names):
        raise UsageError(f"{path.name} is a TorchScript or state-dict file, not a mobile model",
                         "save it with _save_for_lite_interpreter (.ptl) or torch.export.save "
                         "(.pt2), or give its code as file.py:factory")
    raise UsageError(f"{path.name} is a zip archive of no known model kind",
                     "give a .ptl or a torch.export .pt2 file")


def _check_onnx(path: Path) -> None:
    """Refuse a ``.onnx`` that does not parse as an ONNX model, before any run."""
    try:
        import onnx
    except ImportError:
        return  # the runtime will say it on load; the format is still clear from the name
    try:
        onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - any protobuf failure means "not ONNX"
        raise UsageError(f"{path.name} is not a valid ONNX model ({type(exc).__name__})",
                         "export it again, e.g. with torch.onnx.export") from None


def _caffe2_format(path: Path) -> str:
    if "init_net" in path.name:
        raise UsageError(f"{path.name} is a Caffe2 init net",
                         "name the predict_net.pb; its init_net.pb is read from beside it")
    init = init_net_path(path)
    if not init.is_file():
        raise UsageError(f"Caffe2 model {path.name} has no init net beside it",
                         f"put its init_net.pb next to it as {init.name}")
    return "caffe2"


#: The format a zoo model gets when none is named: binary-native LCE for a binarized model
#: that LCE can deploy (what BiBench times), else full-precision TFLite with XNNPACK.
DEFAULT_FORMAT, DEFAULT_BINARY_FORMAT = "tflite", "lce"


def default_format(ref: ModelRef) -> str:
    """The format a command uses for ``ref`` when ``--format`` is not given."""
    if ref.kind == ARTIFACT:
        return ref.format
    if ref.quantize:
        return DEPLOY_FORMATS[0]
    if ref.binarize:
        from aiot.models.bibench import verdict

        if not verdict(ref.binarize, DEFAULT_BINARY_FORMAT).refused:
            return DEFAULT_BINARY_FORMAT
    return DEFAULT_FORMAT


def a_format(fmt: str) -> str:
    """``"an onnx"``, ``"a tflite"``: the article as the name is said (``lce`` is L-C-E)."""
    return f"an {fmt}" if fmt[:1].lower() in "aeiou" or fmt.lower() == "lce" else f"a {fmt}"


def model_label(model: str | None, binarize: str | None) -> str | None:
    """The one name a model has in tables, reports and messages: ``resnet18_bnn`` for a
    binarized zoo model (what ``--model`` takes), else the record's model name."""
    return f"{model}_{binarize}" if model and binarize else model


def record_name(text: str | None) -> str | None:
    """The ``model`` column that records of ``text`` carry, for filters: a zoo model's name
    (``resnet18_bnn`` → ``resnet18``), a file's or code's name; a file that is gone since
    is matched by its name."""
    if text is None:
        return None
    try:
        return resolve_model(text).name
    except UsageError:
        return Path(text).name if ":" not in text else text
