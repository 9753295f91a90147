"""Round 3, untrusted files: a model, weights or checkpoint file never runs code in aiot.

Each hostile file is a real one: a program saved by ``torch.export.save`` (or a state dict
saved by ``torch.save``) with one member replaced by a pickle whose ``__reduce__`` opens a
marker file for writing. Every variant below makes plain ``torch.export.load`` create the
marker (checked in ``test_the_variants_are_real``); through aiot the marker never appears, and
the file is refused in one line (exit 2) that names it and never passes on torch's advice to
load it with ``weights_only=False``.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import pickle
import zipfile
from pathlib import Path

import pytest

from tests.faults.conftest import count_records, one_line_error

torch = pytest.importorskip("torch")


class Evil:
    """Unpickling this opens ``marker`` for writing: code run by loading a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(scope="session")
def plain_pt2(tmp_path_factory) -> Path:
    """A real two-layer program saved by torch.export.save."""
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)).eval()
    path = tmp_path_factory.mktemp("pt2") / "net.pt2"
    torch.export.save(torch.export.export(model, (torch.randn(1, 4),)), path)
    return path


def _rewrite(src: Path, dst: Path, edit, extra: dict[str, bytes] | None = None) -> Path:
    """``src``'s members (``edit(relative name, bytes)``) plus ``extra``, under the same root."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        root = zin.namelist()[0].split("/")[0]
        for info in zin.infolist():
            zout.writestr(info, edit(info.filename.split("/", 1)[1], zin.read(info)))
        for name, data in (extra or {}).items():
            zout.writestr(f"{root}/{name}", data)
    return dst


def _torch_saved(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _sample_inputs(src: Path, dst: Path, marker: Path) -> Path:
    evil = pickle.dumps(Evil(marker), protocol=2)
    return _rewrite(src, dst, lambda name, data: evil if name == "data/sample_inputs/model.pt" else data)


def _pickled_weight(src: Path, dst: Path, marker: Path) -> Path:
    def edit(name: str, data: bytes) -> bytes:
        if name == "data/weights/model_weights_config.json":
            config = json.loads(data)
            first = next(iter(config["config"].values()))
            first["use_pickle"] = True  # torch.load(weights_only=False) of its payload
            return json.dumps(config).encode()
        return _torch_saved(Evil(marker)) if name == "data/weights/weight_0" else data

    return _rewrite(src, dst, edit)


def _opaque_constant(src: Path, dst: Path, marker: Path) -> Path:
    config = {"config": {"evil": {"path_name": "opaque_obj_0", "is_param": False, "use_pickle": True,
                                  "tensor_meta": None}}}  # pickle.loads of the member

    def edit(name: str, data: bytes) -> bytes:
        return json.dumps(config).encode() if name == "data/constants/model_constants_config.json" else data

    return _rewrite(src, dst, edit, {"data/constants/opaque_obj_0": pickle.dumps(Evil(marker))})


def _old_layout(src: Path, dst: Path, marker: Path) -> Path:
    """The pre-2.7 layout torch.export.load falls back to (its pickles retried unsafely)."""
    from torch._export.serde.schema import SCHEMA_VERSION

    with zipfile.ZipFile(src) as zin:
        program = next(zin.read(n) for n in zin.namelist() if n.endswith("models/model.json"))
    evil = pickle.dumps(Evil(marker), protocol=2)
    with zipfile.ZipFile(dst, "w") as zout:
        zout.writestr("version", ".".join(map(str, SCHEMA_VERSION)))
        zout.writestr("serialized_exported_program.json", program)
        for name in ("serialized_state_dict.pt", "serialized_constants.pt", "serialized_example_inputs.pt"):
            zout.writestr(name, evil)
    return dst


VARIANTS = {"sample inputs": _sample_inputs, "pickled weight": _pickled_weight,
            "opaque constant": _opaque_constant, "pre-2.7 layout": _old_layout}
#: What each refusal names besides the file: the member (the old layout is refused whole).
NAMED = {"sample inputs": "data/sample_inputs/model.pt", "pickled weight": "data/weights/weight_0",
         "opaque constant": "opaque_obj_0", "pre-2.7 layout": "evil.pt2"}


@pytest.fixture
def evil_pt2(plain_pt2, tmp_path):
    """``make(variant)`` -> (hostile .pt2, the marker its pickle would create)."""
    def make(variant: str = "sample inputs") -> tuple[Path, Path]:
        marker = tmp_path / f"ran-{variant.replace(' ', '-')}"
        return VARIANTS[variant](plain_pt2, tmp_path / "evil.pt2", marker), marker

    return make


def _refused(result, marker: Path, *fragments: str) -> None:
    assert not marker.exists(), "a pickle in the file ran in aiot"
    one_line_error(result, *fragments, code=2)
    assert "weights_only" not in result.output and "Re-running" not in result.output, result.output


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_variants_are_real(evil_pt2, variant):
    """Without aiot's checks, torch.export.load runs each variant's pickle."""
    path, marker = evil_pt2(variant)
    with contextlib.suppress(Exception):  # most fail after their pickle has run
        torch.export.load(str(path))
    assert marker.exists()


@pytest.mark.fault("a .pt2 whose pickled member runs code: models info")
@pytest.mark.parametrize("variant", VARIANTS)
def test_hostile_pt2_is_refused_by_models_info(cli, fault, evil_pt2, variant):
    path, marker = evil_pt2(variant)
    _refused(cli("models", "info", str(path), code=2), marker, "evil.pt2", NAMED[variant])


@pytest.mark.fault("a .pt2 whose pickled member runs code: the loader itself")
@pytest.mark.parametrize("variant", VARIANTS)
def test_hostile_pt2_is_refused_by_the_loader_itself(fault, evil_pt2, variant):
    """The safe loader holds on its own, for any caller (the CLI also refuses the pre-2.7
    layout earlier, as a zip of no known model kind)."""
    from aiot.core.safe_load import UnpicklingRefused, load_program

    path, marker = evil_pt2(variant)
    with pytest.raises(UnpicklingRefused) as refused:
        load_program(path)
    assert not marker.exists() and "weights_only" not in str(refused.value)
    assert refused.value.exit_code == 2 and NAMED[variant] in refused.value.one_line()


@pytest.mark.fault("a .pt2 whose pickled member runs code: convert")
def test_hostile_pt2_is_refused_by_convert(cli, fault, evil_pt2, tmp_path):
    path, marker = evil_pt2("pickled weight")
    result = cli("convert", str(path), "--format", "onnx", "--out", str(tmp_path / "out"), code=2)
    _refused(result, marker, "evil.pt2", "data/weights/weight_0")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.fault("a .pt2 whose pickled member runs code: run")
def test_hostile_pt2_is_refused_by_run_before_any_record(cli, fault, evil_pt2):
    path, marker = evil_pt2("sample inputs")
    result = cli("run", "--model", str(path), "--device", "local", "--format", "onnx", code=2)
    _refused(result, marker, "evil.pt2", "data/sample_inputs/model.pt")
    assert count_records() == 0


@pytest.mark.fault("a .pt2 carrying compiled AOTInductor code")
def test_pt2_with_compiled_code_is_refused(cli, fault, plain_pt2, tmp_path):
    path = _rewrite(plain_pt2, tmp_path / "aoti.pt2", lambda name, data: data,
                    {"data/aotinductor/model/model.so": b"\x7fELF" + b"\0" * 60})
    result = cli("models", "info", str(path), code=2)
    one_line_error(result, "aoti.pt2", "compiled native code", code=2)


@pytest.mark.fault("a plain .pt2 still loads")
def test_plain_pt2_still_loads(cli, fault, plain_pt2):
    out = cli("models", "info", str(plain_pt2)).stdout
    assert "parameters: 23" in out  # 4*3+3 + 3*2+2


@pytest.mark.fault("a --weights pickle of objects")
def test_hostile_weights_are_refused_without_unsafe_advice(cli, fault, tmp_path):
    marker = tmp_path / "ran"
    weights = tmp_path / "evil.pt"
    weights.write_bytes(_torch_saved({"conv.weight": Evil(marker)}))
    result = cli("convert", "tiny_cnn", "--format", "onnx", "--weights", str(weights),
                 "--out", str(tmp_path / "out"), code=2)
    _refused(result, marker, "evil.pt", "other than plain tensors")


@pytest.mark.fault("a training checkpoint that is a pickle of objects")
def test_hostile_checkpoint_is_not_resumed(fault, tmp_path, caplog):
    from aiot.host.training.trainer import CHECKPOINT_VERSION, TrainConfig, train, weights_file

    config = TrainConfig(model="tiny_cnn", dataset="digits", epochs=1, batch_size=64, limit=100, seed=0)
    marker = tmp_path / "ran"
    checkpoint = weights_file(config, tmp_path).with_suffix(".ckpt")
    checkpoint.write_bytes(_torch_saved({"v": CHECKPOINT_VERSION, "key": config.key(), "history": [],
                                         "model": Evil(marker)}))
    with caplog.at_level(logging.WARNING, logger="aiot.host.training.trainer"):
        result = train(config, weights_dir=tmp_path)
    assert not marker.exists(), "a pickle in the checkpoint ran in aiot"
    assert result.epochs_run == 1 and not checkpoint.exists()
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "other than plain tensors" in warned and "weights_only" not in warned, warned


@pytest.mark.fault("a .pt2 whose graph calls an os function")
def test_pt2_graph_calling_os_is_refused(cli, fault, plain_pt2, tmp_path):
    """The graph itself (JSON, not pickled) names its call targets by path; a node calling
    ``torch.os.mkdir`` is refused when the program is loaded, never called."""
    marker = tmp_path / "ran"
    node = {"target": "torch.os.mkdir", "name": "evil", "metadata": {}, "outputs": [],
            "inputs": [{"name": "path", "arg": {"as_string": str(marker)}, "kind": 1}]}

    def edit(name: str, data: bytes) -> bytes:
        if name != "models/model.json":
            return data
        program = json.loads(data)
        program["verifiers"] = []
        program["graph_module"]["graph"]["nodes"].insert(0, node)
        return json.dumps(program).encode()

    path = _rewrite(plain_pt2, tmp_path / "evil.pt2", edit)
    _refused(cli("models", "info", str(path), code=2), marker, "evil.pt2")


@pytest.mark.fault("a .ptl whose pickles name Python functions")
def test_ptl_with_python_globals_is_refused(cli, fault, tmp_path):
    """TorchScript's own loader resolves no Python names: the file is refused, nothing runs."""
    marker = tmp_path / "ran"
    plain = tmp_path / "plain.ptl"
    torch.jit.script(torch.nn.Linear(2, 2))._save_for_lite_interpreter(str(plain))
    evil = pickle.dumps(Evil(marker), protocol=2)
    path = _rewrite(plain, tmp_path / "evil.ptl",
                    lambda name, data: evil if name in ("data.pkl", "constants.pkl") else data)
    cli("models", "info", str(plain), "--input-shape", "input=1x2")  # the plain one loads
    result = cli("models", "info", str(path), "--input-shape", "input=1x2", code=2)
    _refused(result, marker, "evil.ptl", "cannot load")
