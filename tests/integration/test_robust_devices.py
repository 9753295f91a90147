"""The three robustness suites end to end on an emulated arm64 board (an aarch64 userland under
qemu-user behind a real sshd): the artifact answers on aarch64 through the persistent agent
session, and what it computes there is compared with PyTorch on the host.

tiny_cnn with its seeded random init and a handful of images: accuracy means nothing here,
agreement with PyTorch (identical artifact, identical inputs) is the hand-checkable value.
"""

import pytest

from aiot.host.emulator import arm64

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(arm64.missing_tools()),
                       reason=f"needs Debian packages {arm64.missing_tools()} (scripts/bootstrap.sh installs them)"),
]
pytest.importorskip("onnxruntime")

BOARD = "robust-pi"


@pytest.fixture
def board(cli):
    cli.json("emulator", "start", "ssh", "--arch", "arm64", "--name", BOARD)
    yield BOARD
    cli("emulator", "stop", BOARD)


def _table(data: dict, name: str) -> list[dict]:
    table = next(t for t in data["tables"] if t["name"] == name)
    return [dict(zip(table["columns"], row, strict=True)) for row in table["rows"]]


def _stored(cli, record_id: str) -> dict:
    return next(r for r in cli.json("results", "list") if r["id"] == record_id)


def test_sysnoise_platform_same_artifact_on_x86_and_aarch64(cli, board):
    data = cli.json("robust", "sysnoise", "--model", "tiny_cnn", "--limit", "8", "--types", "colour,platform",
                    "--format", "ort", "--device", f"local,{board}")
    rows = {row["option"]: row for row in _table(data, "platform")}
    for device in ("local", board):
        assert rows[device]["status"] == "ok" and rows[device]["flip rate"] == 0.0, rows[device]
        assert rows[device]["max |Δ logit|"] < 1e-3
    record = _stored(cli, data["record"])
    assert record["status"] == "ok" and record["provenance"]["devices"][board]["agent"]["machine"] == "aarch64"


def test_corrupt_on_the_board_agrees_with_pytorch(cli, board):
    data = cli.json("robust", "corrupt", "--model", "tiny_cnn", "--limit", "6", "--corruptions",
                    "brightness,gaussian_noise", "--severities", "1,3", "--no-sequences",
                    "--format", "ort", "--device", board)
    assert data["summary"]["agreement"] == 1.0
    assert data["summary"]["clean_accuracy"] == data["summary"]["reference_clean_accuracy"]
    record = _stored(cli, data["record"])
    assert record["device"] == board and record["provenance"]["device"]["agent"]["machine"] == "aarch64"


def test_attack_queries_the_board_within_budget(cli, board, tiny_digits_weights):
    data = cli.json("robust", "attack", "--model", "tiny_cnn", "--weights", tiny_digits_weights,
                    "--dataset", "digits", "--limit", "3",
                    "--steps", "2", "--queries", "12", "--attacks", "fgsm,square", "--eps", "0.1",
                    "--format", "ort", "--device", board)
    table = data["tables"][0]
    rows = {row[0]: dict(zip(table["columns"], row, strict=True)) for row in table["rows"]}
    assert rows["square"]["crafted on"] == f"ort@{board}" and 0 < rows["square"]["queries"] <= 3 * 12
    # the same float function on aarch64: FGSM's images land the same on the board as on the host
    assert rows["fgsm"][f"accuracy (ort@{board})"] == rows["fgsm"]["accuracy (reference)"]
    record = _stored(cli, data["record"])
    assert record["status"] == "ok" and record["provenance"]["device"]["agent"]["machine"] == "aarch64"
