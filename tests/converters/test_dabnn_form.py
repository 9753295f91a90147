"""daBNN's deployed form: clamps that float layers read are dropped, said, and measured.

BiBench's ResNet BNN clamps every block's output and adds that clamped tensor on the next
shortcut; daBNN has no clamp. The emitter alone still refuses such a graph; the converter
hands it the deployed form (those Hardtanh modules as identities) and parity is measured
against PyTorch with the same change, while the change's own cost is reported.
"""

import pytest

from tests.converters.conftest import randomize_bn

torch = pytest.importorskip("torch")
pytest.importorskip("flatbuffers")

from aiot.converters.dabnn.form import deployed_form, describe, float_read_clamps
from aiot.converters.graph import lower
from aiot.converters.sign_parity import check_sign_parity
from aiot.core.errors import ConversionError
from aiot.models.binary import BinaryConv2d
from tests.converters.test_dabnn import CONVERTER, _export, _parity

nn = torch.nn
SHAPE = (64, 6, 6)


class TinyBinaryResNet(nn.Module):
    """Stem BN → clamp → two BiBench-style blocks (clamp after the add, shared module) →
    pooling → classifier: the clamps are read by binary convs, shortcuts and the pooling."""

    def __init__(self):
        super().__init__()
        self.bn0, self.act0 = nn.BatchNorm2d(64), nn.Hardtanh()
        self.blocks = nn.ModuleList(_Block() for _ in range(2))
        self.pool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(64, 5)

    def forward(self, x):
        x = self.act0(self.bn0(x))
        for block in self.blocks:
            x = block(x)
        return self.fc(self.pool(x).flatten(1))


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = BinaryConv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64)
        self.conv2, self.bn2 = BinaryConv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64)
        self.act = nn.Hardtanh()

    def forward(self, x):
        out = self.act(self.bn1(self.conv1(x)))
        return self.act(self.bn2(self.conv2(out)) + x)


@pytest.fixture
def model():
    torch.manual_seed(0)
    net = TinyBinaryResNet()
    randomize_bn(net, 0, signed_gamma=True, bias=1, mean=1, var=2)
    return net.eval()


def test_the_training_graph_is_still_refused_by_the_emitter(model, tmp_path):
    with pytest.raises(ConversionError, match="daBNN has no clamp operator"):
        _export(model, SHAPE, tmp_path / "m.dab")


def test_float_read_clamps_are_found_with_their_readers(model):
    clamps = float_read_clamps(lower(model, torch.randn(1, *SHAPE), "dabnn"))
    # the stem clamp (read by the first shortcut), each block's clamp after its add (the
    # next shortcut, the pooling); the clamps after bn1 feed binary convs only
    assert sorted(clamps) == ["act0", "blocks_0_act_1", "blocks_1_act_1"]
    assert clamps["blocks_1_act_1"] == ["pool"] and clamps["act0"] == ["add"]


def test_the_deployed_form_converts_with_exact_parity_against_the_same_change(model, tmp_path):
    example = torch.randn(1, *SHAPE)
    changed, facts = deployed_form(model, example)
    assert facts["modules"] == ["act0", "blocks.0.act", "blocks.1.act"]
    assert facts["clamp_calls"] == 3 and facts["unclamped_readers"] == ["add", "add_1", "pool"]
    assert all(isinstance(changed.get_submodule(m), nn.Identity) for m in facts["modules"])
    assert isinstance(model.act0, nn.Hardtanh)  # the training model is left as it was
    path = tmp_path / "m.dab"
    _export(changed, SHAPE, path)
    report = _parity(changed, path, SHAPE, n=16)
    assert report["ok"] and report["top1_agreement"] == 1.0, report
    x = torch.randn(16, *SHAPE, generator=torch.Generator().manual_seed(3))
    signs = check_sign_parity(CONVERTER, changed, path, [x], {"atol": 1e-3, "rtol": None})
    assert signs["ok"] and len(signs["binary_layers"]) == 4
    # the change is real: the training graph's logits differ from the deployed form's
    with torch.no_grad():
        assert not torch.allclose(model(x), changed(x), atol=1e-3)
    assert "3 Hardtanh clamps dropped" in describe(facts)


def test_a_graph_whose_clamps_only_binary_convs_read_is_unchanged(model):
    net = nn.Sequential(nn.BatchNorm2d(64), nn.Hardtanh(), BinaryConv2d(64, 64, 3, padding=1),
                        nn.BatchNorm2d(64), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(64, 3)).eval()
    same, facts = deployed_form(net, torch.randn(1, *SHAPE))
    assert same is net and facts is None and describe(None) == "the training graph as it is"


@pytest.mark.slow
def test_resnet18_cifar_bnn_converts_to_dabnn_with_its_deployed_form_said(tmp_path):
    from aiot.converters.api import convert_model
    from aiot.converters.sidecar import read_sidecar

    res = convert_model("resnet18_cifar_bnn", "dabnn", tmp_path, dataset_samples=0)
    sidecar = read_sidecar(res.artifact)
    form = sidecar["deployed_form"]
    assert form["change"] == "clamps-dropped" and "relu" in form["modules"]
    assert "add" in form["unclamped_readers"] and "avgpool" in form["unclamped_readers"]
    assert 0 <= form["training_graph"]["top1_agreement"] <= 1 and form["training_graph"]["n"] == 8
    signs = sidecar["parity"]["signs"]
    assert sidecar["parity"]["ok"] and len(signs["binary_layers"]) == 19
