import pytest

from aiot.core.errors import UsageError
from aiot.host.cli.demo import thread_counts
from aiot.host.cli.options import parse_threads, split_list
from aiot.host.engine.runs import MeasureParams, expand_sweep


def test_expand_sweep_is_the_full_product_in_stable_order():
    reqs = expand_sweep(["local"], ["a", "b"], ["onnx", "tflite"], [1, 2])
    assert len(reqs) == 8
    assert [(r.model, r.format, r.threads) for r in reqs[:4]] == [
        ("a", "onnx", 1), ("a", "onnx", 2), ("a", "tflite", 1), ("a", "tflite", 2)]
    assert reqs[0].to_spec()["params"]["min_runs"] == 50


@pytest.mark.parametrize("kwargs", [dict(models=[]), dict(threads=[0])])
def test_expand_sweep_refuses_empty_or_bad(kwargs):
    args = dict(devices=["local"], models=["a"], formats=["onnx"], threads=[1]) | kwargs
    with pytest.raises(UsageError):
        expand_sweep(**args)


@pytest.mark.parametrize("params", [MeasureParams(min_runs=0), MeasureParams(min_s=5, max_s=1),
                                    MeasureParams(warmup_min_s=-1)])
def test_measure_params_validation(params):
    with pytest.raises(UsageError):
        params.validate()


def test_list_parsing():
    assert split_list(" a, b ,,c", "models") == ["a", "b", "c"]
    assert parse_threads("1,2,4,8") == [1, 2, 4, 8]
    with pytest.raises(UsageError, match="integers"):
        parse_threads("1,two")


@pytest.mark.parametrize("cores, expected", [(1, [1]), (2, [1, 2]), (6, [1, 2, 4, 6]), (8, [1, 2, 4, 8])])
def test_demo_thread_counts(cores, expected):
    assert thread_counts(cores) == expected


def test_arch_spellings_of_android_uname_and_python_agree():
    from aiot.core.arch import canonical as _arch

    assert _arch("arm64-v8a") == _arch("aarch64") == _arch("ARM64")
    assert _arch("AMD64") == _arch("x86_64")
    assert _arch("aarch64") != _arch("x86_64")
