"""``aiot paper bibench`` on the command line: refusals before any work, and the local grid;
the old name ``aiot bench`` still works."""

import pytest

from aiot.host.emulator import arm64


def test_unknown_size_and_device_are_refused_in_one_line(cli):
    res = cli("paper", "bibench", "--size", "mnist", code=2)
    assert "unknown size 'mnist'" in res.stderr and "imagenet, cifar" in res.stderr
    res = cli("paper", "bibench", "--device", "nosuchdevice", "--size", "cifar", code=2)
    assert "nosuchdevice" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.slow
@pytest.mark.skipif(not arm64.missing_tools(), reason="the grid on this host, with the same checks (on "
                    "ResNet18; the whole grid's shape in tests/unit/test_bibench_hw.py), runs in "
                    "tests/integration/test_bibench_arm64.py beside the emulated board")
def test_local_cifar_grid_prints_speedups_and_om_infer(cli):
    pytest.importorskip("litert_torch")
    args = ("paper", "bibench", "--device", "local", "--size", "cifar", "--threads", "1",
            "--min-runs", "3", "--min-s", "0", "--warmup-runs", "1", "--warmup-min-s", "0",
            "--cooldown-max-s", "0")
    res = cli(*args)
    text = res.stdout
    assert "BiBench hardware inference (ms) · local" in text and "OM_infer per device" in text
    for title in ("FP32", "Larq BNN", "ReAct", "daBNN FP32", "daBNN BNN", "ResNet18", "VGG-Small"):
        assert title in text
    assert "no benchmark_single_model binary configured for local" in text
    assert "×" in text  # a speed-up beside each BNN that ran
    again = cli(*args)  # everything is stored: nothing is measured again
    assert "resuming BiBench sweep" in again.stderr and "runs already done" in again.stderr


def test_the_old_name_bench_still_works_and_says_the_new_one(cli):
    assert "paper" in cli("--help").stdout and "│ bench" not in cli("--help").stdout
    res = cli("bench", "bibench", "--size", "mnist", code=2)
    assert "`aiot bench` is now `aiot paper`" in res.stderr
    assert "unknown size 'mnist'" in res.stderr
    assert "bench aiotbench [OPTIONS]" in cli("bench", "aiotbench", "--help").stdout
