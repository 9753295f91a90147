"""Native benchmark adapters: recorded and synthesized outputs, command lines, plumbing.

Every expected number below was read off the fixture text by hand (see
``fixtures/native/SOURCES.md`` for where each fixture comes from). Conversions are spelled out
where a unit changes: TFLite prints microseconds, onnxruntime_perf_test seconds for session and
percentiles and milliseconds for the mean, Google Benchmark its ``time_unit``.
"""

from __future__ import annotations

import json
import shutil
import stat
import sys
from pathlib import Path

import pytest

from aiot.core.errors import DeviceCommandError, UnknownName, UsageError
from aiot.host.devices.inventory import InventoryError
from aiot.host.native import (
    TOOLS,
    InputSpec,
    NativeOutputError,
    NativeSpec,
    adapters_for_format,
    ensure_binary,
    get_adapter,
    inventory_binaries,
    resolve_binary,
    run_native,
)
from aiot.host.native.dabnn import parse_google_benchmark
from aiot.host.native.errors import TAIL_CHARS
from aiot.host.transports.base import ShellResult
from aiot.host.transports.local import LocalTransport

FIXTURES = Path(__file__).parent / "fixtures" / "native"
approx = pytest.approx


def fixture(tool: str, name: str) -> str:
    return (FIXTURES / tool / name).read_text(encoding="utf-8")


def parse(tool: str, name: str, **kwargs) -> dict:
    return get_adapter(tool).parse(fixture(tool, name), **kwargs)


# --- every fixture is covered --------------------------------------------------------------

EXPECTED_FILES = {
    "benchmark_model": {"2019-08-yuenshome-77.txt", "2020-08-tensorflow-42507.txt",
                        "2021-09-xnnpack-999.txt",
                        # op-profiling outputs, tested in test_op_profile.py
                        "2022-02-riscv64-op-profiling.txt", "2022-02-imx8mp-cpu-op-profiling.txt",
                        "2022-02-imx8mp-vx-delegate-op-profiling.txt",
                        "2024-x86-64-xnnpack-op-profiling-excerpt.txt",
                        # delegation lines, tested in test_placement.py
                        "2021-11-rpi4-xnnpack-partial-22-kernels.txt",
                        "2024-tf2.15-synaptics-nnapi-whole-graph.txt",
                        "synaptics-nnapi-cache-excerpt-old-line.txt",
                        "code-index-mask-estimator-xnnpack-49-of-49.txt",
                        "code-index-mask-estimator-gpu-then-nnapi.txt",
                        "2026-07-logcat-xnnpack-792-of-836.txt"},
    "lce_benchmark_model": {"2020-08-larq-docs-end-to-end-prerelease.txt",
                            "2020-08-larq-docs-end-to-end-v0.4.0.txt",
                            "v0.3.1-synthesized.txt", "v0.16.0-synthesized.txt"},
    "speed_benchmark_torch": {"2020-pytorch-tutorials-mobile-perf.txt",
                              "2021-v1.7.1-report-pep-build-guide.txt",
                              "0c678301-report-pep-synthesized.txt"},
    "benchmark_single_model": {"2019-05-dabnn-docs-console.txt",
                               "gbench-f0901417-json-synthesized.txt",
                               "d93aa950-console-recorded-here.txt",
                               "d93aa950-json-recorded-here.txt"},
    "executor_runner": {"2023-11-executorch-1231.txt", "v1.0.0-synthesized.txt",
                        "main-cff6f4dd-synthesized.txt", "v1.4.1-runner-recorded-here.txt"},
    "onnxruntime_perf_test": {"2019-upstream-readme.txt", "2020-01-onnxruntime-pr2798.txt",
                              "2021-05-onnxruntime-pr7663.txt",
                              "2025-arm-learning-path-kleidiai.txt"},
    "speed_benchmark": {"2019-06-gen-efficientnet-b0.txt",
                        "2019-07-mkldnn-report-async-net.txt",
                        "2019-07-mkldnn-report-caffe2-0.8.1-dag-net.txt",
                        "caffe2-7ee47316-glog-synthesized.txt",
                        "pytorch-02786a38-cout-synthesized.txt"},
}


def test_every_tool_has_two_fixtures_and_each_is_tested_and_sourced():
    sources = (FIXTURES / "SOURCES.md").read_text(encoding="utf-8")
    assert set(EXPECTED_FILES) == set(TOOLS.names())
    for tool, names in EXPECTED_FILES.items():
        on_disk = {p.name for p in (FIXTURES / tool).glob("*.txt")}
        assert on_disk == names and len(names) >= 2, tool
        for name in names:
            assert f"`{tool}/{name}`" in sources, name
            assert ("synthesized" in name) == (f"`{tool}/{name}` | **synthesized**" in sources)


# --- TFLite benchmark_model ----------------------------------------------------------------

def test_tflite_2019_old_summary_spelling():
    rec = parse("benchmark_model", "2019-08-yuenshome-77.txt")
    assert rec["backend"] == "native:benchmark_model" and rec["runtime_version"] is None
    # "Average inference timings in us: Warmup: 76605.9, Init: 9933, no stats: 66767.6"
    assert rec["native"]["raw_summary"] == {"Warmup": 76605.9, "Init": 9933.0,
                                            "no stats": 66767.6}
    assert rec["load_ms"] == approx(9.933)  # Init 9933 us
    assert rec["first_inference_ms"] == approx(127.425)  # warm-up stat first=127425 us
    assert rec["warmup"] == {"count": 7, "mean_ms": approx(76.6059)}
    assert rec["stats_ms"] == {"count": 15, "mean": approx(66.7676), "min": approx(66.699),
                               "max": approx(66.838), "std": approx(0.039)}
    assert rec["threads"] is None and "samples_ns" not in rec  # not printed in this excerpt


def test_tflite_2020_peak_memory_and_threads():
    rec = parse("benchmark_model", "2020-08-tensorflow-42507.txt")
    assert rec["threads"] == 4
    assert rec["load_ms"] == approx(0.855)  # Init: 855 us (= "Initialized session in 0.855ms")
    assert rec["first_inference_ms"] == approx(49.06)
    assert rec["warmup"] == {"count": 15, "mean_ms": approx(34.8251)}
    assert rec["stats_ms"] == {"count": 50, "mean": approx(33.2094), "min": approx(32.641),
                               "max": approx(34.005), "std": approx(0.45)}
    native = rec["native"]
    assert native["memory_mb"] == {"kind": "peak", "init": 0.0, "overall": 12.8672}
    assert native["model_size_mb"] == approx(0.004448)
    assert native["params"]["Enable op profiling"] == "1"


def test_tflite_2021_memory_delta_and_xnnpack_message():
    rec = parse("benchmark_model", "2021-09-xnnpack-999.txt")
    assert rec["threads"] == 4 and rec["load_ms"] == approx(18.777)
    assert rec["first_inference_ms"] == approx(64.791)
    assert rec["warmup"] == {"count": 9, "mean_ms": approx(57.7582)}
    assert rec["stats_ms"] == {"count": 50, "mean": approx(55.0432), "min": approx(53.077),
                               "max": approx(60.727), "std": approx(1.562)}
    assert rec["native"]["memory_mb"] == {"kind": "delta", "init": 8.97656, "overall": 18.7227}
    assert ("INFO: Created TensorFlow Lite XNNPACK delegate for CPU."
            in rec["native"]["delegate_messages"])


def test_tflite_all_same_stat_line_and_profiling_summaries_are_not_runs():
    text = ("Running benchmark for at least 1 iterations and at least 0.5 seconds\n"
            "count=3 curr=1200(all same)\n\n"
            "Running benchmark for at least 2 iterations and at least 1 seconds\n"
            "count=2 curr=1000(all same)\n"
            "Timings (microseconds): count=2 first=999 curr=999 min=999 max=999 avg=999 std=0\n")
    rec = get_adapter("benchmark_model").parse(text)
    assert rec["stats_ms"] == {"count": 2, "mean": 1.0, "min": 1.0, "max": 1.0, "std": 0.0}
    assert rec["warmup"] == {"count": 3, "mean_ms": 1.2}


# --- lce_benchmark_model --------------------------------------------------------------------

def test_lce_v0_16_echoes_lce_flags():
    rec = parse("lce_benchmark_model", "v0.16.0-synthesized.txt")
    assert rec["backend"] == "native:lce_benchmark_model"
    assert rec["threads"] == 4 and rec["load_ms"] == approx(62.307)
    assert rec["first_inference_ms"] == approx(53.118)
    assert rec["warmup"] == {"count": 11, "mean_ms": approx(46.3124)}
    assert rec["stats_ms"] == {"count": 50, "mean": approx(45.1229), "min": approx(44.61),
                               "max": approx(46.894), "std": approx(0.418)}
    assert rec["native"]["params"]["Use reference Bconv"] == "1"
    assert rec["native"]["memory_mb"] == {"kind": "delta", "init": 19.8633, "overall": 29.0898}


def test_lce_v0_3_tf22_era():
    rec = parse("lce_benchmark_model", "v0.3.1-synthesized.txt")
    assert rec["threads"] == 1 and rec["load_ms"] == approx(41.12)
    assert rec["first_inference_ms"] == approx(138.915)
    assert rec["warmup"] == {"count": 4, "mean_ms": approx(130.532)}
    assert rec["stats_ms"] == {"count": 50, "mean": approx(127.655), "min": approx(126.988),
                               "max": approx(129.875), "std": approx(0.512)}
    assert rec["native"]["memory_mb"] == {"kind": "peak", "init": 14.7344, "overall": 22.6211}


def test_lce_recorded_2020_docs_runs_with_elided_parameters():
    # The guide elides part of the parameter echo with "..." lines; the rest still parses.
    pre = parse("lce_benchmark_model", "2020-08-larq-docs-end-to-end-prerelease.txt")
    assert pre["threads"] == 1 and pre["load_ms"] == approx(3.501)
    assert pre["first_inference_ms"] == approx(156.677)
    assert pre["warmup"] == {"count": 12, "mean_ms": approx(43.2681)}
    assert pre["stats_ms"] == {"count": 50, "mean": approx(33.0718), "min": approx(32.687),
                               "max": approx(33.239), "std": approx(0.129)}
    v040 = parse("lce_benchmark_model", "2020-08-larq-docs-end-to-end-v0.4.0.txt")
    assert v040["load_ms"] == approx(1.471) and v040["first_inference_ms"] == approx(41.707)
    assert v040["warmup"] == {"count": 16, "mean_ms": approx(32.4914)}
    assert v040["stats_ms"] == {"count": 50, "mean": approx(31.4206), "min": approx(31.138),
                                "max": approx(31.929), "std": approx(0.26)}
    assert v040["native"]["params"]["Min num runs"] == "50"
    assert v040["native"]["memory_mb"] is None


# --- speed_benchmark_torch -------------------------------------------------------------------

def test_torch_tutorial_output_has_only_a_mean():
    rec = parse("speed_benchmark_torch", "2020-pytorch-tutorials-mobile-perf.txt")
    assert rec["stats_ms"] == {"mean": approx(121.318)}  # "Microseconds per iter: 121318"
    assert "samples_ns" not in rec and rec["threads"] is None and rec["load_ms"] is None
    assert rec["native"]["iters_per_second"] == approx(8.24281)


def test_torch_report_pep_gives_samples():
    rec = parse("speed_benchmark_torch", "0c678301-report-pep-synthesized.txt")
    assert rec["samples_ns"] == [12034000, 11987000, 12101000, 11950000, 12011000]
    stats = rec["stats_ms"]
    assert stats["count"] == 5 and stats["mean"] == approx(12.0166)  # 60083 us / 5
    assert (stats["min"], stats["max"], stats["median"]) == approx((11.95, 12.101, 12.011))
    assert rec["native"]["per_iter_ms_with_overhead"] == approx(12.0326)
    assert rec["native"]["pep_unit_note"] is None


def test_torch_v1_7_1_recorded_report_pep_on_a_phone():
    rec = parse("speed_benchmark_torch", "2021-v1.7.1-report-pep-build-guide.txt")
    assert rec["samples_ns"] == [599746000, 570505000, 583396000]
    assert rec["stats_ms"]["count"] == 3 and rec["stats_ms"]["mean"] == approx(584.549)
    assert rec["stats_ms"]["median"] == approx(583.396)
    # The loop's wall time per iteration, a little above the samples' mean, kept apart.
    assert rec["native"]["per_iter_ms_with_overhead"] == approx(584.558)
    assert rec["native"]["iters_per_second"] == approx(1.71069)
    assert rec["native"]["pep_unit_note"] is None  # 584 ms labelled "us" is microseconds


def test_torch_pre_2020_observer_values_labelled_us_are_read_as_ms():
    text = ('PyTorchObserver {"type": "NET", "unit": "us", "metric": "latency", "value": "12.5"}\n'
            'PyTorchObserver {"type": "NET", "unit": "us", "metric": "latency", "value": "11.5"}\n'
            "Main run finished. Microseconds per iter: 12040. Iters per second: 83.0565\n")
    rec = get_adapter("speed_benchmark_torch").parse(text)
    assert rec["samples_ns"] == [12500000, 11500000]
    assert "milliseconds" in rec["native"]["pep_unit_note"]


# --- benchmark_single_model (daBNN / Google Benchmark) --------------------------------------

def test_dabnn_console_table_recorded():
    text = fixture("benchmark_single_model", "2019-05-dabnn-docs-console.txt")
    result = parse_google_benchmark(text, name="dabnn_bireal18_imagenet")
    assert result["mean_ms"] == approx(61.920154)  # 61920154 ns
    assert result["cpu_mean_ms"] == approx(61.339185) and result["iterations"] == 10
    with pytest.raises(NativeOutputError, match="dabnn_bireal18_imagenet_stem"):
        get_adapter("dabnn").parse(text)  # no single_model row and several others


def test_dabnn_json_repetitions_and_aggregates():
    rec = parse("benchmark_single_model", "gbench-f0901417-json-synthesized.txt")
    assert rec["threads"] == 1 and "samples_ns" not in rec
    # mean of 61920154, 62051873, 61874410 ns (10 iterations each)
    assert rec["stats_ms"] == {"mean": approx(61.948812333), "count": 30}
    native = rec["native"]
    assert native["aggregates"] == {"mean": approx(61.948812333), "median": approx(61.920154),
                                    "stddev": approx(0.092137148557)}
    assert native["cpu_mean_ms"] == approx(61.343478667)
    assert [r["real_ms"] for r in native["repetitions"]] == approx([61.920154, 62.051873,
                                                                    61.87441])
    assert native["google_benchmark_version"] is None
    assert len(native["raw_summary"]) == 6  # three repetitions, three aggregates
    assert native["context"]["library_build_type"] == "release"


def test_dabnn_recorded_here_json_and_coloured_console():
    json_run = parse("benchmark_single_model", "d93aa950-json-recorded-here.txt")
    # iteration-weighted mean of 9178323.7, 16264350.2 and 11984432.2 ns (76 iterations each)
    assert json_run["stats_ms"] == {"mean": approx(12.475702), "count": 228}
    assert json_run["native"]["aggregates"] == {"mean": approx(12.475702),
                                                "median": approx(11.984432),
                                                "stddev": approx(3.568466)}
    assert json_run["native"]["context"]["num_cpus"] == 2
    # The console table of that Google Benchmark is coloured even in a file.
    text = fixture("benchmark_single_model", "d93aa950-console-recorded-here.txt")
    assert "\x1b[0;32m" in text
    console = get_adapter("benchmark_single_model").parse(text)
    assert console["stats_ms"] == {"mean": approx((15541464 + 14429662 + 15152335) / 3e6),
                                   "count": 135}
    assert console["native"]["aggregates"] == {"mean": approx(15.041154),
                                               "median": approx(15.152335),
                                               "stddev": approx(0.564178)}


@pytest.mark.parametrize("unit, value, expected_ms", [("ns", 2.5e7, 25.0), ("us", 2500.0, 2.5),
                                                     ("ms", 61.9, 61.9), ("s", 0.5, 500.0)])
def test_google_benchmark_time_units(unit, value, expected_ms):
    doc = {"context": {"library_version": "v1.8.3"}, "benchmarks": [
        {"name": "single_model", "run_name": "single_model", "run_type": "iteration",
         "iterations": 4, "real_time": value, "cpu_time": value, "time_unit": unit},
        {"name": "single_model_mean", "run_name": "single_model", "run_type": "aggregate",
         "aggregate_name": "mean", "iterations": 4, "real_time": value, "cpu_time": value,
         "time_unit": unit}]}
    rec = get_adapter("benchmark_single_model").parse("log line\n" + json.dumps(doc, indent=2))
    assert rec["stats_ms"] == {"mean": approx(expected_ms), "count": 4}
    assert rec["native"]["aggregates"] == {"mean": approx(expected_ms)}
    assert rec["native"]["google_benchmark_version"] == "v1.8.3"


def test_google_benchmark_error_is_reported():
    doc = {"benchmarks": [{"name": "single_model", "run_type": "iteration",
                           "error_occurred": True, "error_message": "model file not found",
                           "iterations": 0}]}
    with pytest.raises(NativeOutputError, match="model file not found"):
        get_adapter("benchmark_single_model").parse(json.dumps(doc))


# --- executor_runner ----------------------------------------------------------------------

def test_executorch_2023_reads_log_timestamps():
    rec = parse("executor_runner", "2023-11-executorch-1231.txt")
    # "Inputs prepared." at 00:00:00.437405, "Model executed successfully." at 00:02:23.767346
    assert rec["stats_ms"] == {"mean": approx(143329.941), "count": 1}
    assert rec["native"]["timing_source"] == "log_timestamps"
    assert rec["native"]["raw_summary"][1].endswith("] Model executed successfully.")
    assert rec["load_ms"] is None and rec["threads"] is None and "samples_ns" not in rec


def test_executorch_v1_total_line():
    rec = parse("executor_runner", "v1.0.0-synthesized.txt")
    assert rec["stats_ms"] == {"mean": approx(33.0278125), "count": 10}  # 330.278125 ms / 10
    assert rec["threads"] == 4 and rec["load_ms"] is None
    assert rec["native"]["total_ms"] == approx(330.278125)
    folded = parse("executor_runner", "v1.0.0-synthesized.txt", warmup_iterations=2)
    assert folded["native"]["includes_warmup_iterations"] == 2


def test_executorch_main_iterations_split_warmup():
    rec = parse("executor_runner", "main-cff6f4dd-synthesized.txt", warmup_iterations=1)
    assert rec["load_ms"] == approx(39.258) and rec["threads"] == 4
    assert rec["first_inference_ms"] == approx(98.412)
    assert rec["warmup"] == {"count": 1, "mean_ms": approx(98.412)}
    assert rec["samples_ns"] == [31904500, 31577250, 32118000]
    stats = rec["stats_ms"]
    assert stats["count"] == 3 and stats["mean"] == approx(95.59975 / 3)
    assert (stats["min"], stats["median"], stats["max"]) == approx((31.57725, 31.9045, 32.118))
    assert rec["native"]["total_ms"] == approx(194.01175)
    whole = parse("executor_runner", "main-cff6f4dd-synthesized.txt")
    assert len(whole["samples_ns"]) == 4 and whole["warmup"] is None



def test_executorch_v1_4_1_runner_recorded_here():
    rec = parse("executor_runner", "v1.4.1-runner-recorded-here.txt", warmup_iterations=1)
    assert rec["load_ms"] == approx(1.87659)
    assert rec["warmup"] == {"count": 1, "mean_ms": approx(0.194976)}
    assert rec["samples_ns"] == [124503, 122600, 122269, 124444]
    assert rec["stats_ms"]["median"] == approx((122.6 + 124.444) / 2 / 1000)
    assert rec["native"]["total_ms"] == approx(0.688792)
    assert rec["native"]["timing_source"] == "iteration_lines"


# --- onnxruntime_perf_test ------------------------------------------------------------------

def test_ort_2019_readme_spelling_seconds_to_ms():
    rec = parse("onnxruntime_perf_test", "2019-upstream-readme.txt")
    stats = rec["stats_ms"]
    assert stats["count"] == 1000 and stats["mean"] == approx(58.8053)
    assert stats["min"] == approx(55.9777)  # "Min Latency is 0.0559777sec"
    assert (stats["max"], stats["median"], stats["p90"], stats["p95"], stats["p99"]) == approx(
        (62.3472, 58.7108, 59.9845, 60.5676, 61.9517))
    assert "p999" not in stats  # the README's own line is cut short: never guessed
    assert rec["load_ms"] is None and rec["first_inference_ms"] is None


def test_ort_2020_no_space_after_colon():
    rec = parse("onnxruntime_perf_test", "2020-01-onnxruntime-pr2798.txt")
    assert rec["load_ms"] == approx(1841.49)  # "Session creation time cost:1.84149 s"
    assert rec["stats_ms"] == {"count": 1, "mean": approx(734.606)}
    assert rec["threads"] is None  # "Setting intra_op_num_threads to 0": ORT's choice
    assert rec["native"]["total_inference_s"] == approx(0.734606)


def test_ort_2021_percentiles():
    rec = parse("onnxruntime_perf_test", "2021-05-onnxruntime-pr7663.txt")
    assert rec["load_ms"] == approx(2868.47)
    assert rec["stats_ms"] == {"count": 3, "mean": approx(125.017), "min": approx(120.368),
                               "max": approx(128.936), "median": approx(125.747),
                               "p90": approx(128.936), "p95": approx(128.936),
                               "p99": approx(128.936), "p999": approx(128.936)}
    assert rec["native"]["avg_cpu_usage_percent"] == 44
    assert rec["native"]["peak_working_set_bytes"] == 838090752


def test_ort_2025_total_spelling_and_first_inference():
    rec = parse("onnxruntime_perf_test", "2025-arm-learning-path-kleidiai.txt")
    assert rec["threads"] == 1 and rec["load_ms"] == approx(217.932)
    assert rec["first_inference_ms"] == 196.0
    assert rec["warmup"] == {"count": 1, "mean_ms": 196.0}
    stats = rec["stats_ms"]
    assert stats["count"] == 5 and stats["mean"] == approx(98.961997)
    assert (stats["min"], stats["median"], stats["max"]) == approx((95.8204, 99.5086, 101.519))
    assert rec["native"]["inferences_per_second"] == approx(10.104)
    assert rec["native"]["raw_summary"] == "Average inference time cost total: 98.961997 ms"


# --- Caffe2 speed_benchmark -----------------------------------------------------------------

def test_caffe2_glog_and_cout_variants():
    glog = parse("speed_benchmark", "caffe2-7ee47316-glog-synthesized.txt")
    assert glog["stats_ms"] == {"mean": approx(62.5382)}
    assert glog["native"]["iters_per_second"] == approx(15.9902)
    cout = parse("speed_benchmark", "pytorch-02786a38-cout-synthesized.txt")
    assert cout["stats_ms"] == {"mean": approx(31.2489)} and cout["native"]["operators"] is None


def test_caffe2_recorded_simple_net_with_operator_type_table():
    rec = parse("speed_benchmark", "2019-06-gen-efficientnet-b0.txt")
    assert rec["stats_ms"] == {"mean": approx(49.2862)}
    assert rec["native"]["iters_per_second"] == approx(20.2897)
    types = rec["native"]["operator_types"]
    assert [t["type"] for t in types] == ["Conv", "Sigmoid", "SpatialBN", "Mul", "AveragePool",
                                          "FC", "Add", "Squeeze"]
    assert types[0] == {"type": "Conv", "ms_per_iter": approx(29.7378), "percent": 60.5145}
    # Only the time table is read: the FLOP and memory tables after it are not measurements.
    assert sum(t["ms_per_iter"] for t in types) == approx(49.1416, rel=1e-5)


def test_caffe2_recorded_async_net_says_main_runs_and_dag_net_logs_through_glog():
    async_net = parse("speed_benchmark", "2019-07-mkldnn-report-async-net.txt")
    assert async_net["stats_ms"] == {"mean": approx(1581.12)}
    assert async_net["native"]["raw_summary"].startswith("Main runs finished.")
    dag = parse("speed_benchmark", "2019-07-mkldnn-report-caffe2-0.8.1-dag-net.txt")
    assert dag["stats_ms"] == {"mean": approx(3908.79)}
    assert dag["native"]["iters_per_second"] == approx(0.255834)
    assert dag["native"]["operator_types"] is None


def test_caffe2_run_individual_operator_lines():
    text = ("Main run finished. Milliseconds per iter: 31.2489. Iters per second: 32.0011\n"
            "Operator #0 (conv1, Conv) 9.62534 ms/iter\n"
            "Operator #1 (fc, FC) 19.0412 ms/iter\n")
    ops = get_adapter("speed_benchmark").parse(text)["native"]["operators"]
    assert ops == [{"index": 0, "name": "conv1", "type": "Conv", "ms_per_iter": 9.62534},
                   {"index": 1, "name": "fc", "type": "FC", "ms_per_iter": 19.0412}]


# --- unreadable output ----------------------------------------------------------------------

@pytest.mark.parametrize("tool", sorted(EXPECTED_FILES))
def test_garbage_raises_with_the_text_attached(tool):
    text = "Segmentation fault\nsomething else entirely\n"
    with pytest.raises(NativeOutputError) as info:
        get_adapter(tool).parse(text)
    assert info.value.tool == tool and info.value.text == text and not info.value.truncated


@pytest.mark.parametrize("tool, name, cut_before", [
    ("benchmark_model", "2020-08-tensorflow-42507.txt", "Running benchmark for at least 50"),
    ("lce_benchmark_model", "v0.16.0-synthesized.txt", "Running benchmark for at least 50"),
    ("onnxruntime_perf_test", "2021-05-onnxruntime-pr7663.txt", "Average inference"),
    ("speed_benchmark_torch", "2020-pytorch-tutorials-mobile-perf.txt", "Main run finished"),
    ("executor_runner", "v1.0.0-synthesized.txt", "I 00:00:00.372305"),
    ("speed_benchmark", "pytorch-02786a38-cout-synthesized.txt", "Main run finished"),
    ("benchmark_single_model", "gbench-f0901417-json-synthesized.txt", '    {\n      "name"'),
])
def test_truncated_output_raises(tool, name, cut_before):
    text = fixture(tool, name)
    cut = text[: text.index(cut_before)]
    with pytest.raises(NativeOutputError) as info:
        get_adapter(tool).parse(cut)
    assert info.value.text == cut


def test_error_keeps_only_the_tail_of_long_output():
    text = "x" * (TAIL_CHARS + 10) + "\nfatal: unknown flag --use_gpu\n"
    with pytest.raises(NativeOutputError) as info:
        get_adapter("benchmark_model").parse(text)
    assert info.value.truncated and len(info.value.text) == TAIL_CHARS
    assert info.value.text.endswith("unknown flag --use_gpu\n")


def test_tool_failure_messages_are_errors_not_zeros():
    with pytest.raises(NativeOutputError, match="Benchmarking failed"):
        get_adapter("lce_benchmark_model").parse("STARTING!\nBenchmarking failed.\n")
    stripped_release_build = "Output 0: tensor(sizes=[1, 1000], [\n  -0.0297435, 1.33266,\n])\n"
    with pytest.raises(NativeOutputError, match="no timing lines"):
        get_adapter("executor_runner").parse(stripped_release_build)


# --- command builders -------------------------------------------------------------------------

B, M = "/device/bin/tool", "/device/blobs/model"
IMAGE = (InputSpec((1, 3, 224, 224)),)


def test_tflite_command_flags_delegates_affinity():
    argv = get_adapter("benchmark_model").command(B, M + ".tflite", threads=4, warmup=2, runs=30,
                                                  delegate="nnapi", affinity="f0",
                                                  extra=["--min_secs=0"])
    assert argv == ["taskset", "f0", B, f"--graph={M}.tflite", "--warmup_runs=2",
                    "--num_runs=30", "--num_threads=4", "--use_nnapi=true", "--min_secs=0"]
    tflite = get_adapter("benchmark_model")
    assert tflite.command(B, M, threads=None, warmup=1, runs=5, delegate="gpu")[-1] == (
        "--use_gpu=true")
    assert "--use_xnnpack=true" in tflite.command(B, M, threads=1, warmup=1, runs=5,
                                                  delegate="xnnpack")
    assert not any(a.startswith("--num_threads") for a in tflite.command(B, M, threads=None,
                                                                           warmup=1, runs=5))


def test_lce_command_passes_lce_flags_and_only_xnnpack():
    lce = get_adapter("lce_benchmark_model")
    argv = lce.command(B, M, threads=1, warmup=1, runs=10, extra=["--use_reference_bconv=true"])
    assert argv[-1] == "--use_reference_bconv=true" and "--num_threads=1" in argv
    with pytest.raises(UsageError, match="nnapi"):
        lce.command(B, M, threads=1, warmup=1, runs=10, delegate="nnapi")


def test_torch_command_inputs_and_vulkan():
    torch = get_adapter("speed_benchmark_torch")
    argv = torch.command(B, M, threads=None, warmup=3, runs=20, delegate="vulkan",
                         inputs=(InputSpec((1, 3, 224, 224)), InputSpec((1,), "int64")))
    assert argv == [B, f"--model={M}", "--input_dims=1,3,224,224;1",
                    "--input_type=float;int64", "--warmup=3", "--iter=20",
                    "--report_pep=true", "--vulkan=true"]
    with pytest.raises(UsageError, match="thread"):
        torch.command(B, M, threads=2, warmup=1, runs=5, inputs=IMAGE)
    with pytest.raises(UsageError, match="input shape"):
        torch.command(B, M, threads=None, warmup=1, runs=5)
    assert "--use_bundled_input=0" in torch.command(B, M, threads=None, warmup=1, runs=5,
                                                    extra=["--use_bundled_input=0"])
    with pytest.raises(UsageError, match="float16"):
        torch.command(B, M, threads=None, warmup=1, runs=5, inputs=(InputSpec((1,), "float16"),))


def test_dabnn_command_keeps_model_as_argv1_and_one_thread():
    dabnn = get_adapter("benchmark_single_model")
    argv = dabnn.command(B, M, threads=1, warmup=0, runs=3, affinity="1")
    assert argv == ["taskset", "1", B, M, "--benchmark_format=json",
                    "--benchmark_repetitions=3"]
    with pytest.raises(UsageError, match="one thread"):
        dabnn.command(B, M, threads=4, warmup=0, runs=3)


def test_executorch_command_folds_warmup_into_executions():
    runner = get_adapter("executor_runner")
    assert runner.folds_warmup
    assert runner.command(B, M, threads=2, warmup=1, runs=3) == [
        B, f"--model_path={M}", "--num_executions=4", "--cpu_threads=2"]


def test_ort_command_options_before_model_and_one_warmup():
    ort = get_adapter("onnxruntime_perf_test")
    argv = ort.command(B, M, threads=2, warmup=1, runs=20, delegate="xnnpack", extra=["-o", "99"])
    assert argv == [B, "-m", "times", "-r", "20", "-e", "xnnpack", "-x", "2", "-s", "-I",
                    "-o", "99", M]
    assert ort.command(B, M, threads=None, warmup=0, runs=5)[5:7] == ["-e", "cpu"]
    with pytest.raises(UsageError, match="exactly one warm-up"):
        ort.command(B, M, threads=1, warmup=5, runs=5)


def test_caffe2_command_init_net_companion_and_inputs():
    caffe2 = get_adapter("speed_benchmark")
    argv = caffe2.command(B, "/d/m.caffe2.predict_net.pb", threads=None, warmup=2, runs=10,
                          inputs=IMAGE)
    assert argv == [B, "--init_net=/d/m.caffe2.init_net.pb", "--net=/d/m.caffe2.predict_net.pb",
                    "--input=data", "--input_dims=1,3,224,224", "--input_type=float",
                    "--warmup=2", "--iter=10"]
    other = caffe2.command(B, "/d/p.pb", threads=None, warmup=0, runs=1, inputs=IMAGE,
                           companions={"init_net": "/e/init.pb"})
    assert other[1] == "--init_net=/e/init.pb"


UNSUPPORTED = {"benchmark_model": "hexagon", "lce_benchmark_model": "gpu",
               "speed_benchmark_torch": "nnapi", "benchmark_single_model": "xnnpack",
               "executor_runner": "xnnpack", "onnxruntime_perf_test": "gpu",
               "speed_benchmark": "nnapi"}


@pytest.mark.parametrize("tool", sorted(UNSUPPORTED))
def test_unsupported_delegate_and_bad_counts_refused_before_running(tool):
    adapter = get_adapter(tool)
    threads = None if not adapter.supports_threads else 1
    common = {"threads": threads, "inputs": IMAGE}
    with pytest.raises(UsageError, match=UNSUPPORTED[tool]):
        adapter.command(B, M, warmup=1, runs=5, delegate=UNSUPPORTED[tool], **common)
    with pytest.raises(UsageError, match="runs"):
        adapter.command(B, M, warmup=1, runs=0, **common)
    with pytest.raises(UsageError, match="warmup"):
        adapter.command(B, M, warmup=-1, runs=5, **common)
    for mask in ("zz", "0", "f0; rm -rf /"):
        with pytest.raises(UsageError, match="affinity"):
            adapter.command(B, M, warmup=1, runs=5, affinity=mask, **common)


def test_registry_names_aliases_and_formats():
    assert set(TOOLS.names()) == set(EXPECTED_FILES)
    assert get_adapter("dabnn") is get_adapter("benchmark_single_model")
    assert get_adapter("xnn_executor_runner").tool == "executor_runner"
    with pytest.raises(UnknownName) as info:
        get_adapter("benchmark_modle")
    assert "benchmark_model" in info.value.hint
    assert [a.tool for a in adapters_for_format("tflite")] == ["benchmark_model",
                                                               "lce_benchmark_model"]
    covered = {fmt for adapter in TOOLS for fmt in adapter.formats}
    assert covered == {"tflite", "lce", "ptl", "dabnn", "executorch", "onnx", "ort", "caffe2"}


# --- run_native with a scripted transport -----------------------------------------------------

class ScriptedTransport:
    """A transport double: records argv, answers with a canned ShellResult."""

    name, kind = "scripted", "adb"

    def __init__(self, stdout: str = "", stderr: str = "", exit_code: int = 0) -> None:
        self.answer = (stdout, stderr, exit_code)
        self.calls: list[list[str]] = []

    def shell(self, argv, *, cwd=None, env=None, timeout=None, on_line=None) -> ShellResult:
        self.calls.append(list(argv))
        out, err, code = self.answer
        return ShellResult(" ".join(argv), code, out, err, 0.25)


def test_run_native_parses_both_streams_and_completes_the_record():
    transport = ScriptedTransport(stdout="noise\n",
                                  stderr=fixture("benchmark_model", "2019-08-yuenshome-77.txt"))
    spec = NativeSpec(threads=2, warmup=1, runs=15, inputs=IMAGE, affinity="3")
    rec = run_native(transport, get_adapter("benchmark_model"), B, M, spec, timeout=30)
    assert transport.calls == [["taskset", "3", B, f"--graph={M}", "--warmup_runs=1",
                                "--num_runs=15", "--num_threads=2"]]
    assert rec["threads"] == 2  # not echoed by this build: the flag we passed
    assert rec["input_shape"] == [1, 3, 224, 224]
    assert rec["stats_ms"]["mean"] == approx(66.7676)
    assert rec["native"]["exit_code"] == 0 and rec["native"]["wall_s"] == 0.25
    assert rec["native"]["command"] == transport.calls[0]


def test_run_native_folds_warmup_for_executorch():
    transport = ScriptedTransport(stderr=fixture("executor_runner",
                                                 "main-cff6f4dd-synthesized.txt"))
    rec = run_native(transport, get_adapter("executor_runner"), B, M,
                     NativeSpec(threads=4, warmup=1, runs=3))
    assert "--num_executions=4" in transport.calls[0]
    assert rec["samples_ns"] == [31904500, 31577250, 32118000]


def test_run_native_nonzero_exit_is_a_device_command_error():
    transport = ScriptedTransport(stderr="ERROR: unknown flag --use_xnnpack\n", exit_code=1)
    with pytest.raises(DeviceCommandError, match="unknown flag"):
        run_native(transport, get_adapter("benchmark_model"), B, M, NativeSpec())


def test_run_native_refuses_before_running():
    transport = ScriptedTransport()
    with pytest.raises(UsageError):
        run_native(transport, get_adapter("benchmark_model"), B, M,
                   NativeSpec(delegate="hexagon"))
    assert transport.calls == []


# --- plumbing on this machine: a test-double binary that replays a recorded output ----------

def _replay_binary(tmp_path: Path, tool: str, name: str, exit_code: int = 0) -> Path:
    """A shell script standing in for ``tool``: prints a recorded output to stderr, as TFLite
    does, and exits ``exit_code``. It tests aiot's plumbing, never the tool."""
    recorded = tmp_path / f"{tool}-recorded.txt"
    recorded.write_text(fixture(tool, name), encoding="utf-8")
    script = tmp_path / "local-bin" / tool
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f"#!/bin/sh\ncat '{recorded}' >&2\nexit {exit_code}\n")
    return script


@pytest.fixture
def local(tmp_path):
    return LocalTransport(root=tmp_path / "device")


def test_test_double_binary_is_pushed_once_by_hash_and_runs(tmp_path, local):
    script = _replay_binary(tmp_path, "benchmark_model", "2021-09-xnnpack-999.txt")
    first = ensure_binary(local, script)
    second = ensure_binary(local, script)
    assert first.sent and not second.sent and first.remote == second.remote
    assert first.remote.startswith(f"{local.workdir()}/bin/{first.digest[:16]}/")
    assert Path(first.remote).stat().st_mode & stat.S_IXUSR
    model = tmp_path / "m.tflite"
    model.write_bytes(b"not a real model: the double ignores it")
    rec = run_native(local, get_adapter("benchmark_model"), first.remote, str(model),
                     NativeSpec(threads=4, warmup=1, runs=50), timeout=30)
    assert rec["stats_ms"]["mean"] == approx(55.0432) and rec["threads"] == 4
    script.write_text(script.read_text() + "# rebuilt\n")
    assert ensure_binary(local, script).remote != first.remote  # new content, new folder


def test_test_double_binary_with_libraries_and_failure_exit(tmp_path, local):
    script = _replay_binary(tmp_path, "onnxruntime_perf_test",
                            "2025-arm-learning-path-kleidiai.txt", exit_code=3)
    lib = tmp_path / "libonnxruntime.so"
    lib.write_bytes(b"\x7fELF stand-in")
    deployed = ensure_binary(local, script, libs=[lib])
    assert (Path(deployed.folder) / lib.name).read_bytes() == lib.read_bytes()
    assert deployed.env() == {"LD_LIBRARY_PATH": deployed.folder}
    with pytest.raises(DeviceCommandError, match="exited 3"):
        run_native(local, get_adapter("onnxruntime_perf_test"), deployed.remote, "m.onnx",
                   NativeSpec(threads=1, warmup=1, runs=5), env=deployed.env(), timeout=30)


@pytest.mark.skipif(not sys.platform.startswith("linux") or not shutil.which("taskset"),
                    reason="taskset is Linux-only")
def test_test_double_binary_under_taskset(tmp_path, local):
    deployed = ensure_binary(local, _replay_binary(tmp_path, "speed_benchmark",
                                                   "pytorch-02786a38-cout-synthesized.txt"))
    rec = run_native(local, get_adapter("speed_benchmark"), deployed.remote, "p.pb",
                     NativeSpec(threads=None, warmup=1, runs=5, affinity="1", inputs=IMAGE),
                     timeout=30)
    assert rec["native"]["command"][:2] == ["taskset", "1"]
    assert rec["stats_ms"] == {"mean": approx(31.2489)}


def test_missing_local_binary_is_a_usage_error(tmp_path, local):
    with pytest.raises(UsageError, match="does not exist"):
        ensure_binary(local, tmp_path / "nope")


# --- where binaries come from ---------------------------------------------------------------

def test_inventory_binaries_table(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    inv = tmp_path / "devices.toml"
    inv.write_text('[devices.pixel]\ntransport = "adb"\nserial = "X"\n'
                   'workdir = "/data/local/tmp/aiot"\n'
                   '[devices.pixel.binaries]\nbenchmark_model = "~/bin/benchmark_model"\n'
                   'dabnn = "/opt/dabnn/benchmark_single_model"\n')
    found = inventory_binaries("pixel", inv)
    assert found == {"benchmark_model": tmp_path / "bin" / "benchmark_model",
                     "benchmark_single_model": Path("/opt/dabnn/benchmark_single_model")}
    assert inventory_binaries("other", inv) == {}
    assert resolve_binary("benchmark_model", "pixel", path=inv) == found["benchmark_model"]
    assert resolve_binary("benchmark_model", "pixel", "~/x", path=inv) == tmp_path / "x"
    with pytest.raises(UsageError, match="no executor_runner binary") as info:
        resolve_binary("executor_runner", "pixel", path=inv)
    assert "[devices.pixel.binaries] executor_runner = " in info.value.hint


def test_inventory_binaries_rejects_bad_tables(tmp_path):
    inv = tmp_path / "devices.toml"
    inv.write_text('[devices.pixel.binaries]\nbenchmark_modle = "/x"\n')
    with pytest.raises(UnknownName) as info:
        inventory_binaries("pixel", inv)
    assert "benchmark_model" in info.value.hint
    inv.write_text("[devices.pixel]\nbinaries = 3\n")
    with pytest.raises(InventoryError):
        inventory_binaries("pixel", inv)
    assert inventory_binaries("pixel", tmp_path / "absent.toml") == {}
