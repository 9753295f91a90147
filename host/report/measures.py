"""The report's sections on how the devices ran: model load time per format, and telemetry
(temperature and frequency) per device, both read from a
:class:`~aiot.host.report.tally.Tally`."""

from __future__ import annotations

import statistics

from aiot.host.report.page import Column, Section, Table


#: ``load_time.csv``'s columns: one row per device (of one host), model and format.
LOAD_COLUMNS = (
    Column("device", "device"), Column("host", "host"), Column("model", "model"),
    Column("variant", "format"),
    Column("runs", "runs", "int"), Column("median", "median load ms", "ms"),
    Column("min", "min", "ms"), Column("max", "max", "ms"))


def load_table(tally) -> Table:
    """Per device, model and format: the ok runs' load times, their median and range."""
    rows = tuple({"device": d, "host": h, "model": m, "variant": v, "runs": len(x),
                  "median": statistics.median(x), "min": min(x), "max": max(x)}
                 for (d, h, m, v), x in sorted(tally.loads.items(),
                                               key=lambda kv: tuple(p or "" for p in kv[0])))
    return Table("load_time", "Model load time per format", LOAD_COLUMNS, rows, fold=("host",))


def load_section(tally) -> Section | None:
    """Load time per format (None when no run recorded one)."""
    table = load_table(tally)
    if not table.rows:
        return None
    return Section("load", "Load time per format",
                   "Time to load the model into its runtime, per run.", ("load_time",), (table,))


#: ``telemetry.csv``'s columns: one row per device.
TELEMETRY_COLUMNS = (
    Column("device", "device"), Column("readings", "readings", "int"),
    Column("temp_min", "CPU °C min", "score"), Column("temp_max", "CPU °C max", "score"),
    Column("freq_min", "mean MHz min", "score"), Column("freq_max", "mean MHz max", "score"))


def telemetry_table(tally) -> Table:
    """Per device: how many readings, and the range of its temperature and frequency."""
    rows = tuple({"device": device, "readings": t.readings, "temp_min": t.temps[0],
                  "temp_max": t.temps[1], "freq_min": t.freqs[0], "freq_max": t.freqs[1]}
                 for device, t in sorted(tally.telemetry.items()))
    return Table("telemetry", "Telemetry per device", TELEMETRY_COLUMNS, rows)


def telemetry_section(tally) -> Section:
    intro = ("The device's hottest CPU zone and mean core frequency, read right before and "
             "after every run, over the campaign.")
    if not tally.telemetry:
        return Section("telemetry", "Telemetry", intro,
                       note="no temperature or frequency readings (the devices expose no "
                            "thermal zones or cpufreq, e.g. a VM or container)")
    return Section("telemetry", "Telemetry", intro, ("telemetry",), (telemetry_table(tally),))
