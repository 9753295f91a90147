"""Third-party-like artifacts (built by tests/third_party.py, no downloads) measured as they
are: run, a sweep mixed with zoo models, bad inputs, and on an emulated arm64 board."""

from __future__ import annotations

import numpy as np
import pytest

from aiot.host.emulator import arm64
from tests.helpers import fast, single_error

FAST = fast(warmup_runs=1)
SHAPES = ["--input-shape", "a=1x8", "--input-shape", "b=1x8"]  # the onnx's dynamic batch


def _by_model(records) -> dict:
    return {r["model"]: r for r in records}


def test_an_onnx_with_dynamic_batch_int64_scalar_and_two_outputs_runs(cli, two_input_onnx):
    # only the batch dims are free: they run at 1 without flags, as benchmark_model's do
    (defaulted,) = cli.json("run", "-m", str(two_input_onnx), *FAST)
    assert defaulted["spec"]["input_shapes"] == {"a": [1, 8], "b": [1, 8]}
    assert defaulted["provenance"]["input_shapes_defaulted"] == ["a", "b"]
    (record,) = cli.json("run", "-m", str(two_input_onnx), *SHAPES, *FAST)
    assert record["spec"] == defaulted["spec"]  # the same run as the shapes given explicitly
    assert record["status"] == "ok" and record["format"] == "onnx"
    assert record["model"] == "two_inputs.onnx"
    inputs = {i["name"]: i for i in record["result"]["inputs"]}
    assert inputs["a"]["shape"] == [1, 8] and inputs["k"] == {**inputs["k"], "shape": [],
                                                              "dtype": "int64"}
    assert [o["name"] for o in record["result"]["outputs"]] == ["scaled_sum", "dot"]
    assert record["provenance"]["artifact"]["parity"]["checked"] is False
    assert record["provenance"]["source"] == {"kind": "artifact", "name": "two_inputs.onnx",
                                              "sha256": record["artifact_sha256"],
                                              "format": "onnx"}


def test_real_values_from_an_npz_and_its_mistakes(cli, two_input_onnx, tmp_path):
    good = tmp_path / "good.npz"
    np.savez(good, a=np.ones((3, 8), np.float32), b=np.full((3, 8), 2, np.float32),
             k=np.array(4, np.int64))
    (record,) = cli.json("run", "-m", str(two_input_onnx), "--inputs", str(good), *FAST)
    inputs = {i["name"]: i for i in record["result"]["inputs"]}
    assert inputs["a"]["shape"] == [3, 8] and {i["source"] for i in inputs.values()} == {"npz"}
    assert record["result"]["outputs"][0]["fingerprint"]["head"][:2] == [12.0, 12.0]
    assert record["spec"]["inputs"] == "good.npz" and len(record["spec"]["inputs_sha256"]) == 64
    missing, wrong = tmp_path / "missing.npz", tmp_path / "wrong.npz"
    np.savez(missing, a=np.ones((1, 8), np.float32), b=np.ones((1, 8), np.float32))
    np.savez(wrong, a=np.ones((1, 8)), b=np.ones((1, 8), np.float32), k=np.array(1, np.int64))
    single_error(cli("run", "-m", str(two_input_onnx), "--inputs", str(missing), code=2),
                    "--inputs has no array 'k'")
    single_error(cli("run", "-m", str(two_input_onnx), "--inputs", str(wrong), code=2),
                    "array 'a' is float64", "takes float32")
    before = len(cli.json("results", "list"))
    assert before == 1  # the refused runs left no record


def test_a_file_its_runtime_refuses_is_one_line(cli, int8_uint8_tflite, tmp_path):
    cut = tmp_path / "cut.tflite"
    cut.write_bytes(int8_uint8_tflite.read_bytes()[:1500])
    single_error(cli("run", "-m", str(cut), code=2), "cut.tflite: litert refuses it")
    single_error(cli("run", "-m", str(int8_uint8_tflite), "-f", "onnx", code=2),
                    "int8_uint8_io.tflite is a tflite artifact, not onnx")


@pytest.mark.slow
def test_third_party_files_sweep_with_a_zoo_model(cli, int8_uint8_tflite, two_input_onnx,
                                                  two_input_ort, two_input_pte):
    models = ",".join(str(p) for p in (int8_uint8_tflite, two_input_onnx, two_input_ort,
                                        two_input_pte)) + ",tiny_cnn"
    records = cli.json("sweep", "-d", "local", "-m", models, "--threads", "1,2", *SHAPES, *FAST)
    ran = sorted({(r["model"], r["format"]) for r in records if r["status"] == "ok"})
    assert ran == [("int8_uint8_io.tflite", "tflite"), ("tiny_cnn", "tflite"),
                   ("two_inputs.onnx", "onnx"), ("two_inputs.pte", "executorch"),
                   ("two_inputs_b2.ort", "ort")], [(r["model"], r["reason"]) for r in records]
    assert len(records) == 10
    int8 = _by_model(records)["int8_uint8_io.tflite"]["result"]
    (image,) = int8["inputs"]
    assert image["dtype"] == "uint8" and image["quantization"]["zero_point"] == 0
    assert int8["outputs"][0]["dtype"] == "uint8"
    pte = _by_model(records)["two_inputs.pte"]["result"]
    assert [i["dtype"] for i in pte["inputs"]] == ["float32", "int64"]


@pytest.mark.slow
@pytest.mark.skipif(bool(arm64.missing_tools()), reason="needs qemu-user-static and mmdebstrap")
def test_third_party_files_on_an_emulated_arm64_board(cli, int8_uint8_tflite, two_input_onnx,
                                                      two_input_ort):
    cli.json("emulator", "start", "ssh", "--arch", "arm64", "--name", "pi")
    try:
        models = ",".join(str(p) for p in (int8_uint8_tflite, two_input_onnx, two_input_ort))
        records = cli.json("sweep", "-d", "pi,local", "-m", models, "--threads", "1", *SHAPES,
                           *FAST)
        assert all(r["status"] == "ok" for r in records), [r["reason"] for r in records]
        on_pi = [r for r in records if r["device"] == "pi"]
        assert len(on_pi) == 3
        assert {r["provenance"]["device"]["abi"] for r in on_pi} == {"aarch64"}
        drifts = cli.json("results", "outputs", "--reference", "local")
        assert len(drifts) == 3 and all(d["verdict"] == "match" for d in drifts), drifts
    finally:
        cli("emulator", "stop", "pi")
