"""Shape hints and shape options (issue 39, item 7), on ONNX files built here with
``torch.onnx.export`` and ``dynamic_axes``: a streaming model whose three inputs have free
dims is fixed in one try (every input named, each with a whole ``--input-shape`` that runs),
its recurrent state's batch (dim 1, not 0) is proposed as 1, not 128; a bare
``--input-shape`` that fits no model is refused, never silently dropped."""

from __future__ import annotations

import re

import pytest

from aiot.host.engine.shape_guess import propose
from tests.helpers import fast

FAST = fast(warmup_runs=1, cooldown=False)


@pytest.fixture(scope="module")
def streaming_onnx(tmp_path_factory):
    """Inputs ``x`` [streams, T, 16], ``state`` [1, streams, 32], ``mask`` [streams, T]:
    ``streams`` is the batch (a GRU-like state keeps it in dim 1), ``T`` the frames."""
    import torch
    from torch import nn

    class Streaming(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(16, 32)

        def forward(self, x, state, mask):
            y = self.proj(x) * mask.unsqueeze(-1)  # [S, T, 32]
            return y.sum(1) + state[0]             # [S, 32]

    path = tmp_path_factory.mktemp("stream") / "streaming.onnx"
    example = (torch.randn(2, 5, 16), torch.randn(1, 2, 32), torch.ones(2, 5))
    torch.onnx.export(Streaming().eval(), example, str(path), input_names=["x", "state", "mask"],
                      output_names=["out"], opset_version=17, dynamo=False,
                      dynamic_axes={"x": {0: "streams", 1: "T"}, "state": {1: "streams"},
                                    "mask": {0: "streams", 1: "T"}, "out": {0: "streams"}})
    return path


@pytest.fixture(scope="module")
def fixed_onnx(tmp_path_factory):
    import torch

    path = tmp_path_factory.mktemp("fixed") / "fixed.onnx"
    torch.onnx.export(torch.nn.Linear(8, 4).eval(), (torch.randn(1, 8),), str(path),
                      input_names=["x"], output_names=["y"], opset_version=17, dynamo=False)
    return path


def test_every_input_with_free_dims_is_named_in_one_refusal_that_runs(cli, streaming_onnx):
    refused = cli("run", "-m", str(streaming_onnx), "-d", "local", *FAST, code=2)
    line = " ".join(refused.stderr.split())
    assert "3 inputs of streaming.onnx have dynamic dims: 'x' [-1, -1, 16] (free: [0, 1]), " \
           "'state' [1, -1, 32] (free: [1]), 'mask' [-1, -1] (free: [0, 1])" in line
    flags = re.findall(r"--input-shape (\w+)=([0-9x]+)", line)
    assert dict(flags) == {"x": "1x128x16", "state": "1x1x32", "mask": "1x128"}  # not 1x128x32
    assert cli.json("results", "list") == []
    args = [a for name, dims in flags for a in ("--input-shape", f"{name}={dims}")]
    cli("run", "-m", str(streaming_onnx), "-d", "local", *args, *FAST)  # the hint runs
    (record,) = cli.json("results", "list")
    assert record["status"] == "ok", record["reason"]


def test_a_state_batch_in_dim_1_is_proposed_as_1_without_names():
    # A recurrent state as PyTorch's GRU/LSTM keep it, [layers x directions, N, hidden],
    # from a file that names no dims (a TFLite): N is the batch, not a 128-long sequence.
    dims, _ = propose({"name": "state", "shape": [2, -1, 128]}, facts=({}, {}))
    assert dims == [2, 1, 128]
    dims, _ = propose({"name": "feats", "shape": [1, -1, 80]}, facts=({}, {}))
    assert dims == [1, 128, 80]  # [1, T, features]: T is a sequence


def test_a_bare_input_shape_that_fits_no_model_is_refused(cli, fixed_onnx):
    zoo = cli("run", "-m", "tiny_cnn", "-d", "local", "--input-shape", "1x3x64x64", *FAST, code=2)
    assert "--input-shape 1x3x64x64 applies to no model here: tiny_cnn" in zoo.stderr
    fixed = cli("run", "-m", str(fixed_onnx), "-d", "local", "--input-shape", "1x8", *FAST, code=2)
    assert "--input-shape 1x8 applies to no model here: fixed.onnx" in fixed.stderr
    assert cli.json("results", "list") == []


def test_inputs_scoped_per_model_in_one_sweep(cli, fixed_onnx, streaming_onnx, tmp_path):
    import numpy as np

    fixed_npz, stream_npz = tmp_path / "fixed_in.npz", tmp_path / "stream_in.npz"
    np.savez(fixed_npz, x=np.ones((1, 8), np.float32))
    np.savez(stream_npz, x=np.ones((2, 3, 16), np.float32), state=np.zeros((1, 2, 32), np.float32),
             mask=np.ones((2, 3), np.float32))
    cli("sweep", "-m", f"{fixed_onnx},{streaming_onnx}", "-d", "local", "--threads", "1",
        "--inputs", f"fixed.onnx:{fixed_npz}", "--inputs", f"streaming:{stream_npz}", *FAST)
    records = {r["model"]: r for r in cli.json("results", "list")}
    assert {m: (r["status"], r["spec"]["inputs"]) for m, r in records.items()} == {
        "fixed.onnx": ("ok", "fixed_in.npz"), "streaming.onnx": ("ok", "stream_in.npz")}
    assert records["streaming.onnx"]["result"]["inputs"][0]["shape"] == [2, 3, 16]
    wrong = cli("run", "-m", str(fixed_onnx), "-d", "local", "--inputs", f"other.onnx:{fixed_npz}",
                *FAST, code=2)
    assert "'other.onnx' is no model of this run (models: fixed.onnx)" in wrong.stderr
