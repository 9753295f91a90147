"""The report's figures as PNG files, drawn with matplotlib's Agg canvas (no display needed).

Each figure is a function of the :class:`~aiot.host.report.build.Report` that returns a
matplotlib ``Figure``, or None when the records hold nothing to draw: that figure is then
left out and :func:`render` returns a note in its place, never an empty image.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from aiot.core.errors import MissingDependency
from aiot.core.fileio import write_atomic
from aiot.host.report import robust

DPI = 100
WIDTH_IN = 9.0
INVALID_STYLE = {"marker": "x", "color": "#d62728", "s": 70, "linewidths": 2, "zorder": 5}


@dataclass(frozen=True)
class Plot:
    """A drawn figure: its file (beside the page), title and size in pixels."""

    key: str
    file: str
    title: str
    width: int
    height: int


def _figure(rows: int = 1, cols: int = 1, height_in: float = 4.0, **kw):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, height_in * rows), dpi=DPI, layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, **kw)
    return fig, [ax for row in axes for ax in row]


def _scale(ax, axis: str, values) -> None:
    """A log axis with plain tick labels when values span more than a decade, else a linear
    one from zero (so small differences are not blown up)."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    values = [v for v in values if v and v > 0]
    if values and max(values) / min(values) > 10:
        getattr(ax, f"set_{axis}scale")("log")
        which = getattr(ax, f"{axis}axis")
        which.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))  # 1, 2, 5, 10, 20, ...
        which.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        which.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    else:
        getattr(ax, f"set_{axis}lim")(0, None)


def _mark_invalid(ax, points, label_once: list[bool]) -> None:
    if points:
        xs, ys = zip(*points)
        ax.scatter(xs, ys, label=None if label_once[0] else "INVALID run", **INVALID_STYLE)
        label_once[0] = True


LABEL_CHARS = 44  # a legend entry or tick label longer than this is cut in the middle
MARKERS = "osD^vPX*h<>p"


def short(text: str, width: int = LABEL_CHARS) -> str:
    """``text`` cut in the middle to ``width`` characters (file names keep their ends)."""
    if len(text) <= width:
        return text
    half = (width - 1) // 2
    return text[:half] + "…" + text[-(width - 1 - half):]


def palette(n: int) -> list:
    """``n`` colours, no two the same: tab10 up to 10; tab20 (its dark half first) up to 20;
    tab20, tab20b and tab20c up to 60; evenly spaced on turbo beyond."""
    from matplotlib import colormaps

    if n <= 10:
        return [colormaps["tab10"](i) for i in range(n)]
    if n <= 20:
        return [colormaps["tab20"](i) for i in [*range(0, 20, 2), *range(1, 20, 2)][:n]]
    if n <= 60:
        return [colormaps[m](i) for m in ("tab20", "tab20b", "tab20c") for i in range(20)][:n]
    return [colormaps["turbo"](i / (n - 1)) for i in range(n)]


def series_style(keys) -> dict:
    """A distinct colour, and a marker and line style, for each series key (same key, same
    look in every panel)."""
    keys = list(dict.fromkeys(keys))
    colours = palette(len(keys))
    return {k: {"color": colours[i], "marker": MARKERS[i % len(MARKERS)],
                "linestyle": "-" if (i // len(MARKERS)) % 2 == 0 else "--"}
            for i, k in enumerate(keys)}


def series_labels(runs) -> dict:
    """Series key (model, format, input shape) → its legend text; the model's name is cut in
    the middle when long (the format stays whole), and the shape is named for models
    measured at several shapes."""
    shapes: dict[str, set] = {}
    for r in runs:
        shapes.setdefault(r.model_label, set()).add(r.input_shape)
    return {(r.model_label, r.variant, r.input_shape):
            " · ".join([short(r.model_label, 30), r.variant]
                       + ([r.input_shape or "shape ?"] if len(shapes[r.model_label]) > 1 else []))
            for r in runs}


def legend_columns(labels) -> int:
    """As many legend columns as fit the figure's width at the legend's font size."""
    longest = max((len(str(label)) for label in labels), default=1)
    return max(1, min(len(labels), int((WIDTH_IN - 0.4) // (0.068 * longest + 0.55))))


def legend_below(fig, handles, labels) -> None:
    """One legend for the whole figure, under the panels: never over the data."""
    if handles:
        fig.legend(handles, labels, loc="outside lower center", fontsize="small",
                   ncols=legend_columns(labels), frameon=False)


def _legend_height(labels) -> float:
    """Inches the legend below takes (``labels``: the legend's texts)."""
    return 0.24 * -(-len(labels) // legend_columns(labels)) + 0.3 if labels else 0.0


def machine_names(runs) -> dict:
    """``{run: "local"}``, or ``"local · lab-b"`` once the runs come from several hosts: the
    device a panel or a legend entry names (two hosts' ``local`` are two devices)."""
    several = len({r.host for r in runs}) > 1
    return {r.id: f"{r.device} · {r.host or 'host ?'}" if several else r.device for r in runs}


def latency_threads(report):
    """Median latency vs threads: one panel per device, one line per model, format and input
    shape, each with its own colour and marker, the legend under the panels."""
    runs = report.plotted_runs()
    runs = [r for r in runs if r.threads]
    if not runs:
        return None
    where = machine_names(runs)
    devices = sorted(set(where.values()))
    labels = series_labels(runs)
    style = series_style(sorted(labels))
    cols = min(len(devices), 2)
    rows = (len(devices) + cols - 1) // cols
    fig, axes = _figure(rows, cols, height_in=3.6)
    fig.set_figheight(3.6 * rows + _legend_height(sorted(set(labels.values()))))
    entries: dict[str, object] = {}
    flagged = [False]
    for ax, device in zip(axes, devices):
        mine = [r for r in runs if where[r.id] == device]
        for key in sorted({(r.model_label, r.variant, r.input_shape) for r in mine},
                          key=lambda k: tuple(x or "" for x in k)):
            pts = sorted((r for r in mine if (r.model_label, r.variant, r.input_shape) == key),
                         key=lambda r: r.threads)
            ys = [r.latency_ms for r in pts]
            up = [max((r.p90_ms or y) - y, 0) for r, y in zip(pts, ys)]
            line = ax.errorbar([r.threads for r in pts], ys, yerr=[[0] * len(ys), up], capsize=3,
                               markersize=5, label=labels[key], **style[key])
            entries.setdefault(labels[key], line)
            _mark_invalid(ax, [(r.threads, r.latency_ms) for r in pts if r.invalid], flagged)
        threads = sorted({r.threads for r in mine})
        ax.set_xscale("log", base=2)
        ax.set_xticks(threads, [str(t) for t in threads])
        ax.minorticks_off()
        _scale(ax, "y", [r.latency_ms for r in mine] + [r.p90_ms for r in mine])
        title = device + (" (emulated)" if any(r.emulated for r in mine) else "")
        ax.set(title=title, xlabel="threads", ylabel="latency (ms)")
        ax.grid(alpha=0.3)
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label == "INVALID run":
                entries.setdefault(label, handle)
    for ax in axes[len(devices):]:
        ax.set_visible(False)
    legend_below(fig, list(entries.values()), list(entries))
    return fig


def bnn_speedup(report):
    """Speedup of each binarized run over its FP32 baseline, per device and thread count."""
    pairs = report.matching.pairs
    if not pairs:
        return None
    devices = sorted({p.device for p in pairs})
    fig, axes = _figure(len(devices), 1, height_in=3.2)
    invalid = report.tally.invalid_ids()
    for ax, device in zip(axes, devices):
        mine = [p for p in pairs if p.device == device]
        groups = sorted({(p.model, p.algorithm, p.format) for p in mine})
        threads = sorted({p.threads or 0 for p in mine})
        width = 0.8 / len(groups)
        colours = palette(len(groups))
        for i, group in enumerate(groups):
            sel = [p for p in mine if (p.model, p.algorithm, p.format) == group]
            xs = [threads.index(p.threads or 0) + (i - (len(groups) - 1) / 2) * width for p in sel]
            bars = ax.bar(xs, [p.speedup for p in sel], width, label=short(" · ".join(group)),
                          color=colours[i])
            ax.bar_label(bars, [f"{p.speedup:.2f}x" for p in sel], padding=2, fontsize=8)
            for bar, p in zip(bars, sel):
                if {p.fp_id, p.bin_id} & invalid:
                    bar.set_hatch("//")
                    bar.set_edgecolor("#d62728")
        ax.axhline(1.0, color="grey", lw=1, ls="--")
        ax.set_xticks(range(len(threads)), [f"{t}t" if t else "—" for t in threads])
        ax.set(title=f"{device}: T_fp32 / T_bin (hatched: an INVALID run)", ylabel="speedup (x)")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return fig


def leaderboard(report):
    """VIPS and VOPS per device as horizontal bars, best on top."""
    from matplotlib.ticker import EngFormatter

    rows = report.leaderboard.rows
    metrics = [m for m in ("vips", "vops") if any(r.get(m) for r in rows)]
    if not metrics:
        return None
    fig, axes = _figure(1, len(metrics), height_in=max(2.0, 0.5 * len(rows) + 1.2))
    for ax, metric in zip(axes, metrics):
        ranked = sorted((r for r in rows if r.get(metric) is not None), key=lambda r: r[metric])
        bars = ax.barh([str(r.get("device")) for r in ranked], [r[metric] for r in ranked],
                       color="#1f77b4")
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))
        ax.bar_label(bars, [EngFormatter(sep="", places=2)(r[metric]) for r in ranked], padding=3)
        ax.margins(x=0.2)
        ax.set(title=metric.upper(), xlabel=metric.upper())
        ax.grid(axis="x", alpha=0.3)
    return fig


def accuracy_latency(report):
    """Top-1 accuracy against median latency: a colour per format, a marker per device."""
    runs = [r for r in report.plotted_runs() if r.accuracy is not None]
    if not runs:
        return None
    variants = sorted({r.variant for r in runs})
    where = machine_names(runs)
    devices = sorted(set(where.values()))
    entries = [short(f"{d} · {v}") for d in devices for v in variants]
    fig, (ax,) = _figure(height_in=4.5 + _legend_height(entries))
    colours = dict(zip(variants, palette(len(variants))))
    markers = dict(zip(devices, MARKERS * (len(devices) // len(MARKERS) + 1)))
    for device in devices:
        for variant in variants:
            sel = [r for r in runs if where[r.id] == device and r.variant == variant]
            if sel:
                ax.scatter([r.latency_ms for r in sel], [r.accuracy * 100 for r in sel],
                           color=colours[variant], marker=markers[device], s=50,
                           label=short(f"{device} · {variant}"))
                for r in sel:
                    ax.annotate(f"{r.threads}t", (r.latency_ms, r.accuracy * 100), fontsize=7,
                                xytext=(4, 4), textcoords="offset points")
    _mark_invalid(ax, [(r.latency_ms, r.accuracy * 100) for r in runs if r.invalid], [False])
    _scale(ax, "x", [r.latency_ms for r in runs])
    ax.set(xlabel="latency (ms)", ylabel="top-1 accuracy (%)")
    ax.grid(alpha=0.3)
    legend_below(fig, *ax.get_legend_handles_labels())
    return fig


def load_time(report):
    """Model load time per format: horizontal bars (the median per device) with every run as
    a dot, one row per model and format, so long file names never overlap."""
    loads = report.tally.loads  # (device, host, model, format) → every ok run's load time
    if not loads:
        return None
    several = len({host for _device, host, _model, _variant in loads}) > 1
    name = {key: f"{key[0]} · {key[1] or 'host ?'}" if several else key[0] for key in loads}
    by_bar = {(name[key], (key[2], key[3])): x for key, x in loads.items()}
    groups = sorted({(model, variant) for _device, _host, model, variant in loads})
    devices = sorted(set(name.values()))
    fig, (ax,) = _figure(height_in=1.2 + 0.32 * len(groups) * max(1, len(devices) * 0.6)
                         + _legend_height(devices))
    height = 0.8 / len(devices)
    colours = palette(len(devices))
    for i, device in enumerate(devices):
        offset = (i - (len(devices) - 1) / 2) * height
        label = device
        for j, group in enumerate(groups):
            bar = by_bar.get((device, group))
            if bar:
                ax.barh(j + offset, statistics.median(bar), height, color=colours[i], label=label)
                dots = _spread(bar)
                ax.scatter(dots, [j + offset] * len(dots), color="black", s=10, zorder=3)
                label = None  # one legend entry per device
    ax.set_yticks(range(len(groups)), [f"{short(m, 30)} · {v}" for m, v in groups], fontsize=8)
    ax.invert_yaxis()  # first group on top, as in the tables
    # Each bar's smallest positive and largest time span what every dot spans.
    _scale(ax, "x", [v for x in loads.values()
                     for v in (min((y for y in x if y > 0), default=0), max(x))])
    ax.set(xlabel="load time (ms)")
    ax.grid(axis="x", alpha=0.3)
    legend_below(fig, *ax.get_legend_handles_labels())
    return fig


#: Dots one bar of a figure shows at most: past it, evenly spaced order statistics (a year of
#: nightly runs is 365 dots on one spot; the spread is what the reader sees).
MAX_DOTS = 60


def _spread(values: list[float]) -> list[float]:
    """``values``, or :data:`MAX_DOTS` of them spread over their range (min and max kept)."""
    if len(values) <= MAX_DOTS:
        return values
    ordered = sorted(values)
    step = (len(ordered) - 1) / (MAX_DOTS - 1)
    return [ordered[round(i * step)] for i in range(MAX_DOTS)]


#: Points of one device's telemetry line at most (the figure is ~1000 pixels wide).
MAX_POINTS = 2000


def telemetry(report):
    """CPU temperature and mean frequency over the campaign, one line per device."""
    panels = [(attr, label) for attr, label in (("temp_c", "hottest CPU zone (°C)"),
                                                ("freq_mhz", "mean CPU frequency (MHz)"))
              if any(getattr(x, attr) is not None for x in report.readings)]
    if not panels:
        return None
    from datetime import datetime

    by_device: dict[str, list] = {}
    for x in report.readings:
        by_device.setdefault(x.device, []).append(x)
    fig, axes = _figure(len(panels), 1, height_in=2.8, sharex=True)
    for ax, (attr, label) in zip(axes, panels):
        devices = sorted(by_device)
        for device, colour in zip(devices, palette(len(devices))):
            mine = [x for x in by_device[device] if getattr(x, attr) is not None]
            # A year of readings is more points than the figure has pixels: every k-th.
            mine = mine[::max(1, len(mine) // MAX_POINTS)]
            pts = [(datetime.fromtimestamp(x.time), getattr(x, attr)) for x in mine]
            if pts:
                ax.plot(*zip(*pts), marker=".", label=device, color=colour)
        ax.set(ylabel=label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    axes[-1].set_xlabel("time (host clock)")
    return fig


#: key → (file, title, drawing function, what a missing figure's note says)
FIGURES: dict[str, tuple[str, str, Callable, str]] = {
    "latency_threads": ("latency_threads.png", "Latency vs threads", latency_threads,
                        "no ok run with a latency and a thread count to plot"),
    "bnn_speedup": ("bnn_speedup.png", "BNN speedup vs FP32", bnn_speedup,
                    "no binarized run with an FP32 baseline to plot"),
    "leaderboard": ("leaderboard.png", "VIPS/VOPS leaderboard", leaderboard,
                    "no VIPS/VOPS scores to plot"),
    "accuracy_latency": ("accuracy_latency.png", "Accuracy vs latency", accuracy_latency,
                         "no run measured accuracy on the device (aiot run/sweep --dataset …)"),
    "load_time": ("load_time.png", "Load time per format", load_time, "no run recorded a load time"),
    "telemetry": ("telemetry.png", "Telemetry over the campaign", telemetry,
                  "no temperature or frequency readings to plot"),
}


def robust_curves(report, kind: str):
    """One panel per curve name; one line per target and series (the newest ok records),
    each with its own colour and marker, the legend under the panels: one robustness suite's
    curves (``kind``: a key of :data:`aiot.host.report.robust.SUITES`)."""
    shown = robust.newest_per_target(report.others.get(kind, []))
    names = list(dict.fromkeys(c["name"] for r in shown for c in (r.result or {}).get("curves") or []))
    if not names:
        return None
    lines = []  # (panel name, label, xs, ys, curve)
    for r in shown:
        for curve in (r.result or {}).get("curves") or []:
            for label, points in curve["series"].items():
                pts = [(x, y) for x, y in points if x is not None and y is not None]
                if pts:
                    prefix = f"{robust.target_label(r)}: " if len(shown) > 1 else ""
                    lines.append((curve["name"], short(f"{prefix}{label}"), *zip(*pts), curve))
    style = series_style(label for _, label, *_ in lines)
    cols = min(len(names), 2)
    rows = (len(names) + cols - 1) // cols
    fig, axes = _figure(rows, cols, height_in=3.6)
    fig.set_figheight(3.6 * rows + _legend_height(list(style)))
    entries: dict[str, object] = {}
    for ax, name in zip(axes, names):
        for panel, label, xs, ys, curve in lines:
            if panel != name:
                continue
            (line,) = ax.plot(xs, ys, label=label, **style[label])
            entries.setdefault(label, line)
            ax.set(title=curve.get("title", name), xlabel=curve.get("x_label", ""),
                   ylabel=curve.get("y_label", ""))
        ax.grid(alpha=0.3)
    for ax in axes[len(names):]:
        ax.set_visible(False)
    legend_below(fig, list(entries.values()), list(entries))
    return fig


def _robust_figures() -> dict:
    return {robust.figure_key(kind): (f"{robust.figure_key(kind)}.png", title, partial(robust_curves, kind=kind),
                                      "no curve in this suite's records")
            for kind, (title, _intro) in robust.SUITES.items()}


FIGURES.update(_robust_figures())


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise MissingDependency("matplotlib", "report", "the report's plots need it") from None


def render(report, keys, out_dir: Path) -> dict[str, Plot | str]:
    """Draw the figures ``keys`` into ``out_dir``; a key maps to its Plot or to a note.

    Files of figures not drawn this time are removed, so the folder never shows a stale plot
    beside a fresh page.
    """
    _require_matplotlib()
    drawn: dict[str, Plot | str] = {}
    for key in keys:
        file, title, draw, empty = FIGURES[key]
        fig = draw(report)
        if fig is None:
            drawn[key] = empty
            continue
        fig.suptitle(title)
        write_atomic(out_dir / file, lambda tmp, fig=fig: fig.savefig(tmp, format="png"))
        (out_dir / file).chmod(0o644)  # a page to share, not a private temp file
        width, height = (round(v) for v in fig.get_size_inches() * fig.dpi)
        drawn[key] = Plot(key, file, title, width, height)
    for key, (file, *_) in FIGURES.items():
        if not isinstance(drawn.get(key), Plot):
            (out_dir / file).unlink(missing_ok=True)
    return drawn
