import pytest

from aiot.core.errors import AiotError, UnknownName
from aiot.core.registry import Registry


def test_lookup_by_name_alias_and_case():
    reg: Registry[int] = Registry("thing")
    reg.add("mobilenet_v2", 1, aliases=("mobilenetv2",))
    assert reg.get("MobileNet_V2") == 1
    assert reg.get("mobilenetv2") == 1
    assert reg.canonical("mobilenetv2") == "mobilenet_v2"
    assert "mobilenetv2" in reg and len(reg) == 1 and list(reg) == [1]


def test_unknown_name_suggests_close_matches():
    reg: Registry[int] = Registry("model")
    for i, name in enumerate(["resnet18", "resnet34", "vgg_small"]):
        reg.add(name, i)
    with pytest.raises(UnknownName) as info:
        reg.get("resnet19")
    assert isinstance(info.value, AiotError)
    assert "unknown model 'resnet19'" in info.value.one_line()
    assert "resnet18" in info.value.close


def test_unknown_name_without_close_match_lists_all():
    reg: Registry[int] = Registry("format")
    reg.add("onnx", 0)
    with pytest.raises(UnknownName, match="format") as info:
        reg.get("zzzzzz")
    assert "known: onnx" in info.value.hint


def test_duplicate_registration_is_a_bug():
    reg: Registry[int] = Registry("x")
    reg.add("a", 1, aliases=("b",))
    with pytest.raises(ValueError):
        reg.add("b", 2)


def test_register_decorator_returns_the_object():
    reg: Registry[type] = Registry("x")

    @reg.register("k")
    class K:
        pass

    assert K is not None and reg.get("k") is K
