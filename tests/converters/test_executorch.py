"""ExecuTorch: exported here, lowered to XNNPACK in its toolchain, run by its runtime."""

import pytest

from aiot.converters.api import convert_model
from aiot.converters.sidecar import read_sidecar
from aiot.core.errors import UsageError

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def pte(tmp_path_factory):
    from tests.converters.conftest import need_toolchain

    need_toolchain("executorch")
    return convert_model("tiny_cnn", "executorch", tmp_path_factory.mktemp("et"))


@pytest.mark.slow
def test_whole_graph_is_lowered_to_xnnpack_and_matches_pytorch(pte):
    side = read_sidecar(pte.artifact)["converter"]
    assert side["xnnpack_partitions"] >= 1 and side["portable_ops"] == []
    assert pte.artifact.read_bytes()[4:8] == b"ET12"  # ExecuTorch flatbuffer identifier
    assert pte.parity["ok"] and pte.parity["max_abs"] < 1e-4
    assert pte.parity["dataset"]["top1_agreement"] == 1.0


@pytest.mark.slow
def test_runs_on_local_through_the_toolchain_interpreter(pte, cli):
    rows = cli.json("sweep", "-m", "tiny_cnn", "-f", "executorch", "--threads", "1,2",
                    "--min-runs", "5", "--min-s", "0")
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert rows[0]["result"]["backend"] == "executorch" and rows[0]["median_ms"] > 0
    assert rows[0]["result"]["runtime_version"].startswith("1.5")


def test_unknown_delegate_is_refused_before_work(tmp_path):
    with pytest.raises(UsageError, match="delegate must be one of xnnpack, portable"):
        convert_model("tiny_cnn", "executorch", tmp_path, options={"delegate": "vulkan"})
