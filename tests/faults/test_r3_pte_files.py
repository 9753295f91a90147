"""Round 3, bytes that crash aiot: damaged ExecuTorch programs through ``models info`` and
``run``'s check.

A ``.pte``'s inputs and outputs are read from its flatbuffer
(``aiot.device_agent.backends.pte_io``) in a forked child of aiot, not by starting the
``executorch`` toolchain's interpreter (some 20 s a file): a damaged program is one line
naming it, and aiot never reads past the file's end. The mutants are real files: seeded damage
of ``fixtures/two_inputs.pte``, made by ``tests.third_party.pte_program`` in the toolchain
(``input_0`` float32 [1, 8], ``input_1`` int64 [1, 3]; two float32 [1, 3] outputs).
"""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest

from aiot.device_agent.backends.pte_io import program_bytes, read_io
from tests.faults.conftest import count_records, one_line_error

ORIGINAL = Path(__file__).parent / "fixtures" / "two_inputs.pte"


def _entry(name: str, shape: list[int], dtype: str = "float32") -> dict:
    return {"name": name, "shape": shape, "dtype": dtype, "quantization": None}


def _mutant(data: bytes, rng: random.Random) -> bytes:
    """One seeded damage of ``data``: bit flips, a truncation or a random run of bytes."""
    out = bytearray(data)
    kind = rng.randrange(3)
    if kind == 0:
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    elif kind == 1:
        del out[rng.randrange(len(out)):]
    else:
        start = rng.randrange(len(out))
        out[start:start + 16] = rng.randbytes(len(out[start:start + 16]))
    return bytes(out)


def _invoke(cli, *args: str):
    """The CLI in-process, whatever its exit status (the ``cli`` fixture asserts one)."""
    from aiot.host.cli.app import app

    return cli.runner.invoke(app, list(args))


@pytest.mark.fault(".pte read without its toolchain")
def test_pte_signature_is_read_without_starting_the_toolchain(cli, fault, tmp_path,
                                                              monkeypatch):
    monkeypatch.setenv("AIOT_TOOLCHAINS_DIR", str(tmp_path / "no-toolchains"))  # none there
    found = cli.json("models", "info", str(ORIGINAL))
    assert found["inputs"] == [_entry("input_0", [1, 8]), _entry("input_1", [1, 3], "int64")]
    assert found["outputs"] == [_entry("output_0", [1, 3]), _entry("output_1", [1, 3])]
    assert "runtime first loads it when it runs" in found["note"]  # what was not checked


@pytest.mark.fault("damaged .pte through the flatbuffer reader")
def test_damaged_pte_is_a_value_error_or_a_signature(fault):
    data, rng = ORIGINAL.read_bytes(), random.Random(35)
    refused = 0
    for _ in range(2000):  # microseconds each: the reader is pure Python over the bytes
        try:
            inputs, outputs = read_io(program_bytes(io.BytesIO(_mutant(data, rng))))
        except ValueError:
            refused += 1
            continue
        assert all(set(e) == {"name", "shape", "dtype", "quantization"}
                   for e in inputs + outputs)
    assert refused >= 100  # the damage is real: many mutants are not programs any more
    fault.tried(2000)


@pytest.mark.fault("damaged .pte through models info")
def test_mutated_pte_models_info_is_one_line_or_a_signature(cli, fault, tmp_path):
    data, rng = ORIGINAL.read_bytes(), random.Random(7)
    refused = 0
    for seed in range(30):
        path = tmp_path / f"mutant{seed:02d}.pte"
        path.write_bytes(_mutant(data, rng))
        result = _invoke(cli, "models", "info", str(path))
        assert result.exit_code in (0, 2), (result.exit_code, result.output)
        if result.exit_code == 2:
            one_line_error(result, path.name)
            assert len([x for x in result.stderr.splitlines() if x.startswith("error:")]) == 1
            refused += 1
    assert refused >= 5
    fault.tried(30)


@pytest.mark.fault("truncated .pte through run's check")
def test_truncated_pte_is_refused_before_any_record(cli, fault, tmp_path, monkeypatch):
    monkeypatch.setenv("AIOT_TOOLCHAINS_DIR", str(tmp_path / "no-toolchains"))
    path = tmp_path / "cut.pte"
    path.write_bytes(ORIGINAL.read_bytes()[:600])
    before = count_records()
    result = _invoke(cli, "run", "--model", str(path), "--device", "local", "--min-runs", "2",
                     "--min-s", "0")
    one_line_error(result, "cut.pte", "executorch refuses it", code=2)
    assert count_records() == before
