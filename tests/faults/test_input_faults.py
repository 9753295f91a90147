"""Bad command-line input: each is refused up front with one line (exit 2), before any folder,
server, conversion or record exists; repeats and spellings of one thing are measured once,
under its canonical name.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.faults.conftest import count_records, one_line_error
from tests.helpers import FAST

RUN = ("run", "-m", "tiny_cnn", "-f", "onnx", *FAST)
SWEEP = ("sweep", "-m", "tiny_cnn", "-f", "onnx", *FAST)


@pytest.fixture
def no_conversion(monkeypatch):
    """Fail the test if anything starts converting (input errors must come first)."""
    from aiot.converters import api
    from aiot.host.engine import executor

    def convert_model(*args, **kwargs):
        raise AssertionError("a conversion started before the input was checked")

    monkeypatch.setattr(api, "convert_model", convert_model)
    monkeypatch.setattr(executor, "convert_model", convert_model)  # a run converts through it


def _nothing_stored(fault) -> None:
    """No record, and no artifact folder: the run never started."""
    results = Path(os.environ["AIOT_RESULTS_DIR"])
    fault.records_lost(0, count_records())  # nothing to lose; counted for the report
    assert count_records() == 0 and not (results / "artifacts").exists()


# -- emulator names --------------------------------------------------------------------------


@pytest.fixture
def no_servers(monkeypatch):
    """Fail the test if an emulator's server would start or attach to the adb server."""
    from aiot.host.emulator import manager

    def start(*args, **kwargs):
        raise AssertionError("a server started before the name was checked")

    monkeypatch.setattr(manager, "_start_server", start)
    monkeypatch.setattr("aiot.host.transports.adb.connect_tcp", start)


@pytest.mark.fault("emulator name escaping the state folder")
@pytest.mark.parametrize("name", ["../x", "../../escaped", "ABSOLUTE", "a/b", ".."])
def test_emulator_name_with_path_parts(cli, fault, tmp_path, no_servers, name):
    name = str(tmp_path / "abs") if name == "ABSOLUTE" else name
    result = cli("emulator", "start", "ssh", "--name", name, code=2)
    one_line_error(result, "invalid device name", code=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no state, x, escaped or abs folder


@pytest.mark.fault("300-character emulator name")
def test_emulator_name_too_long(cli, fault, tmp_path, no_servers):
    result = cli("emulator", "start", "ssh", "--name", "a" * 300, code=2)
    one_line_error(result, "invalid device name", code=2)
    assert "a" * 65 not in result.stderr  # shown cut, on one line
    assert not (tmp_path / "state").exists()


@pytest.mark.fault("bad adb emulator name leaves no adb entry")
def test_adb_emulator_bad_name_touches_nothing(cli, fault, tmp_path, no_servers):
    result = cli("emulator", "start", "adb", "--name", "bad name\nsecond line", code=2)
    one_line_error(result, "invalid device name", code=2)
    assert "\nsecond line" not in result.stderr  # the name stays on the error line
    assert not (tmp_path / "state").exists() and not (tmp_path / "devices.toml").exists()


# -- numbers out of range ----------------------------------------------------------------------


@pytest.mark.fault("absurd --threads")
@pytest.mark.parametrize("command", ["run", "sweep"])
@pytest.mark.parametrize("threads", ["99999999999999999999", "100000", "0", "-3"])
def test_threads_out_of_range(cli, fault, no_conversion, command, threads):
    args = RUN if command == "run" else SWEEP
    result = cli(*args, "--threads", threads, code=2)
    one_line_error(result, "thread count", "1 to 1024", code=2)
    _nothing_stored(fault)


@pytest.mark.fault("absurd --threads")
def test_paper_threads_out_of_range(cli, fault, no_conversion):
    result = cli("paper", "aiotbench", "--threads", "99999999999999999999", code=2)
    one_line_error(result, "thread count", "1 to 1024", code=2)
    _nothing_stored(fault)


@pytest.mark.fault("repeated and upper-case --delegate")
def test_delegate_names_canonical(cli, fault, no_conversion):
    from aiot.host.cli.measure_run import parse_delegates

    assert parse_delegates("NNAPI,gpu,nnapi") == ["nnapi", "gpu"]
    result = cli(*SWEEP, "--threads", "1", "--delegate", "NNAPI", code=2)
    one_line_error(result, "--delegate nnapi needs --native", code=2)  # known, lower-cased


@pytest.mark.fault("non-finite or negative --timeout")
@pytest.mark.parametrize("option", ["--timeout", "--max-s", "--min-s", "--warmup-min-s"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_seconds(cli, fault, no_conversion, option, value):
    result = cli(*RUN, option, value, code=2)
    one_line_error(result, option, "finite", code=2)
    _nothing_stored(fault)


@pytest.mark.fault("negative --timeout")
def test_negative_timeout(cli, fault, no_conversion):
    one_line_error(cli(*SWEEP, "--threads", "1", "--timeout", "-1", code=2), "--timeout", code=2)
    _nothing_stored(fault)


@pytest.mark.fault("absurd iteration count")
def test_iteration_count_overflow(cli, fault, no_conversion):
    result = cli("run", "-m", "tiny_cnn", "-f", "onnx", "--min-s", "0", "--warmup-min-s", "0",
                 "--min-runs", "99999999999999999999", code=2)
    one_line_error(result, "--min-runs", code=2)
    _nothing_stored(fault)


# -- repeats and spellings ----------------------------------------------------------------------


@pytest.mark.fault("repeated and differently spelled names")
def test_repeats_and_spellings_measure_once(cli, fault):
    records = cli.json("sweep", "-m", "tiny,TINY-CNN,tiny_cnn", "-f", "onnx,ONNX,Onnx",
                       "--threads", "1,1,01", "-d", "local,local", *FAST)
    assert len(records) == 1, [(r["model"], r["format"], r["threads"]) for r in records]
    (record,) = records
    assert (record["model"], record["format"], record["threads"], record["status"]) == \
        ("tiny_cnn", "onnx", 1, "ok")
    stored = cli.record(record["id"])
    assert (stored.model, stored.format) == ("tiny_cnn", "onnx")
    assert count_records() == 1


@pytest.mark.fault("repeated and upper-case --cluster")
def test_cluster_names_canonical(cli, fault, no_conversion):
    from aiot.host.cli.measure_run import parse_clusters

    assert parse_clusters("BIG,little,big") == ["big", "little"]
    # `local` has its cores in one cluster (or more, on big.LITTLE hosts): 'all' always fits.
    result = cli(*RUN, "--cluster", "fast", code=2)
    one_line_error(result, "unknown --cluster 'fast'", code=2)
    _nothing_stored(fault)


# -- inputs known to be wrong before anything runs -----------------------------------------------


@pytest.mark.fault("cluster the device lacks")
def test_cluster_the_device_lacks(cli, fault, no_conversion, monkeypatch):
    from aiot.host.transports.local import LocalTransport

    real_info = LocalTransport.info

    def one_cluster(self):
        return {**real_info(self), "clusters": [{"name": "all", "cores": [0, 1], "max_khz": None,
                                                 "min_khz": None}]}

    monkeypatch.setattr(LocalTransport, "info", one_cluster)
    result = cli(*SWEEP, "--threads", "1", "--cluster", "prime,ALL", code=2)
    one_line_error(result, "'local'", "no 'prime' cluster", code=2)
    _nothing_stored(fault)


@pytest.mark.fault("unknown --dataset")
def test_unknown_dataset(cli, fault, no_conversion):
    one_line_error(cli(*RUN, "--dataset", "imagenet-22k", code=2), "unknown dataset", code=2)
    _nothing_stored(fault)


@pytest.mark.fault("missing image-folder dataset")
def test_missing_dataset_folder(cli, fault, no_conversion, tmp_path):
    missing = tmp_path / "no-such-images"
    result = cli(*SWEEP, "-f", "onnx,tflite", "--threads", "1,2", "--dataset", f"folder:{missing}",
                 code=2)
    one_line_error(result, "does not exist", str(missing), code=2)
    _nothing_stored(fault)


@pytest.mark.fault("missing --weights file")
@pytest.mark.parametrize("command", ["run", "sweep", "push"])
def test_missing_weights(cli, fault, no_conversion, tmp_path, command):
    args = {"run": RUN, "sweep": SWEEP, "push": ("push", "-m", "tiny_cnn", "-f", "onnx")}[command]
    result = cli(*args, "--weights", str(tmp_path / "nope.pt"), code=2)
    one_line_error(result, "weights file", "does not exist", code=2)
    _nothing_stored(fault)


@pytest.mark.fault("--limit below 1")
def test_limit_below_one(cli, fault, no_conversion):
    one_line_error(cli(*RUN, "--dataset", "digits", "--limit", "0", code=2), "--limit", code=2)
    _nothing_stored(fault)


@pytest.mark.fault("emit-only format without a native tool")
def test_emit_only_format(cli, fault, no_conversion):
    result = cli(*SWEEP, "-f", "onnx,caffe2", "--threads", "1", code=2)
    one_line_error(result, "caffe2", "emit-only", code=2)
    _nothing_stored(fault)


@pytest.mark.fault("native tool without a binary for the device")
def test_native_tool_without_binary(cli, fault, no_conversion):
    result = cli("run", "-m", "tiny_cnn", "-f", "tflite", "--native", "benchmark_model", *FAST, code=2)
    one_line_error(result, "benchmark_model", "local", code=2)
    _nothing_stored(fault)
