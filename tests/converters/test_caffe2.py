"""Caffe2 NetDef: emitted files, their round trip, and NumPy-executor parity with PyTorch."""

import shutil

import pytest

from aiot.converters import caffe2
from aiot.converters.api import build_source_model, convert_model
from aiot.converters.caffe2.converter import CAFFE_LEGACY_POOLING
from aiot.converters.caffe2.proto import parse_net
from aiot.converters.caffe2.reference import arguments, load_net, run_net
from aiot.converters.parity import compare_outputs
from aiot.converters.sidecar import read_sidecar
from aiot.core.errors import ArtifactError, ConversionError
from aiot.core.fileio import sha256_file
from tests.converters.conftest import randomize_bn

torch = pytest.importorskip("torch")
pytest.importorskip("google.protobuf")
nn = torch.nn
# AllOps's even-kernel "same" conv makes PyTorch warn about a padded copy; that is the point.
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")
ALL_OPS = ["AveragePool", "Clip", "Concat", "Conv", "FC", "Flatten", "MaxPool", "Relu",
           "SpatialBN", "Add"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return convert_model("tiny_cnn", "caffe2", tmp_path_factory.mktemp("caffe2"))


class AllOps(nn.Module):
    """Every layer kind the emitter maps, at odd sizes so ceil-mode pooling matters."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.depthwise = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8, bias=False)
        self.dilated = nn.Conv2d(8, 8, 3, padding=2, dilation=2)
        self.relu6 = nn.ReLU6()
        self.maxpool = nn.MaxPool2d(3, 2, padding=1, ceil_mode=True)
        self.avgpool = nn.AvgPool2d(3, 1, padding=1)  # count_include_pad=True
        self.avgpool_ceil = nn.AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False)
        self.same = nn.Conv2d(16, 4, 4, padding="same")  # even kernel: pads [1, 1, 2, 2]
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        x = self.relu6(self.depthwise(x))
        x = self.maxpool(x + self.dilated(x))
        x = self.avgpool_ceil(torch.cat([self.avgpool(x), x], 1))
        return self.fc(torch.flatten(self.gap(self.same(x)), 1))


_randomize_bn = randomize_bn


@pytest.fixture(scope="module")
def all_ops(tmp_path_factory):
    torch.manual_seed(0)
    model = _randomize_bn(AllOps())
    path = tmp_path_factory.mktemp("allops") / "allops.caffe2.predict_net.pb"
    facts = caffe2.Caffe2Converter().export(model, torch.randn(1, 3, 13, 13), path, {})
    return model, path, facts


def _ops(net, kind):
    return [op for op in net.op if op.type == kind]


def test_tiny_cnn_converts_with_parity(tiny):
    assert tiny.artifact.name == "tiny_cnn.caffe2.predict_net.pb"
    init = caffe2.init_net_path(tiny.artifact)
    assert init.name == "tiny_cnn.caffe2.init_net.pb" and init.exists()
    assert caffe2.Caffe2Converter().artifact_files(tiny.artifact) == [tiny.artifact, init]
    assert tiny.parity["ok"] and tiny.parity["max_abs"] < 1e-5 and tiny.parity["n"] == 8
    side = read_sidecar(tiny.artifact)
    assert side["backend"] is None and side["toolchain"]["protobuf"]
    assert side["converter"]["init_net"] == {"file": init.name, "sha256": sha256_file(init),
                                             "size_bytes": init.stat().st_size}
    assert side["converter"]["ops"] == ["Conv", "FC", "Flatten", "MaxPool", "Relu", "SpatialBN"]


def test_files_round_trip_and_fit_together(tiny):
    raw = tiny.artifact.read_bytes()
    predict = parse_net(raw)
    init = parse_net(caffe2.init_net_path(tiny.artifact).read_bytes())
    assert predict.SerializeToString() == raw  # nothing lost or reordered by parsing
    assert {op.type for op in init.op} == {"GivenTensorFill"}
    filled = [op.output[0] for op in init.op]
    assert list(predict.external_input) == ["data", *filled] == ["data", *init.external_output]
    assert list(predict.external_output) == [predict.op[-1].output[0]]
    assert [op.type for op in predict.op][:3] == ["Conv", "SpatialBN", "Relu"]
    for op in init.op:
        args = arguments(op)
        assert len(args["values"]) == torch.Size(args["shape"]).numel()


def test_arguments_are_spelled_as_caffe2_did(tiny):
    predict = parse_net(tiny.artifact.read_bytes())
    conv = arguments(_ops(predict, "Conv")[0])
    assert set(conv) == {"kernels", "strides", "pads", "dilations", "group", "order"}
    assert list(conv["pads"]) == [1, 1, 1, 1] and conv["order"] == b"NCHW"
    bn = arguments(_ops(predict, "SpatialBN")[0])
    assert bn["is_test"] == 1 and bn["epsilon"] == pytest.approx(1e-5)
    assert len(_ops(predict, "SpatialBN")[0].input) == 5  # X, scale, bias, mean, var
    assert "legacy_pad" not in arguments(_ops(predict, "MaxPool")[0])  # floor mode


def test_every_emitted_operator_matches_pytorch(all_ops):
    model, path, facts = all_ops
    assert sorted(facts["ops"]) == sorted(ALL_OPS)
    x = torch.randn(4, 3, 13, 13, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(x).numpy()
    report = compare_outputs(expected, caffe2.Caffe2Converter().reference_outputs(path, x.numpy()),
                             atol=1e-5, rtol=1e-5)
    assert report["ok"] and report["max_abs"] < 1e-5, report


def test_pooling_concat_and_padding_arguments(all_ops):
    _, path, _ = all_ops
    predict = parse_net(path.read_bytes())
    maxpool = arguments(_ops(predict, "MaxPool")[0])
    assert maxpool["legacy_pad"] == CAFFE_LEGACY_POOLING and list(maxpool["pads"]) == [1] * 4
    pools = [arguments(op) for op in _ops(predict, "AveragePool")]
    assert [p.get("count_include_pad") for p in pools] == [1, 0, None]  # last: global
    assert pools[2]["global_pooling"] == 1
    assert list(arguments(_ops(predict, "Conv")[-1])["pads"]) == [1, 1, 2, 2]
    assert arguments(_ops(predict, "Conv")[1])["group"] == 8  # depthwise
    assert arguments(_ops(predict, "Clip")[0]) == {"min": 0.0, "max": 6.0}
    concat = _ops(predict, "Concat")[0]
    assert arguments(concat) == {"axis": 1} and concat.output[1].endswith("_split_info")
    blobs = run_net(load_net(path, caffe2.init_net_path(path)), torch.randn(1, 3, 13, 13).numpy(),
                    keep_blobs=True)
    assert list(blobs[concat.output[1]]) == [8, 8]


def test_binary_convolutions_are_refused(tmp_path):
    with pytest.raises(ConversionError, match="no binary convolution") as err:
        convert_model("tiny_bnn", "caffe2", tmp_path)
    assert err.value.format == "caffe2"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("layer", "size", "match"), [
    # Caffe2 only drops a ceil-mode window that starts in the padding when pad > 0
    (nn.MaxPool2d(1, 2, ceil_mode=True), 6, "shape"),
    # PyTorch divides this window by its part inside the padding, Caffe2 by the kernel area
    (nn.AvgPool2d(3, 2, padding=1, ceil_mode=True), 6, "overhangs"),
])
def test_pooling_caffe2_would_size_differently_is_refused(tmp_path, layer, size, match):
    out = tmp_path / "m.caffe2.predict_net.pb"
    model = nn.Sequential(nn.Conv2d(1, 2, 1), layer)
    with pytest.raises(ConversionError, match=match):
        caffe2.Caffe2Converter().export(model, torch.randn(1, 1, size, size), out, {})
    assert list(tmp_path.iterdir()) == []


class SameConv(nn.Conv2d):
    """TensorFlow's static "SAME" convolution as EfficientNet ports write it: an explicit,
    asymmetric ``ZeroPad2d`` and a functional ``conv2d`` on the module's own weight."""

    def __init__(self, cin, cout, kernel, stride=1, groups=1, bias=False):
        super().__init__(cin, cout, kernel, stride, padding=0, groups=groups, bias=bias)
        self.static_padding = nn.ZeroPad2d((0, 1, 0, 1))  # left, right, top, bottom

    def forward(self, x):
        return nn.functional.conv2d(self.static_padding(x), self.weight, self.bias,
                                    self.stride, self.padding, self.dilation, self.groups)


class TfStyle(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = SameConv(3, 8, 3, stride=2)
        self.bn = nn.BatchNorm2d(8)
        self.depthwise = SameConv(8, 8, 3, stride=2, groups=8, bias=True)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = self.depthwise(torch.relu(self.bn(self.stem(x))))
        return self.fc(self.gap(x).view(x.size(0), -1))


def test_tf_same_convolutions_fold_their_padding_and_view_is_a_flatten(tmp_path):
    torch.manual_seed(0)
    model = _randomize_bn(TfStyle()).eval()
    path = tmp_path / "tf.caffe2.predict_net.pb"
    facts = caffe2.Caffe2Converter().export(model, torch.randn(1, 3, 14, 14), path, {})
    assert sorted(facts["ops"]) == sorted(["Conv", "SpatialBN", "Relu", "AveragePool",
                                           "Flatten", "FC"])  # no padding operator
    convs = _ops(parse_net(path.read_bytes()), "Conv")
    assert [list(arguments(op)["pads"]) for op in convs] == [[0, 0, 1, 1]] * 2  # t, l, b, r
    assert arguments(convs[1])["group"] == 8 and len(convs[1].input) == 3  # weight and bias
    x = torch.randn(3, 3, 14, 14, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = model(x).numpy()
    report = compare_outputs(expected, caffe2.Caffe2Converter().reference_outputs(path, x.numpy()),
                             atol=1e-5, rtol=1e-5)
    assert report["ok"], report


def test_zero_padding_that_feeds_a_pooling_is_refused(tmp_path):
    model = nn.Sequential(nn.Conv2d(1, 2, 1), nn.ZeroPad2d(1), nn.MaxPool2d(2))
    with pytest.raises(ConversionError, match=r"zero padding read by maxpool"):
        caffe2.Caffe2Converter().export(model, torch.randn(1, 1, 6, 6),
                                        tmp_path / "m.caffe2.predict_net.pb", {})
    assert list(tmp_path.iterdir()) == []


class AddsAStoredTensor(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 1)
        self.offset = nn.Parameter(torch.ones(1, 2, 1, 1))

    def forward(self, x):
        return self.conv(x) + self.offset


def test_arithmetic_on_a_stored_tensor_is_refused_at_lowering(tmp_path):
    with pytest.raises(ConversionError, match="node 'add' computes with a stored tensor"):
        caffe2.Caffe2Converter().export(AddsAStoredTensor().eval(), torch.randn(1, 1, 4, 4),
                                        tmp_path / "m.caffe2.predict_net.pb", {})
    assert list(tmp_path.iterdir()) == []


def _copy(tiny, tmp_path):
    for path in caffe2.Caffe2Converter().artifact_files(tiny.artifact):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path / tiny.artifact.name


@pytest.mark.parametrize("damage", ["truncate", "garbage", "no_init", "other_init"])
def test_damaged_artifacts_give_a_clear_error(tiny, tmp_path, damage):
    artifact = _copy(tiny, tmp_path)
    init = caffe2.init_net_path(artifact)
    if damage == "truncate":
        artifact.write_bytes(artifact.read_bytes()[: artifact.stat().st_size // 2])
    elif damage == "garbage":
        artifact.write_bytes(b"\xff" * 64)
    elif damage == "no_init":
        init.unlink()
    else:  # a valid init net, but not the one the sidecar recorded
        shutil.copy(tiny.sidecar, tmp_path / tiny.sidecar.name)
        init.write_bytes(parse_net(init.read_bytes()).SerializeToString() + b"\x3a\x01x")
    with pytest.raises(ArtifactError, match="caffe2"):
        caffe2.Caffe2Converter().reference_outputs(artifact, torch.zeros(1, 1, 28, 28).numpy())


#: Random inputs and real images each zoo model's parity is checked on.
ZOO_NOISE, ZOO_IMAGES = 2, 4
ZOO = [  # model, operators its predict net must use
    ("resnet18_cifar", {"Add", "Conv", "SpatialBN", "Relu", "AveragePool", "FC"}),
    ("mobilenet_v2_mnist", {"Clip", "Add", "Conv", "SpatialBN"}),
    ("squeezenet_cifar", {"Concat", "MaxPool", "Conv", "Relu"}),
    ("densenet121_mnist", {"Concat", "AveragePool", "SpatialBN", "FC"}),
    ("inception_v3_mnist", {"Concat", "AveragePool", "MaxPool", "FC"}),
    ("vgg_small_mnist", {"MaxPool", "Conv", "FC", "Flatten"}),
]


@pytest.mark.slow
@pytest.mark.parametrize(("model_name", "ops"), ZOO, ids=[name for name, _ in ZOO])
def test_zoo_models_match_pytorch(tmp_path, model_name, ops):
    _, model = build_source_model(model_name)
    weights = tmp_path / "weights.pt"
    torch.save(_randomize_bn(model).state_dict(), weights)
    # A few images: every one runs each emitted operator over its whole feature map in the
    # float64 NumPy executor (minutes for 40 Inception images); the sample counts' defaults are
    # the tiny model's (``tiny``) and EfficientNet-Lite0's (test_efficientnet_lite_convert).
    res = convert_model(model_name, "caffe2", tmp_path, weights=weights, parity_samples=ZOO_NOISE,
                        dataset_samples=ZOO_IMAGES)
    assert res.parity["n"] == ZOO_NOISE
    assert res.parity["ok"] and res.parity["top1_agreement"] == 1.0, res.parity
    assert res.parity["max_abs"] <= 1e-4 or res.parity["max_rel"] <= 1e-5, res.parity
    assert ops <= set(read_sidecar(res.artifact)["converter"]["ops"])
