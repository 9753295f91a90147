import json
import statistics

import pytest

from aiot.device_agent import protocol
from aiot.device_agent.stats import percentile, summarize_ms


def test_encode_decode_round_trip():
    line = protocol.encode("progress", phase="measure", done=3, total=50)
    assert line.startswith(protocol.PREFIX)
    assert protocol.decode(line + "\n") == {"v": 1, "event": "progress", "phase": "measure", "done": 3, "total": 50}


def test_human_text_is_not_a_message():
    assert protocol.decode("INFO: Created TensorFlow Lite XNNPACK delegate for CPU.") is None


@pytest.mark.parametrize("payload", ['{"v": 2, "event": "result"}', '{"v": 1, "event": "nope"}', "{not json", "[1]"])
def test_bad_messages_raise(payload):
    with pytest.raises(protocol.ProtocolError):
        protocol.decode(protocol.PREFIX + payload)


def test_nan_is_not_encodable():
    with pytest.raises(ValueError):
        protocol.encode("result", x=float("nan"))


def test_percentile_interpolates():
    values = [1.0, 2.0, 3.0, 4.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile(values, 50) == 2.5


def test_summary_matches_statistics_module():
    samples_ns = [1_000_000, 2_000_000, 3_000_000, 4_000_000, 10_000_000]
    s = summarize_ms(samples_ns)
    ms = [x / 1e6 for x in samples_ns]
    assert s["count"] == 5 and s["min"] == 1.0 and s["max"] == 10.0
    assert s["median"] == statistics.median(ms)
    assert s["mean"] == pytest.approx(statistics.fmean(ms))
    assert s["std"] == pytest.approx(statistics.stdev(ms))
    assert s["iqr"] == s["q3"] - s["q1"] == 2.0
    assert json.dumps(s)
