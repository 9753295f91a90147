"""A multi-file artifact (Caffe2: predict net + init net) is cached, checked and deleted as one."""

import pytest

from aiot.converters.api import convert_model
from aiot.converters.sidecar import read_sidecar

pytest.importorskip("google.protobuf")


def test_changed_companion_file_forces_a_fresh_export(tmp_path, fresh_conversions):
    first = convert_model("tiny_cnn", "caffe2", tmp_path)
    init_net = first.artifact.with_name("tiny_cnn.caffe2.init_net.pb")
    companions = read_sidecar(first.artifact)["artifact"]["companions"]
    assert list(companions) == [init_net.name]
    assert convert_model("tiny_cnn", "caffe2", tmp_path).cached
    init_net.write_bytes(init_net.read_bytes()[:-8])  # damaged weights, predict net intact
    again = convert_model("tiny_cnn", "caffe2", tmp_path)
    assert not again.cached and again.parity["ok"]
    assert read_sidecar(again.artifact)["artifact"]["companions"] == companions
