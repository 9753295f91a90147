"""The model zoo: every entry builds and runs; counts match the reference implementations."""

import pytest

from aiot.core.errors import AiotError, UnknownName
from aiot.models import ZOO, count_complexity, get_model_spec

torch = pytest.importorskip("torch")

SMALL = [s.name for s in ZOO if s.variant != "imagenet"]
IMAGENET = [s.name for s in ZOO if s.variant == "imagenet"]

# Parameter counts of torchvision's implementations of the same architectures.
TORCHVISION_PARAMS = {
    "resnet18": 11_689_512, "resnet34": 21_797_672, "resnet50": 25_557_032,
    "mobilenet_v2": 3_504_872, "densenet121": 7_978_856, "squeezenet": 1_248_424,
    "squeezenet1_1": 1_235_496, "mnasnet": 4_383_312, "inception_v3": 23_834_568,
}
# Multiply-accumulates (millions) as commonly reported for the torchvision models.
KNOWN_MACS_M = {"resnet18": 1814, "resnet50": 4089, "mobilenet_v2": 301, "mnasnet": 314,
                "densenet121": 2834, "inception_v3": 5713}


@pytest.mark.parametrize("name", SMALL)
def test_small_variants_build_and_run(name):
    spec = get_model_spec(name)
    out = spec.build()(spec.example_input(batch=2))
    assert out.shape == (2, spec.num_classes)
    assert spec.input.shape[1] in (28, 32) and torch.isfinite(out).all()


@pytest.mark.slow
@pytest.mark.parametrize("name", IMAGENET)
def test_imagenet_variants_build_and_run(name):
    spec = get_model_spec(name)
    assert spec.build()(spec.example_input()).shape == (1, 1000)


@pytest.mark.parametrize("name, params", TORCHVISION_PARAMS.items())
def test_parameter_counts_match_torchvision(name, params):
    assert get_model_spec(name).complexity().params == params


@pytest.mark.parametrize("name, macs_m", KNOWN_MACS_M.items())
def test_macs_match_known_values(name, macs_m):
    assert get_model_spec(name).complexity().macs / 1e6 == pytest.approx(macs_m, rel=0.01)


def test_aiotbench_reference_flops_are_recorded():
    refs = {s.family: s.reference_flops_m for s in ZOO if s.paper == "AIoTBench"}
    assert refs == {"resnet50": 3800, "inception_v3": 5000, "densenet121": 2800, "squeezenet": 833,
                    "mobilenet_v2": 300, "mnasnet": 315}


def test_count_complexity_by_hand():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1, groups=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 8, 3, padding=1, groups=8), torch.nn.Flatten(),
                                torch.nn.Linear(8 * 4 * 4, 5))
    c = count_complexity(model, (1, 3, 4, 4))
    assert c.params == (3 * 8 * 9 + 8) + (8 * 9 + 8) + (128 * 5 + 5)
    assert c.macs == 16 * 8 * 27 + 16 * 8 * 9 + 128 * 5


def test_counts_come_from_the_meta_device_or_the_cpu_alike():
    """Zoo models are counted on PyTorch's meta device (no weights: the known values above);
    a model whose forward needs real values is counted on the CPU, with the same numbers."""
    from aiot.models.complexity import count_built

    class DataDependent(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(x if x.sum().item() >= 0 else -x)  # .item(): meta tensors have no value

    devices = []
    counted = count_built(lambda: devices.append(torch.empty(0).device.type) or DataDependent(), (1, 4))
    assert devices == ["meta", "cpu"] and (counted.params, counted.macs) == (10, 8)
    devices.clear()
    assert count_built(lambda: devices.append(torch.empty(0).device.type) or torch.nn.Linear(4, 2),
                       (1, 4)).macs == 8 and devices == ["meta"]


def test_example_input_is_deterministic_and_normalised():
    spec = get_model_spec("tiny_cnn")
    a, b = spec.example_input(batch=3, seed=5), spec.example_input(batch=3, seed=5)
    assert torch.equal(a, b) and a.shape == (3, 1, 28, 28)
    lo = (0 - spec.input.mean[0]) / spec.input.std[0]
    assert a.min() >= lo - 1e-6


def test_weights_round_trip(tmp_path):
    spec = get_model_spec("tiny_cnn")
    model = spec.build()
    path = tmp_path / "w.pt"
    torch.save(model.state_dict(), path)
    again = spec.build(weights=path)
    x = spec.example_input()
    assert torch.equal(model(x), again(x)) and not again.training


@pytest.mark.parametrize("content", [b"not a torch file", None])
def test_bad_weights_name_the_file(tmp_path, content):
    path = tmp_path / "bad.pt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(AiotError, match="bad.pt"):
        get_model_spec("tiny_cnn").build(weights=path)


def test_weights_of_another_model_are_refused(tmp_path):
    path = tmp_path / "other.pt"
    torch.save(get_model_spec("vgg_small_mnist").build().state_dict(), path)
    with pytest.raises(AiotError, match="other.pt"):
        get_model_spec("tiny_cnn").build(weights=path)


def test_aliases_and_suggestions():
    assert get_model_spec("MobileNetV2").name == "mobilenet_v2"
    assert get_model_spec("resnet-18").name == "resnet18"
    with pytest.raises(UnknownName) as info:
        get_model_spec("resnet19")
    assert "resnet18" in info.value.close


@pytest.mark.slow
@pytest.mark.parametrize("name", SMALL)
def test_small_variants_export(name):
    spec = get_model_spec(name)
    model, x = spec.build(), spec.example_input()
    exported = torch.export.export(model, (x,))
    assert torch.allclose(exported.module()(x), model(x), atol=1e-4, rtol=1e-4)
