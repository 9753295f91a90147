"""Round 3, bytes that crash aiot: damaged model files through ``models info`` and ``run``.

A runtime that reads a damaged ``.tflite`` can die in C++ (SIGSEGV, SIGBUS, SIGABRT); it
reads it in a forked child (``aiot.core.isolation``), so aiot lives on, and says in one line
naming the file what happened. The mutants are real files: seeded bit flips of a small
``.tflite`` kept beside this file (``fixtures/two_inputs.tflite``, TFLiteConverter's: inputs
``a`` and ``b`` float32 [-1, 4]); seeds 0, 7 and 12 crash LiteRT when it reads them in a bare
interpreter (which crash depends on the heap the runtime finds, so the list is wide).
"""

from __future__ import annotations

import ctypes
import os
import random
import time
from pathlib import Path

import pytest

from aiot.core import isolation
from aiot.core.errors import AiotError, ArtifactError
from aiot.core.isolation import RuntimeCrash, isolated
from tests.faults.conftest import count_records, one_line_error

ORIGINAL = Path(__file__).parent / "fixtures" / "two_inputs.tflite"
FAST = ("--device", "local", "--min-runs", "2", "--min-s", "0", "--warmup-min-s", "0",
        "--max-s", "5", "--cooldown-max-s", "0")


def _mutant(folder: Path, seed: int) -> Path:
    """``ORIGINAL`` with one to six bits flipped, chosen by ``seed``."""
    rng = random.Random(seed)
    data = bytearray(ORIGINAL.read_bytes())
    for _ in range(rng.randint(1, 6)):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    path = folder / f"mutant{seed:02d}.tflite"
    path.write_bytes(bytes(data))
    return path


def _held(result, path: Path, failed_record_ok: bool = False) -> bool:
    """Whether the command ended as it must: exit 0, one ``error:`` line naming the file
    (exit 1 or 2), or (``run``) a record failed on the device, named in its table; never a
    traceback. Returns whether it did not succeed."""
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    assert "Traceback" not in result.output, result.output
    assert result.exit_code in (0, 1, 2), (result.exit_code, result.output)
    if result.exit_code == 0:
        return False
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    if failed_record_ok and not errors and result.exit_code == 1:
        assert f"failed {FAST[1]}: " in result.output and path.name in result.output
        return True
    one_line_error(result, path.name)
    assert len(errors) == 1, result.stderr
    return True


def _invoke(cli, *args: str):
    """The CLI in-process, whatever its exit status (the ``cli`` fixture asserts one)."""
    from aiot.host.cli.app import app

    return cli.runner.invoke(app, list(args))


@pytest.mark.fault("damaged .tflite through models info")
def test_mutated_tflite_models_info(cli, fault, tmp_path):
    refused = 0
    for seed in range(20):
        path = _mutant(tmp_path, seed)
        refused += _held(_invoke(cli, "models", "info", str(path)), path)
    assert refused >= 3  # the damage is real: some mutants are not models any more
    fault.tried(20)


def _ok_records() -> int:
    """Records stored ``ok``, read with plain sqlite3 (0 without a store)."""
    import sqlite3

    path = Path(os.environ["AIOT_RESULTS_DIR"]) / "aiot.sqlite"
    if not path.exists():
        return 0
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT COUNT(*) FROM runs WHERE status = 'ok'").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.fault("damaged .tflite through run's check")
def test_mutated_tflite_run_writes_no_ok_record(cli, fault, tmp_path):
    for seed in (0, 7, 12, 1, 2):
        path = _mutant(tmp_path, seed)
        before, ok_before = count_records(), _ok_records()
        result = _invoke(cli, "run", "--model", str(path), *FAST)
        if _held(result, path, failed_record_ok=True):  # refused or failed: no ok record
            assert _ok_records() == ok_before, result.output
            if result.exit_code == 2:  # refused up front: no record at all
                assert count_records() == before, result.output
    fault.tried(5)


# -- the helper itself: a child that really dies ----------------------------------------------


def _segfault() -> str:
    ctypes.string_at(0)  # reads address 0: SIGSEGV
    return "unreachable"


@pytest.mark.fault("runtime segfaults reading a file")
def test_isolated_child_segfault_is_one_line(fault):
    with pytest.raises(RuntimeCrash) as caught:
        isolated(_segfault, file="model.tflite", runtime="litert")
    assert caught.value.one_line() == ("model.tflite: the litert runtime crashed reading it "
                                       "(SIGSEGV) (the file is damaged or not a model this "
                                       "runtime reads)")
    assert caught.value.exit_code == 2


@pytest.mark.fault("runtime aborts reading a file")
def test_isolated_child_abort_is_one_line(fault):
    with pytest.raises(RuntimeCrash, match=r"model\.onnx: the onnxruntime runtime crashed "
                                           r"reading it \(SIGABRT\)"):
        isolated(os.abort, file="model.onnx", runtime="onnxruntime")


@pytest.mark.fault("runtime hangs reading a file")
def test_isolated_child_hang_is_stopped(fault):
    t0 = time.monotonic()
    with pytest.raises(RuntimeCrash, match=r"model\.ptl: .* did not finish reading it within"):
        isolated(lambda: time.sleep(60) or "", file="model.ptl", runtime="pytorch_mobile",
                 timeout=1)
    assert time.monotonic() - t0 < 10


@pytest.mark.fault("runtime killed for memory reading a file")
def test_isolated_child_killed_names_memory(fault):
    import signal

    with pytest.raises(RuntimeCrash, match=r"SIGKILL: out of memory, or killed"):
        isolated(lambda: os.kill(os.getpid(), signal.SIGKILL) or "", file="m.tflite",
                 runtime="litert")


def test_isolated_answers_text_and_reader_errors():
    text = "signature ✓\n" * 20000  # more than a pipe holds: read while the child writes
    assert isolated(lambda: text, file="m", runtime="r") == text
    with pytest.raises(ArtifactError, match=r"m\.tflite: litert failed reading it: "
                                            r"ValueError: bad header"):
        isolated(_raises, file="m.tflite", runtime="litert")
    assert isolation.TIMEOUT_S >= 60


def _raises() -> str:
    raise ValueError("bad header\nsecond line")


def test_isolated_torch_after_the_parent_used_its_threads():
    """A forked child's first parallel region would wait for OpenMP threads that were not
    forked; the child runs torch on one thread instead (a .ptl is read by PyTorch Mobile)."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        a = torch.randn(256, 256)
        for _ in range(5):
            a @ a  # the parent's OpenMP pool is up
        assert isolated(lambda: str(float((a @ a).sum()))[:3], file="m.ptl",
                        runtime="pytorch_mobile", timeout=30)
    finally:
        torch.set_num_threads(before)


def test_isolated_child_stopped_from_outside_does_not_blame_the_file():
    import signal

    with pytest.raises(AiotError, match=r"m\.onnx: the onnxruntime runtime was stopped by "
                                        r"SIGTERM while reading it") as caught:
        isolated(lambda: os.kill(os.getpid(), signal.SIGTERM) or "", file="m.onnx",
                 runtime="onnxruntime")
    assert not isinstance(caught.value, RuntimeCrash)


def _damaged_zip(folder: Path, how: str) -> Path:
    """A lite-interpreter-shaped zip (``archive/bytecode.pkl``, a UTF-8 member name) whose
    central directory is then damaged as fuzzed ``.ptl`` files were."""
    import zipfile

    path = folder / f"{how}.ptl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/bytecode.pkl", b"\x80\x02)." * 8)
        archive.writestr("archive/data/é.bin", b"\x00" * 64)
    data = bytearray(path.read_bytes())
    central = data.index(b"PK\x01\x02")
    if how == "name":  # the UTF-8-flagged name gets a byte that cannot be UTF-8
        at = data.index("é".encode(), central)
        data[at + 1] = 0x41
    else:  # "version needed to extract" far beyond what zipfile reads
        data[central + 6] = 122
    path.write_bytes(bytes(data))
    return path


@pytest.mark.fault("damaged zip directory of a .ptl")
@pytest.mark.parametrize("how", ["name", "version"])
def test_damaged_zip_directory_is_one_line(cli, fault, tmp_path, how):
    path = _damaged_zip(tmp_path, how)
    for args in (("models", "info", str(path)), ("run", "--model", str(path), *FAST)):
        before = count_records()
        result = _invoke(cli, *args)
        one_line_error(result, path.name, "damaged zip archive", code=2)
        assert count_records() == before
