"""BiBench's published hardware latencies (Tables 17–20), and which device matches which.

The numbers ship as package data (``bibench_tables.json``, the source named inside it; a test
checks every value against the paper's text in the seeds). A device is compared with the
paper only where its probed facts name one of the SoCs or boards the paper measured: the
Android SoC's marketing or code name, a board's model string, an Apple CPU's brand string.
Near misses are not matched (a Snapdragon 855 is not the paper's 855+, a Kirin 9000 not its
9000E): a ratio against another chip's number would look like a finding and is none.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources

#: The paper's hardware name → patterns over a device's lower-cased facts (soc_name, soc,
#: model, cpu_model), any of which identifies it.
_PATTERNS = {
    "Kirin 970": (r"\bkirin ?970\b", r"\bhi3670\b"),
    "Kirin 980": (r"\bkirin ?980\b", r"\bhi3680\b"),
    "Kirin 985": (r"\bkirin ?985\b",),
    "Kirin 990": (r"\bkirin ?990\b", r"\bhi3690\b"),
    "Kirin 9000E": (r"\bkirin ?9000e\b",),
    "Dimensity 820": (r"\bdimensity ?820\b", r"\bmt6875\b"),
    "Dimensity 9000": (r"\bdimensity ?9000\b(?!\+)", r"\bmt6983\b"),
    "Snapdragon 855+": (r"\bsnapdragon ?855(\+| ?plus)", r"\bsm8150-ac\b"),
    "Snapdragon 870": (r"\bsnapdragon ?870\b", r"\bsm8250-ac\b"),
    "Snapdragon 888": (r"\bsnapdragon ?888\b(?!\+| ?plus)", r"\bsm8350\b", r"\blahaina\b"),
    "Raspberry Pi 3B+": (r"raspberry pi 3 model b plus", r"raspberry pi 3b\+"),
    "Raspberry Pi 4B": (r"raspberry pi 4 model b", r"raspberry pi 4b"),
    "Apple M1": (r"\bapple m1$",),
    "Apple M1 Max": (r"\bapple m1 max\b",),
}
_FACTS = ("soc_name", "soc", "model", "cpu_model")


@cache
def tables() -> dict:
    """The packaged Tables 17–20: ``source``, ``unit``, ``column_order``, ``architectures`` and
    ``devices`` → name → ``{"table", "layout", "threads": {"1": {arch: [ms or None, …]}}}``."""
    text = resources.files("aiot.host.engine").joinpath("bibench_tables.json").read_text(encoding="utf-8")
    return json.loads(text)


def paper_hardware(info: dict) -> str | None:
    """The paper's name of the hardware ``info`` (a device's probed facts) is, or None."""
    values = [str(info.get(key) or "").strip().lower() for key in _FACTS]
    for name, patterns in _PATTERNS.items():
        if any(re.search(p, value) for p in patterns for value in values if value):
            return name
    return None


def paper_ms(hardware: str, threads: int, arch: str, column: str) -> float | None:
    """The paper's latency (ms) of ``column`` for ``arch`` at ``threads`` on ``hardware``."""
    data = tables()
    row = data["devices"].get(hardware, {}).get("threads", {}).get(str(threads), {}).get(arch)
    if row is None:
        return None
    return row[data["column_order"].index(column)]


def source() -> str:
    """Where the packaged numbers come from."""
    return tables()["source"]
