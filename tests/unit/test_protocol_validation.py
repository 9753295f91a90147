"""The host's check of every agent message (``host/devices/agent_messages.py`` against
``protocol.FIELDS``) and the line framing every transport shares (``LineFramer``)."""

from __future__ import annotations

import json
import time

import pytest

from aiot.core.errors import AgentError
from aiot.device_agent import protocol
from aiot.device_agent.stats import summarize_ms
from aiot.host.devices.agent_messages import (
    DeviceMessageError,
    check_answer,
    check_columns,
    read_message,
)
from aiot.host.transports.stream import LineFramer, LineStream, LineTooLong

SAMPLES = [int(2e6 + i * 1000) for i in range(20)]


def _result(**changes) -> dict:
    fields = {"backend": "onnxruntime", "runtime_version": "1.20", "threads": 1, "load_ms": 3.5,
              "samples_ns": SAMPLES, "stats_ms": summarize_ms(SAMPLES), "accuracy": None}
    fields.update(changes)
    return fields


def _line(event: str = "result", **fields) -> str:
    return protocol.PREFIX + json.dumps({"v": 1, "event": event, **fields})


def _refused(line: str) -> str:
    with pytest.raises(DeviceMessageError) as info:
        read_message(line, "dev")
    assert not info.value.transient and "\n" not in info.value.message
    return info.value.message


def test_a_real_result_passes_unchanged():
    msg = read_message(_line(**_result()), "dev")
    assert msg["stats_ms"] == summarize_ms(SAMPLES) and msg["samples_ns"] == SAMPLES
    assert read_message("INFO: some runtime log", "dev") is None


@pytest.mark.parametrize("value, says", [
    (float("nan"), "stats_ms.median is NaN"), (float("inf"), "stats_ms.median is Infinity"),
    (-1.0, "stats_ms.median is -1, not > 0"), (0, "stats_ms.median is 0, not > 0"),
    ("12", "stats_ms.median is '12', not a number"), (True, "stats_ms.median is True, not a number"),
])
def test_a_made_up_median_is_named(value, says):
    stats = {**summarize_ms(SAMPLES), "median": value}
    line = protocol.PREFIX + json.dumps({"v": 1, "event": "result", **_result(stats_ms=stats)})
    assert _refused(line) == f"the device sent an invalid result: {says}"


def test_nan_is_no_json_number_unless_the_caller_checks_numbers():
    line = protocol.PREFIX + '{"v": 1, "event": "progress", "phase": "x", "done": NaN, "total": 1}'
    with pytest.raises(protocol.ProtocolError, match="malformed protocol line"):
        protocol.decode(line)
    assert protocol.decode(line, nonfinite=True)["done"] != protocol.decode(line, nonfinite=True)["done"]
    # Anywhere in a message, a field the schema leaves open included.
    deep = _line(**_result(extra={"head": [1.0, 7.25]})).replace("7.25", "-Infinity")
    assert "extra.head[1] is -Infinity" in _refused(deep)


@pytest.mark.parametrize("changes, says", [
    ({"load_ms": -12.0}, "load_ms is -12, not >= 0"),
    ({"accuracy": {"correct": 75, "total": 10, "top1": 7.5}}, "accuracy.top1 is 7.5, not in [0, 1]"),
    ({"threads": "one"}, "threads is 'one', not a number"),
    ({"stats_ms": ["fast"]}, "stats_ms is ['fast'], not an object"),
    ({"samples_ns": [1, -5, 3]}, "samples_ns[1] is -5, not > 0"),
    ({"backend": None}, "backend is null"),
    ({"stats_ms": {"median": 1.0}}, "stats_ms.count is missing"),
    ({"id": [3]}, "id is [3], not a number"),
    ({"samples_ns": [2**70] * 20}, "samples_ns holds a sample above 2^63 ns"),
    ({"threads": list(range(99))}, "threads is a list of 99, not a number"),
    ({"speed": {"kernel": "k", "before_ms": 0.6, "after_ms": -1}}, "speed.after_ms is -1, not > 0"),
    ({"speed": {"kernel": "k", "before_ms": "fast", "after_ms": 0.6}},
     "speed.before_ms is 'fast', not a number"),
])
def test_types_and_ranges_of_a_result(changes, says):
    assert says in _refused(_line(**_result(**changes)))


def test_statistics_must_agree_with_the_samples():
    stats = summarize_ms(SAMPLES)
    assert "stats_ms.median is 2.005 but its samples_ns give 2.0095" in _refused(
        _line(**_result(stats_ms={**stats, "median": 2.005})))
    assert "stats_ms.count is 19 but samples_ns holds 20" in _refused(
        _line(**_result(stats_ms={**stats, "count": 19})))
    # Without samples the statistics must at least be in order.
    assert "stats_ms.median (9) is above stats_ms.p90" in _refused(
        _line(**_result(samples_ns=None, stats_ms={**stats, "median": 9.0})))
    assert read_message(_line(**_result(samples_ns=None)), "dev")["samples_ns"] is None


def test_long_strings_are_cut_and_say_so_blobs_are_not():
    msg = read_message(_line("error", type="RuntimeError", message="E" * 10_000_000), "dev")
    assert len(msg["message"]) < protocol.STR_CAP + 100
    assert msg["message"].endswith("[cut by aiot: 10000000 characters in all]")
    text = "t" * 100_000
    assert read_message(_line("telemetry", id=2, text=text), "dev")["text"] == text
    odd = read_message(_line(**_result(extra={"note": "n" * 5000})), "dev")["extra"]["note"]
    assert len(odd) < protocol.STR_CAP + 100  # a field no schema names is capped too


def test_lists_and_nesting_are_capped(monkeypatch):
    monkeypatch.setattr(protocol, "LIST_CAP", 10)
    assert "samples_ns holds 20 items, more than 10" in _refused(_line(**_result()))
    monkeypatch.undo()
    assert "nested more than" in _refused(_line(**_result(extra={"a": json.loads("[" * 40 + "]" * 40)})))
    with pytest.raises(AgentError, match="malformed protocol line") as info:  # no RecursionError
        read_message(protocol.PREFIX + "[" * 100_000, "dev")
    assert "versions differ" not in info.value.one_line()


def test_malformed_lines_are_named_and_only_a_version_blames_versions():
    with pytest.raises(AgentError) as info:
        read_message(protocol.PREFIX + '{"v": 1, "event": "result", "stats_ms": {oops', "dev")
    assert "the device sent a malformed protocol line" in info.value.message
    assert "stats_ms" in info.value.message and "versions differ" not in info.value.one_line()
    with pytest.raises(AgentError) as info:
        read_message(protocol.PREFIX + "x" * 1_000_000, "dev")
    assert len(info.value.message) < 300  # a short excerpt, not the line
    with pytest.raises(AgentError, match="agent speaks protocol 2, host expects 1") as info:
        read_message(protocol.PREFIX + '{"v": 2, "event": "result"}', "dev")
    assert "versions differ" in info.value.hint
    with pytest.raises(AgentError, match="unknown event 'launch'"):
        read_message(_line("launch"), "dev")


@pytest.mark.parametrize("fields", [
    {"phase": 5, "done": "x", "total": -1}, {"phase": "measure"}, {"phase": "m", "done": -4, "total": 3},
])
def test_a_bad_progress_event_is_dropped_never_raised(fields):
    assert read_message(_line("progress", **fields), "dev") is None
    assert read_message(_line("progress", phase="measure", done=1, total=3), "dev")["done"] == 1


def test_an_answer_must_be_about_what_was_asked():
    spec = {"backend": "onnxruntime", "threads": 2}
    check_answer("result", {"backend": "onnxruntime", "threads": 2}, spec, "dev")
    with pytest.raises(DeviceMessageError, match="backend is 'tensorrt', the request asked for 'onnxruntime'"):
        check_answer("result", {"backend": "tensorrt", "threads": 2}, spec, "dev")
    with pytest.raises(DeviceMessageError, match="threads is 8, the request asked for 2"):
        check_answer("memory", {"backend": "onnxruntime", "threads": 8}, spec, "dev")
    check_answer("predicted", {"n": 3}, spec, "dev")  # no backend in a predicted answer


def test_the_columns_of_any_run_are_checked_before_they_are_stored():
    assert check_columns({"median_ms": 1.0, "p90_ms": 2.0, "load_ms": 0.0, "accuracy": 0.5}) is None
    assert check_columns({"median_ms": None, "p90_ms": None, "load_ms": None}) is None
    assert "median_ms is -1, not > 0" in check_columns({"median_ms": -1.0})
    assert "accuracy is 7.5, not in [0, 1]" in check_columns({"median_ms": 1.0, "accuracy": 7.5})
    assert "p90_ms is NaN" in check_columns({"p90_ms": float("nan")})


# -- framing --------------------------------------------------------------------------------


def test_framing_splits_across_chunks_and_keeps_what_it_should():
    framer = LineFramer("dev", "agent", limit=100)
    assert framer.feed(b"ab\r\ncd\nef") == ["ab", "cd"]
    assert framer.feed(b"") == [] and framer.feed(b"g") == [] and framer.feed(b"\n\n") == ["efg", ""]
    assert framer.feed("é".encode()[:1]) == [] and framer.feed("é\n".encode()[1:]) == ["é"]
    assert framer.feed(b"rest") == [] and framer.flush() == "rest" and framer.flush() is None


def test_a_line_past_the_limit_raises_once_it_passes_it(monkeypatch):
    framer = LineFramer("dev", "/usr/bin/python3", limit=10)
    framer.feed(b"12345")
    with pytest.raises(LineTooLong, match=r"line longer than .* MiB \(from python3 on dev\)"):
        framer.feed(b"678901")
    assert framer.feed(b"ok\n") == ["ok"]  # nothing of the long line was kept
    monkeypatch.setenv("AIOT_MAX_LINE_MB", "2")
    assert LineFramer("dev", "p").limit == 2 * 1024 * 1024


def test_framing_is_linear_in_the_line_length():
    chunk = b"x" * 65536
    times = []
    for mb in (8, 32):
        framer = LineFramer("dev", "p", limit=64 * 1024 * 1024)
        start = time.perf_counter()
        for _ in range(mb * 16):
            framer.feed(chunk)
        assert len(framer.feed(b"\n")[0]) == mb * 1024 * 1024
        times.append(time.perf_counter() - start)
    assert times[1] < 2.0  # re-splitting the partial line took ~100 s for 80 MB


class _Fed(LineStream):
    """A LineStream fed by the test (the reader-thread side called directly)."""

    def _kill(self) -> None:
        pass

    def _close_stdin(self) -> None:
        pass

    def _release(self) -> None:
        pass


def test_a_stream_reports_a_long_line_to_every_later_read(monkeypatch):
    monkeypatch.setenv("AIOT_MAX_LINE_MB", "1")
    stream = _Fed("dev", "agent")
    stream._on_stdout(b"first\n" + b"x" * 700_000)
    stream._on_stdout(b"y" * 700_000)
    stream._on_stdout(b"z\nnever seen\n")  # dropped: the stream is done
    stream._on_end(0)
    assert stream.read_line(1) == "first"
    for _ in range(2):
        with pytest.raises(LineTooLong):
            stream.read_line(1)


def test_what_reports_read_has_its_shape_checked():
    stats = summarize_ms(SAMPLES)
    assert "median_ci.low (5) is above stats_ms.median" in _refused(_line(**_result(
        stats_ms={**stats, "median_ci": {**stats["median_ci"], "low": 5.0}})))
    assert "stats_ms.median_ci.high is 2.02 but its samples_ns give" in _refused(_line(**_result(
        stats_ms={**stats, "median_ci": {**stats["median_ci"], "high": 2.02}})))
    assert "outliers.count is 'x', not a number" in _refused(_line(**_result(
        stats_ms={**stats, "outliers": {"count": "x"}})))
    assert "inputs[0] is 1, not an object" in _refused(_line(**_result(inputs=[1, "a"])))
    assert "outputs[0].name is 5, not text" in _refused(_line(**_result(
        outputs=[{"name": 5, "shape": [1], "dtype": "float32"}])))
    with pytest.raises(DeviceMessageError, match="cpus is \\[1, 2\\], the request asked for \\[0\\]"):
        check_answer("result", {"backend": "onnxruntime", "cpus": [1, 2]}, {"cpus": [0]}, "dev")
    with pytest.raises(DeviceMessageError, match="cpus is \\[1\\], the request asked for none"):
        check_answer("result", {"cpus": [1]}, {"backend": "onnxruntime"}, "dev")
    check_answer("result", {"cpus": [2]}, {"cpus": [2, 3]}, "dev")  # a cpuset narrowed it


def test_a_hello_names_its_python_and_runtime_versions_as_text():
    hello = {"agent_version": "0.7.0", "python": "3.11.2", "platform": "Linux", "machine": "x86_64",
             "runtimes": {"onnxruntime": "1.20.1", "litert": None}}
    assert read_message(_line("hello", **hello), "dev")["runtimes"]["litert"] is None
    assert "runtimes.onnxruntime is 5, not text" in _refused(
        _line("hello", **{**hello, "runtimes": {"onnxruntime": 5}}))
    assert "python is missing" in _refused(_line("hello", **{k: v for k, v in hello.items() if k != "python"}))
