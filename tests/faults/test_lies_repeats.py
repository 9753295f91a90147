"""What still lied or repeated itself (second round): a gate that passed having compared
nothing, a rerun that stored every skip again, a ``.dab`` of random bytes described with an
empty table, an inventory of the wrong shape, an empty ``HOME``, file names with commas or
escape sequences, ``.npz`` members that are pickles or compressed bombs, and an input shape
too large to make.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.faults.conftest import count_records, one_line_error
from tests.helpers import FAST


# -- results compare: a gate that compared nothing did not pass --------------------------------


def _store_runs(sweep: str, threads: list[int], sha: str = "ab" * 32) -> None:
    """Ok latency records of tiny_cnn/onnx on ``local``, one per thread count, in ``sweep``."""
    from aiot.device_agent.stats import summarize_ms
    from aiot.host.store import open_store

    with open_store(Path(os.environ["AIOT_RESULTS_DIR"])) as store:
        for n in threads:
            spec = {"device": "local", "model": "tiny_cnn", "format": "onnx", "threads": n}
            record = store.begin("latency", spec, {"device": {"cpu_model": "x86", "cores": 8}},
                                 sweep_id=sweep, device="local", model="tiny_cnn", format="onnx",
                                 threads=n)
            stats = summarize_ms([int(10e6 + i * 1000) for i in range(50)])
            store.finish(record.id, "ok", result={"stats_ms": stats}, artifact_sha256=sha,
                         size_bytes=4096, median_ms=stats["median"], p90_ms=stats["p90"],
                         validity="VALID")


@pytest.mark.fault("results compare passes with A's runs missing from B")
def test_compare_fails_when_runs_of_a_are_missing(cli, fault):
    _store_runs("base", [1, 2, 4])
    _store_runs("cand", [1])
    result = cli("results", "compare", "base", "cand", code=3)
    assert "gate passed" not in result.stderr
    assert "B is incomplete, 2 run(s) of A missing from B" in result.stderr
    assert "tiny_cnn · onnx · 4t @ local" in result.stderr  # the missing runs are named
    data = json.loads(cli("results", "compare", "base", "cand", "--json", code=3).stdout)
    assert not data["passed"] and len(data["missing"]) == 2
    cli("results", "compare", "base", "cand", "--allow-missing")  # asked for: B is a part of A


@pytest.mark.fault("results compare passes with nothing comparable")
def test_compare_fails_when_nothing_is_comparable(cli, fault, monkeypatch):
    from aiot.host.store.identity import HOST_ENV

    monkeypatch.setenv(HOST_ENV, "host-a")
    _store_runs("base", [1])
    monkeypatch.setenv(HOST_ENV, "host-b")
    _store_runs("cand", [1])  # another machine: not comparable
    for flags in ([], ["--allow-missing"]):  # B covering part of A excuses no other machine
        result = cli("results", "compare", "base", "cand", *flags, code=3)
        assert "nothing was compared" in result.stderr and "gate passed" not in result.stderr
    _store_runs("other", [2])
    cli("results", "compare", "base", "other", code=3)  # nothing shares a key at all


# -- a rerun of a sweep ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.fault("sweep rerun records every skipped run again")
def test_sweep_rerun_does_not_record_skips_again(cli, fault):
    too_many = str(max(os.cpu_count() or 1, 8) * 2)  # more threads than the host has cores
    sweep = ("sweep", "-m", "tiny_cnn", "-f", "onnx", "--threads", f"1,{too_many}", *FAST)
    cli(*sweep)
    first = count_records()
    statuses = sorted(r["status"] for r in cli.json("results", "list"))
    assert statuses == ["ok", "skipped"], statuses
    for _ in range(2):
        rerun = cli(*sweep)
        assert count_records() == first, rerun.stderr  # the same skip is not stored again
    fault.records_lost(first, count_records())


# -- models info of a .dab that is no model ----------------------------------------------------


@pytest.mark.fault(".dab of random bytes described with an empty table")
@pytest.mark.parametrize("content", [os.urandom(5000), b"\x01\x02\x03", b"\x10" + bytes(19)])
def test_models_info_refuses_a_dab_that_is_no_model(cli, fault, tmp_path, content):
    path = tmp_path / "random.dab"
    path.write_bytes(content)
    result = cli("models", "info", str(path), code=1)
    one_line_error(result, "dabnn model random.dab")
    assert result.stdout == ""  # no table, empty or not


def test_models_info_describes_a_real_dab(cli, tmp_path):
    """The check above refuses what is broken only: a .dab aiot made is described."""
    from aiot.converters.api import convert_model

    dab = convert_model("tiny_bnn", "dabnn", tmp_path, dataset_samples=0).artifact
    facts = json.loads(cli("models", "info", str(dab), "--json").stdout)
    (given,) = facts["inputs"]
    assert given["shape"][0] == 1 and len(given["shape"]) == 4 and given["dtype"] == "float32"
    assert facts["outputs"][0]["name"]


# -- a malformed inventory ---------------------------------------------------------------------


@pytest.mark.fault("inventory of the wrong shape")
@pytest.mark.parametrize("text, says", [
    ('devices = "x"', "'devices' is a string, not a table of devices"),
    ("devices = [1, 2]", "'devices' is an array"),
    ("[devices]\na = 3", "device 'a': is an integer, not a table"),
    ('[devices.a]\ntransport = "ssh"', "device 'a': lacks the key(s) workdir"),
    ('[devices.a]\ntransport = "adb"\nserial = "X"\nworkdir = 5', "'workdir' is an integer, not a string"),
    ('[devices.a]\ntransport = "adb"\nserial = "X"\nworkdir = "/w"\nport = "22"', "'port' is a string"),
    ('[devices.a]\ntransport = "adb"\nserial = "X"\nworkdir = "/w"\ncolour = "red"', "unknown key(s) colour"),
    ('[devices.a]\ntransport = "adb"\nserial = "X"\nworkdir = "/w"\nlabels = "x"', "'labels' is a string"),
])
@pytest.mark.parametrize("command", [("devices", "list"), ("devices", "info", "a"),
                                     ("run", "-m", "tiny_cnn", "-d", "a", *FAST)])
def test_malformed_inventory_is_one_line(cli, fault, text, says, command):
    Path(os.environ["AIOT_INVENTORY"]).write_text(text)
    result = cli(*command, code=1)
    one_line_error(result, says)
    assert "__init__" not in result.stderr and "positional argument" not in result.stderr


@pytest.mark.fault("devices add's hint contradicts its refusal")
def test_devices_add_hint_agrees_with_the_refusal(cli, fault):
    inventory = Path(os.environ["AIOT_INVENTORY"])
    inventory.write_text('devices = "x"')
    result = cli("devices", "add", "b", "--transport", "adb", "--serial", "Y", code=1)
    one_line_error(result, "'devices' is a string")
    hint = result.stderr.split("hint:", 1)[1]
    assert "recreates" not in hint and "move it away" in hint  # devices add will not overwrite it
    assert inventory.read_text() == 'devices = "x"'  # and did not


# -- an empty HOME ---------------------------------------------------------------------------


@pytest.mark.fault("empty HOME puts the cache at the filesystem root")
@pytest.mark.parametrize("home", ["", "relative/home", "/"])
def test_empty_home_uses_the_account_home(cli, fault, monkeypatch, home):
    import pwd

    from aiot.core import paths, toolchains
    from aiot.host.devices.entry import config_dir
    from aiot.host.transports.local import LocalTransport

    account = Path(pwd.getpwuid(os.getuid()).pw_dir)
    if account == Path("/"):
        pytest.skip("this account's home is /: nothing to fall back on")
    with_home = cli("toolchains", "list", "--json").stdout  # the user's toolchains (conftest)
    for name in ("AIOT_CACHE_DIR", "AIOT_TOOLCHAINS_DIR", "AIOT_LOCAL_WORKDIR", "XDG_CACHE_HOME",
                 "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", home)
    assert paths.cache_dir() == account / ".cache" / "aiot"
    assert toolchains.root_dir() == account / ".cache" / "aiot" / "toolchains"
    assert Path(LocalTransport().workdir()) == account / ".cache" / "aiot" / "device"
    assert config_dir() == account / ".config" / "aiot"
    assert cli("toolchains", "list", "--json").stdout == with_home  # the same toolchains found


# -- file names: commas, escape sequences -------------------------------------------------------

SHAPES = ("--input-shape", "a=2x8", "--input-shape", "b=2x8")


@pytest.mark.fault("model file name with a comma cannot be run")
def test_model_file_name_with_a_comma_runs(cli, fault, tmp_path, two_input_onnx):
    import shutil

    comma = tmp_path / "net,v2.onnx"
    shutil.copyfile(two_input_onnx, comma)
    (record,) = cli.json("run", "-m", str(comma), *SHAPES, *FAST)
    assert record["status"] == "ok" and record["model"] == "net,v2.onnx"
    records = cli.json("sweep", "-m", f"{two_input_onnx},{comma}", "--threads", "1", *SHAPES, *FAST)
    assert sorted(r["model"] for r in records) == ["net,v2.onnx", "two_inputs.onnx"]
    assert all(r["status"] == "ok" for r in records)


@pytest.mark.fault("escape sequences in a model's file name reach the terminal")
def test_escape_sequences_in_a_file_name_are_written_out(cli, fault, tmp_path, two_input_onnx):
    import shutil

    name = "x\x1b]0;owned\x07\x1b[31m[bold]red\x9b2J.onnx"
    hostile = tmp_path / name
    shutil.copyfile(two_input_onnx, hostile)
    (record,) = cli.json("run", "-m", str(hostile), *SHAPES, *FAST)
    assert record["model"] == name  # the store keeps the name as it is
    for shown in (cli("results", "list").stdout, cli("results", "show", record["id"]).stdout):
        assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown
        # written out; only its start is matched, since a table may wrap the long name in its cell
        assert "x\\x1b]0;" in shown


# -- --inputs files and input shapes -----------------------------------------------------------


@pytest.mark.fault(".npz member that is a pickle")
@pytest.mark.parametrize("member", ["a", "a.npy"])
def test_npz_member_that_is_a_pickle(cli, fault, tmp_path, two_input_onnx, no_records, member):
    import pickle
    import zipfile

    path = tmp_path / "inputs.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member, pickle.dumps({"a": [1, 2, 3]}))
    result = cli("run", "-m", str(two_input_onnx), "--inputs", str(path), *FAST, code=2)
    one_line_error(result, "member 'a", "is not a .npy array", code=2)
    assert "bytes" not in result.stderr


@pytest.mark.fault(".npz with an object array")
def test_npz_object_array(cli, fault, tmp_path, two_input_onnx, no_records):
    import numpy as np

    path = tmp_path / "inputs.npz"
    np.savez(path, a=np.array([{"x": 1}, None], dtype=object))
    result = cli("run", "-m", str(two_input_onnx), "--inputs", str(path), *FAST, code=2)
    one_line_error(result, "holds Python objects", code=2)


def _bomb(path: Path, shape: tuple, dtype: str = "<f4") -> Path:
    """A deflated .npz whose one member declares ``shape``: megabytes that inflate to
    gigabytes of zeros."""
    import io
    import zipfile

    import numpy as np

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": dtype, "fortran_order": False,
                                                  "shape": shape})
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    chunk = bytes(1 << 24)
    # Deflate's fastest level: ~9x quicker to write than the default, still over 200:1 on zeros.
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        with archive.open("a.npy", "w", force_zip64=True) as member:
            member.write(header.getvalue())
            for start in range(0, size, len(chunk)):
                member.write(chunk[:min(len(chunk), size - start)])
    return path


@pytest.fixture
def no_records(fault):
    yield
    assert count_records() == 0  # refused before any record
    fault.records_lost(0, count_records())


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.slow
@pytest.mark.fault("compressed .npz inflated in full before its shape is checked")
@pytest.mark.parametrize("shape, says", [
    ((2**26, 9), "declares 2.2 GiB of arrays"),  # 10 MB of zip
    ((2**24, 9), "has shape [16777216, 9]"),  # 576 MiB: under the cap, but the wrong shape
])
def test_compressed_npz_is_checked_from_its_headers(cli, fault, tmp_path, two_input_onnx,
                                                    no_records, shape, says):
    path = _bomb(tmp_path / "bomb.npz", shape)
    assert path.stat().st_size < 20 * 2**20
    before = _peak_rss_mb()
    result = cli("run", "-m", str(two_input_onnx), "--inputs", str(path), *FAST, code=2)
    one_line_error(result, says, code=2)
    assert _peak_rss_mb() - before < 200  # nothing was inflated


@pytest.mark.fault("over-large --input-shape tried on the device")
@pytest.mark.parametrize("shapes, says", [
    (("a=100000000000x8", "b=2x8"), "input 'a' 100000000000x8 float32: 2,980.2 GiB"),
    (("a=40000000x8", "b=40000000x8"), "would take 2.4 GiB"),  # each 1.2 GiB: the sum counts
])
def test_over_large_input_shape_is_refused_up_front(cli, fault, two_input_onnx, no_records,
                                                   shapes, says):
    args = [a for s in shapes for a in ("--input-shape", s)]
    result = cli("run", "-m", str(two_input_onnx), *args, *FAST, code=2)
    one_line_error(result, says, "--inputs FILE.npz", code=2)
    assert "float64" not in result.stderr


def test_generated_inputs_are_the_same_drawn_in_chunks(monkeypatch):
    """Generating without the float64 copy changed no input a run feeds its model."""
    import numpy as np

    from aiot.device_agent import signature

    spec = {"name": "x", "dtype": "float32", "quantization": None}
    whole = np.random.default_rng(7).standard_normal([3, 1000, 7]).astype(np.float32)
    monkeypatch.setattr(signature, "_CHUNK", 999)
    assert np.array_equal(signature.generate(spec, [3, 1000, 7], np.random.default_rng(7)), whole)
    spec = {"name": "k", "dtype": "int64", "quantization": None}
    whole = np.random.default_rng(7).integers(0, 10, size=[5000]).astype(np.int64)
    assert np.array_equal(signature.generate(spec, [5000], np.random.default_rng(7)), whole)
