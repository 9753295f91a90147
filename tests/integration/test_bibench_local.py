"""BiBench's hardware track end to end on ``local``: a binarized model on LCE and its FP32
TFLite baseline measured through the agent, then ``aiot score om-infer`` from the store."""

from __future__ import annotations

import pytest

from tests.helpers import fast

pytest.importorskip("litert_torch")

FAST = fast(5, warmup_runs=1, cooldown=False)


@pytest.mark.slow
def test_lce_bnn_and_fp32_tflite_runs_score_om_infer(cli):
    from tests.converters.conftest import need_toolchain

    need_toolchain("lce")
    (bnn,) = cli.json("run", "-m", "tiny_vgg", "-f", "lce", "--binarize", "bnn", *FAST)
    (fp,) = cli.json("run", "-m", "tiny_vgg", "-f", "tflite", *FAST)
    assert bnn["status"] == fp["status"] == "ok"
    assert bnn["spec"]["binarize"] == "bnn" and fp["spec"]["binarize"] is None
    assert bnn["provenance"]["source"]["binarize"] == "bnn"
    assert bnn["provenance"]["artifact"]["file"] == "tiny_vgg.bnn.lce.tflite"
    score = cli.json("score", "om-infer")
    (pair,) = score["pairs"]
    assert pair["algorithm"] == "bnn" and pair["format"] == "lce" and pair["fp_id"] == fp["id"]
    assert pair["speedup"] == pytest.approx(fp["median_ms"] / bnn["median_ms"])
    # 3 of 4 convs binarized: weights shrink ~20x (the FP32 stem and head remain).
    assert pair["compression"] == pytest.approx(fp["size_bytes"] / bnn["size_bytes"])
    assert pair["compression"] > 10
    (aggregate,) = score["scores"]
    assert aggregate["om_infer"] == pytest.approx(
        ((pair["speedup"] ** 2 + pair["compression"] ** 2) / 2) ** 0.5)
