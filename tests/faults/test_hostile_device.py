"""Hostile device data: what a device says about itself (model, SoC, build properties,
kernel, thermal zone names) can hold anything, and what aiot pushed to it can be replaced.

The device is the embedded ``local`` one with its probe's output replaced by a hostile
device's (its shell answers the probe script), so the facts travel the real path: probe →
record provenance → report / ``devices info``.
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
from pathlib import Path

import pytest

from tests.faults.conftest import answer_probe_with, count_records

ESC, BEL, CSI = "\x1b", "\x07", "\x9b"

# The probe script's output from a hostile device: formulas where spreadsheets look, HTML and
# Markdown where pages are rendered, terminal escapes (ANSI colour, OSC 8 hyperlink and window
# title, a one-byte C1 CSI) and Rich markup where the terminal shows them.
HOSTILE_PROBE = f"""@@uname
Linux -5.15{ESC}[31m x86_64
@@cpuinfo
processor\t: 0
model name\t: +cmd|' /C calc'!A0
@@meminfo
MemTotal:        1024000 kB
MemAvailable:     512000 kB
@@os
PRETTY_NAME="Evil | OS{ESC}]0;owned{BEL}"
@@cpufreq
0 2000000 1000000 1500000
@@devicetree
@@compatible
@@thermal
thermal_zone0\t{ESC}[2J{CSI}31mcpu[bold]\t45000
@@power
@@getprop
[ro.product.model]: [<script>alert(1)</script> | ![img](http://evil.example/t.png)]
[ro.product.manufacturer]: [=HYPERLINK("http://evil.example","x")]
[ro.soc.model]: [@SUM(1+1)*cmd|' /C calc'!A0]
[ro.soc.manufacturer]: [[bold red]pwn[/]]
[ro.build.version.release]: [14{ESC}]8;;http://evil.example{BEL}click{ESC}]8;;{BEL}]
"""

RUN = ("run", "-m", "tiny_cnn", "-f", "onnx", "--min-runs", "3", "--min-s", "0",
       "--warmup-min-s", "0")


@pytest.fixture
def hostile_local(monkeypatch):
    """The local device answering aiot's probe as a hostile device would."""
    answer_probe_with(monkeypatch, HOSTILE_PROBE)


@pytest.fixture
def hostile_record(cli, hostile_local):
    """One ok run recorded from the hostile device, its facts stored as the device said."""
    [record] = cli.json(*RUN)
    assert record["status"] == "ok", record["reason"]
    assert "<script>" in record["provenance"]["device"]["model"]
    return record


def _formula_like(text: str) -> bool:
    return text.startswith(("=", "+", "-", "@", "\t", "\r"))


@pytest.mark.fault("hostile device facts → report CSV")
def test_report_csv_has_no_formulas_from_device_facts(cli, hostile_record, fault, tmp_path):
    before = count_records()
    cli("report", "--format", "csv", "--out", str(tmp_path / "csv"))
    devices = list(csv.DictReader((tmp_path / "csv" / "devices.csv").open(newline="")))
    assert len(devices) == 1
    cells = [v for row in devices for v in row.values() if v]
    assert not [v for v in cells if _formula_like(v)], cells
    row = devices[0]
    # Shown as text, not evaluated: the apostrophe spreadsheets hide, the rest as it came.
    assert row["hardware"].startswith("\'=HYPERLINK(") and row["cpu"].startswith("'+cmd")
    assert row["soc"].startswith("'@SUM") and row["kernel"].startswith("'-5.15")
    assert ESC not in (tmp_path / "csv" / "devices.csv").read_text()
    runs = list(csv.DictReader((tmp_path / "csv" / "runs.csv").open(newline="")))
    assert float(runs[0]["median_ms"]) > 0 and int(runs[0]["threads"]) == 1  # numbers stay numbers
    fault.records_lost(before, count_records())


@pytest.mark.fault("hostile device facts → report Markdown/HTML")
def test_report_markdown_and_html_carry_no_markup_from_device(cli, hostile_record, fault, tmp_path):
    pytest.importorskip("matplotlib")
    before = count_records()
    md = Path(cli.json("report", "--format", "md", "--out", str(tmp_path / "md"))["files"][0]).read_text()
    page = Path(cli.json("report", "--out", str(tmp_path / "html"))["files"][0]).read_text()
    for text in (md, page):
        assert "<script" not in text and ESC not in text and BEL not in text and CSI not in text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    devices = md.split("### Devices", 1)[1]  # the provenance part, after the answers
    row = next(line for line in devices.splitlines() if line.startswith("| local |"))
    # One row with the Devices table's own 10 cells: the device's | and newlines broke nothing.
    assert len(re.split(r"(?<!\\)\|", row)) == 10 + 2, row
    assert "![img](" not in md and "!\\[img\\](http" in md  # a link is text, no image fetched
    fault.records_lost(before, count_records())


@pytest.mark.fault("hostile device facts → devices info terminal")
def test_devices_info_sends_no_escape_sequences_to_the_terminal(cli, hostile_local, fault):
    before = count_records()
    result = cli("devices", "info")
    shown = result.stdout
    assert not [c for c in shown if ord(c) < 32 and c not in "\n" or 0x7f <= ord(c) <= 0x9f], repr(shown)
    # Written out instead of acted on, and Rich markup from the device shown as it is.
    assert "\\x1b[31m" in shown and "\\x9b31m" in shown and "\\x1b]8;;http://evil.example\\x07click" in shown
    assert "[bold red]pwn[/]" in shown and "cpu[bold]" in shown
    fault.records_lost(before, count_records())


@pytest.mark.fault("device blob replaced with same-size garbage")
def test_a_damaged_blob_on_the_device_is_pushed_again(cli, fault, caplog):
    [first] = cli.json(*RUN)
    assert first["status"] == "ok", first["reason"]
    blob = Path(os.environ["AIOT_LOCAL_WORKDIR"], "blobs", first["artifact_sha256"][:16],
                "tiny_cnn.onnx")
    size = blob.stat().st_size
    blob.write_bytes(os.urandom(size))  # same size: "already on device" by size says yes
    before = count_records()
    [second] = cli.json(*RUN)
    assert second["status"] == "ok", second["reason"]
    assert hashlib.sha256(blob.read_bytes()).hexdigest() == first["artifact_sha256"]
    [repushed] = second["provenance"]["repushed"]
    assert repushed["file"] == "tiny_cnn.onnx" and repushed["found_sha256"] != first["artifact_sha256"]
    assert "damaged" in caplog.text
    fault.records_lost(before + 1, count_records())
