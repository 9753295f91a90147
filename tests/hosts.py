"""Two hosts on one machine, for the tests of results that cross from one host to another:
``AIOT_HOST_ID`` stands the test's process in for one host or the other, and each host has a
results folder (a real store) of its own."""

from __future__ import annotations

import json

import pytest

from aiot.host.store import identity
from tests.helpers import FAST

#: One quick run of tiny_cnn in ONNX on ``local``: the sweep both hosts measure.
SWEEP = ("sweep", "-m", "tiny_cnn", "-f", "onnx", "--threads", "1", "-d", "local", *FAST)


@pytest.fixture
def two_hosts(cli, tmp_path, monkeypatch):
    """Host ``lab-b`` measured tiny_cnn and exported its store; host ``lab-a`` (this test's
    host from here on) imported that export. Returns (A's results folder, B's records)."""
    a, b = tmp_path / "a", tmp_path / "b"
    monkeypatch.setenv(identity.HOST_ENV, "lab-b")
    cli("--results-dir", str(b), *SWEEP)
    export = tmp_path / "b.json"
    cli("--results-dir", str(b), "results", "export", "-o", str(export))
    monkeypatch.setenv(identity.HOST_ENV, "lab-a")
    cli("--results-dir", str(a), "results", "import", str(export))
    return a, json.loads(export.read_text())
