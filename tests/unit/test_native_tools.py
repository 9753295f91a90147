"""Where native benchmark tools come from (issue 51): aiot ships none, so a refusal that
sends the user to ``--native lce_benchmark_model`` says where that binary comes from (Larq
Compute Engine's own build), and docs/guide/native-tools.md says it for each tool it names."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiot.core.errors import UsageError
from aiot.host.engine.gates import device_runner
from aiot.host.native import TOOLS, get_adapter

DOC = Path(__file__).resolve().parents[2] / "docs" / "guide" / "native-tools.md"


def test_a_phone_without_an_lce_runtime_is_sent_to_lce_benchmark_model_and_told_where_it_is_built():
    with pytest.raises(UsageError) as refused:
        device_runner("lce", "phone", {"onnxruntime": "1.20", "litert": "1.4"}, binaries={})
    assert "phone cannot time lce artifacts: its agent has no lce runtime" in refused.value.message
    hint = refused.value.hint
    assert "time it with --native lce_benchmark_model" in hint
    assert '[devices.phone.binaries] lce_benchmark_model = "/path"' in hint
    assert "lce_benchmark_model is Larq Compute Engine's own build" in hint
    assert "larq/compute-engine" in hint and "Bazel" in hint and "CMake" in hint
    assert "android_arm64" in hint


def test_a_configured_tool_times_the_format_instead():
    assert device_runner("lce", "phone", {"litert": "1.4"},
                         binaries={"lce_benchmark_model": Path("/bin/lce")}) == "lce_benchmark_model"


def test_the_guide_says_where_every_tool_with_a_source_comes_from():
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    described = [a for a in TOOLS if a.source]
    assert {a.tool for a in described} >= {"benchmark_model", "lce_benchmark_model"}
    for adapter in described:
        assert f"**`{adapter.tool}`**" in text, adapter.tool
    assert "Larq Compute Engine's own build" in text and "lce_benchmark_model_android_arm64" in text
    assert get_adapter("lce_benchmark_model").source.startswith("Larq Compute Engine's own build")
    assert "--native lce_benchmark_model" in text and "[devices.pixel.binaries]" in text
