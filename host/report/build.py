"""Store records → the report model: runs, scores, telemetry, provenance, sections and tables.

Nothing here draws or writes files: :mod:`aiot.host.report.plots` and
:mod:`aiot.host.report.html` render what :func:`build` returns. Tables keep raw values (CSV
gets numbers); the writers format them by each column's ``kind``.

Plots and the first screen use the newest ok record per key (a configuration at one thread
count, :mod:`aiot.host.store.identity`: an int8, a ``--via app`` and a float run of one model
are three); tables list every record, and INVALID runs are kept and flagged, never dropped.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from aiot.core.errors import UsageError
from aiot.host.engine.input_values import values_detail
from aiot.host.engine.validity import INVALID, emulated
from aiot.host.report import measures, predicted, robust, summary
from aiot.host.report.page import Column, Section, Table
from aiot.host.report.tally import Tally
from aiot.host.scores.om_infer import match_runs, om_infer
from aiot.host.store import identity
from aiot.host.store.identity import shape_label
from aiot.host.store.placement import placement_text

LATENCY, TRAIN = "latency", "train"


@dataclass(frozen=True)
class Run:
    """One latency record, flattened for tables and plots."""

    id: str
    device: str
    model: str
    format: str
    threads: int | None
    status: str
    created_at: str
    host: str | None = None  # the host that drove it, as views name it (identity.host_name_of)
    sweep_id: str | None = None
    reason: str | None = None
    validity: str | None = None
    invalid_reasons: tuple[str, ...] = ()
    median_ms: float | None = None
    p90_ms: float | None = None
    mean_ms: float | None = None
    load_ms: float | None = None
    accuracy: float | None = None
    size_bytes: int | None = None
    runtime: str | None = None
    binarize: str | None = None
    delegate: str | None = None
    native: str | None = None
    cluster: str | None = None
    input_shape: str | None = None  # "1x3x224x224", or "a=1x4 b=1x4" for several inputs
    input_values: str | None = None  # given values, made-up integers and their range
    emulated: bool = False  # measured on one of aiot's emulated devices: not a phone's time
    profile: dict | None = None  # per-operator times (run --profile), see aiot.host.engine.profiles
    placement: str | None = None  # which operators the engine took (aiot.host.store.placement)
    # From aiot.host.store.identity, resolved once per record (every table and plot reads these):
    key: identity.Key | None = None  # what a re-measurement of the same thing shares
    model_label: str = "—"  # the model as --model names it (resnet18_bnn)
    variant: str = "—"  # how it runs: tflite[quant=int8]+nnapi (benchmark_model) @big via app
    latency_ms: float | None = None  # the median, or the mean a native tool printed

    @property
    def invalid(self) -> bool:
        return self.validity == INVALID

    @property
    def configuration(self) -> identity.Configuration | None:
        """The key less its thread count: one line of a plot, one row of the first screen."""
        return self.key.configuration if self.key else None


@dataclass(frozen=True)
class Reading:
    """One telemetry reading taken right before or after a run."""

    device: str
    time: float  # Unix seconds on the host
    temp_c: float | None  # hottest CPU zone
    freq_mhz: float | None  # mean current frequency over the cores
    run_id: str


@dataclass
class Leaderboard:
    """VIPS / VOPS per device with the tests summed, or a note saying why there are none."""

    rows: list[dict] = field(default_factory=list)  # per device, best VIPS first
    tests: list[dict] = field(default_factory=list)  # per (device, implementation, model)
    notes: list[str] = field(default_factory=list)  # the scorer's choices, e.g. which threads
    note: str | None = None


@dataclass
class Provenance:
    """Where the report's records came from."""

    devices: list[dict]
    versions: list[dict]  # {"what": ..., "values": ...}
    first: str | None
    last: str | None
    sweeps: list[str]
    statuses: dict[str, int]


@dataclass
class Report:
    """Everything the writers and plots need, built from store records by :func:`build`."""

    generated_at: str
    source: str  # the result store it was built from, as the user named it
    sweep: str | None
    runs: list[Run]  # every run; in a summarised report the newest ``row_limit`` only
    trainings: list[dict]
    matching: object  # aiot.host.scores.om_infer.Matching
    om_scores: list
    leaderboard: Leaderboard
    readings: list[Reading]  # every one; in a summarised report a sample for the figure
    others: dict[str, list]  # kind → records of kinds other than latency and train
    provenance: Provenance
    #: A summarised report (a large store, :mod:`aiot.host.report.scale`): the run tables list
    #: the newest ``row_limit`` runs (None: every run), and ``extra`` sections (trends) are
    #: added before provenance.
    row_limit: int | None = None
    extra: list[Section] = field(default_factory=list)
    #: What every section reads of the runs (counts, plotted runs, table rows, load times,
    #: telemetry): from ``runs`` and ``readings`` when not given; a summarised report's comes
    #: from its streaming pass.
    tally: Tally | None = None

    def __post_init__(self) -> None:
        if self.tally is None:
            self.tally = Tally.of(self.runs, self.readings)

    @property
    def invalid_runs(self) -> list[Run]:
        """The INVALID runs (in a summarised report the newest ``row_limit`` flagged runs'
        INVALID ones: ``tally.invalid`` counts them all)."""
        return [r for r in self.tally.flagged.runs() if r.invalid]

    def plotted_runs(self) -> list[Run]:
        """Per key the newest ok run with a latency, a VALID one where there is one
        (an INVALID run is plotted, marked, only when nothing better exists)."""
        return sorted((run for run, _record in self.tally.plotted.values()), key=_run_order)

    def sections(self) -> list[Section]:
        """The page's parts in order; a part with nothing to show is left out (see
        :meth:`left_out`)."""
        return [s for s in _sections(self) if not _empty(s)]

    def left_out(self) -> dict[str, str]:
        """The parts left out of the page, each with why (for the CLI, not the page)."""
        return {s.key: s.note for s in _sections(self) if _empty(s)}


def _empty(section: Section) -> bool:
    return bool(section.note) and not section.figures and not any(t.rows for t in section.tables)


def _run_order(run: Run) -> tuple:
    return (run.device, run.model_label, run.input_shape or "", run.variant, run.threads or 0,
            str(run.configuration), run.created_at)


def input_shape(record) -> str | None:
    """The shape a run fed, named as every table names it (``1x3x224x224``, or
    ``name=dims`` per input for a model with several), or None when unknown."""
    label = shape_label(record, None)
    return None if label == "—" else label


def _run(record, ident: tuple[identity.Key, str] | None = None) -> Run:
    """``ident``: the record's key and variant, when the caller already has them."""
    spec, result, prov = record.spec or {}, record.result or {}, record.provenance or {}
    runtime = prov.get("runtime") or {}
    validity = result.get("validity") or {}
    key, variant = ident or (identity.key(record), identity.variant(record))
    return Run(
        id=record.id, device=record.device or "—", model=record.model or "—",
        format=record.format or "—", threads=record.threads, status=record.status,
        created_at=record.created_at, host=identity.host_name_of(record),
        sweep_id=record.sweep_id, reason=record.reason,
        validity=record.validity, invalid_reasons=tuple(validity.get("reasons") or ()),
        median_ms=record.median_ms, p90_ms=record.p90_ms,
        mean_ms=(result.get("stats_ms") or {}).get("mean"), load_ms=record.load_ms,
        accuracy=record.accuracy, size_bytes=record.size_bytes,
        runtime=" ".join(str(v) for v in (runtime.get("backend"), runtime.get("version")) if v) or None,
        binarize=spec.get("binarize"), delegate=spec.get("delegate"), native=spec.get("native"),
        cluster=spec.get("cluster"), input_shape=input_shape(record),
        input_values=values_detail(result),
        emulated=emulated(prov.get("device") or {}),
        profile=result.get("profile") if isinstance(result.get("profile"), dict) else None,
        placement=placement_text(result),
        key=key, model_label=key.configuration.model_label or "—", variant=variant,
        latency_ms=identity.latency_ms(record),
    )


def _training(record) -> dict:
    spec, result = record.spec or {}, record.result or {}
    return {"model": record.model, "host": identity.host_name_of(record),
            "binarize": spec.get("binarize"), "dataset": spec.get("dataset"),
            "epochs": result.get("epochs_run", spec.get("epochs")), "accuracy": record.accuracy,
            "seconds": result.get("seconds"), "status": record.status, "reason": record.reason,
            "created_at": record.created_at, "id": record.id}


def _readings(record) -> list[Reading]:
    """The before and after readings of a run that carry a temperature or a frequency."""
    state = (record.provenance or {}).get("device_state") or {}
    readings = []
    for phase in ("before", "after"):
        t = state.get(phase) or {}
        freqs = [v for v in (t.get("cpu_freq_khz") or {}).values() if v]
        freq = statistics.fmean(freqs) / 1000 if freqs else None
        if t.get("timestamp") and (t.get("cpu_temp_max_c") is not None or freq is not None):
            readings.append(Reading(record.device or "—", float(t["timestamp"]),
                                    t.get("cpu_temp_max_c"), freq, record.id))
    return readings


def _device_facts(name: str, info: dict) -> dict:
    os_name = (f"Android {info['android_version']}" if info.get("android_version")
               else info.get("distribution") or info.get("os"))
    hardware = " ".join(str(v) for v in (info.get("manufacturer"), info.get("model")) if v)
    return {"device": name, "hardware": hardware or None, "cpu": info.get("cpu_model"),
            "soc": info.get("soc"), "cores": info.get("cores"), "abi": info.get("abi"),
            "os": os_name, "kernel": info.get("kernel"), "transport": info.get("transport"),
            "emulated": "yes" if emulated(info) else None}


def version_facts(record) -> Iterator[tuple[str, str]]:
    """The version facts one record names: ``("aiot", "0.1.0")``, ``("runtime litert", ...)``."""
    prov = record.provenance or {}
    git = prov.get("git") or {}
    host = prov.get("host") or {}
    runtime = prov.get("runtime") or {}
    facts = [("aiot", prov.get("aiot_version")),
             ("git commit", git["id"][:12] + (" (dirty)" if git.get("dirty") else "")
              if git.get("id") else None),
             ("host", " · ".join(str(v) for v in (host.get("hostname"), host.get("platform")) if v)),
             (f"runtime {runtime.get('backend')}", runtime.get("version")),
             ("device agent", ((prov.get("device") or {}).get("agent") or {}).get("agent_version")),
             *((f"toolchain {tool}", version) for tool, version in (prov.get("toolchain") or {}).items())]
    return ((what, str(value)) for what, value in facts if value)


def version_rows(seen: dict[str, set[str]]) -> list[dict]:
    """Each version fact with every value seen (mixed versions in one report are visible)."""
    return [{"what": k, "values": ", ".join(sorted(v))} for k, v in sorted(seen.items())]


def _versions(records) -> list[dict]:
    seen: dict[str, set[str]] = {}
    for r in records:
        for what, value in version_facts(r):
            seen.setdefault(what, set()).add(value)
    return version_rows(seen)


def _provenance(records) -> Provenance:
    newest_device: dict[str, dict] = {}
    for r in sorted(records, key=lambda r: r.created_at):
        info = (r.provenance or {}).get("device")
        if r.kind == LATENCY and info:
            newest_device[r.device or info.get("name") or "—"] = info
    times = [t for r in records for t in (r.created_at, r.finished_at) if t]
    return Provenance(
        devices=[_device_facts(name, info) for name, info in sorted(newest_device.items())],
        versions=_versions(records), first=min(times, default=None), last=max(times, default=None),
        sweeps=sorted({r.sweep_id for r in records if r.sweep_id}),
        statuses=dict(Counter(r.status for r in records)),
    )


def leaderboard(records) -> Leaderboard:
    """VIPS / VOPS per device from :mod:`aiot.host.scores.vips` (INVALID runs left out, as
    ``aiot score vips`` does), or a note when there are no scores."""
    try:
        from aiot.host.scores import vips
    except ImportError:
        return Leaderboard(note="VIPS/VOPS: no scores (this aiot has no VIPS/VOPS scorer)")
    selection = vips.select_tests(records)
    scores = vips.device_scores(selection.tests, selection.not_run)
    if not scores:
        return Leaderboard(note="VIPS/VOPS: no scores (no VALID ok run with both an accuracy "
                                "and a latency: measure with --dataset)")
    rows = [{**s.to_dict(), "not_run": len(s.not_run),
             "not_run_why": "; ".join(f"{n.implementation}/{n.model}: {n.reason}" for n in s.not_run)}
            for s in scores]
    hosts = {r.id: identity.host_name_of(r) for r in records}  # a test's source record's
    tests = [{**t.to_dict(), "host": hosts.get(t.source)} for t in selection.tests]
    return Leaderboard(rows=sorted(rows, key=lambda d: -d["vips"]), tests=tests,
                       notes=list(selection.notes))


def collect(store, sweep: str | None = None, host: str | None = None) -> list:
    """The store's records (of one sweep, of one host), oldest first; pending ones included.

    Raises:
        UsageError: when there is nothing to report.
    """
    records = store.query(sweep_id=sweep, host=host)
    if not records:
        where = f"sweep '{sweep}'" if sweep else str(store.path)
        where += f" of host {host}" if host else ""
        raise UsageError(f"no records in {where} to report on",
                         "see: aiot results list" if sweep else "measure first: aiot demo or aiot sweep")
    return records


def build(records, source: str, sweep: str | None = None, generated_at: str | None = None) -> Report:
    """The report model of ``records`` (any kinds, any statuses).

    Args:
        source: the result store as the user knows it (shown as provenance).
        sweep: the sweep the records were limited to, if any.
        generated_at: UTC ISO time to state (default: now).
    """
    latency = [r for r in records if r.kind == LATENCY]
    matching = match_runs(latency)
    return Report(
        generated_at=generated_at or datetime.now(UTC).isoformat(timespec="seconds"),
        source=source, sweep=sweep,
        runs=sorted((_run(r) for r in latency), key=_run_order),
        trainings=[_training(r) for r in records if r.kind == TRAIN],
        matching=matching, om_scores=om_infer(matching.pairs),
        leaderboard=leaderboard([r for r in latency if r.status == "ok"]),
        readings=sorted((x for r in latency for x in _readings(r)), key=lambda x: x.time),
        others=_others(records), provenance=_provenance(records),
    )


def _others(records) -> dict[str, list]:
    others: dict[str, list] = {}
    for r in records:
        if r.kind not in (LATENCY, TRAIN):
            others.setdefault(r.kind, []).append(r)
    return others


# -- sections and tables ----------------------------------------------------------------------

def _verdict_notes(run: Run) -> str | None:
    if run.status != "ok":
        return run.reason
    return "; ".join(run.invalid_reasons) or None


def _run_row(run: Run) -> dict:
    return {"device": run.device, "host": run.host, "model": run.model_label,
            "variant": run.variant,
            "input_shape": run.input_shape, "input_values": run.input_values,
            "threads": run.threads, "median_ms": run.median_ms, "p90_ms": run.p90_ms,
            "mean_ms": run.mean_ms, "load_ms": run.load_ms, "accuracy": run.accuracy,
            "size_bytes": run.size_bytes, "runtime": run.runtime, "status": run.status,
            "validity": run.validity, "notes": _verdict_notes(run), "placement": run.placement,
            "created_at": run.created_at,
            "sweep_id": run.sweep_id, "id": run.id}


#: ``runs.csv``'s and ``flagged.csv``'s columns (each CSV file's columns are a constant like
#: this, the one place that names them: :data:`aiot.host.report.html.CSV_COLUMNS`).
RUN_COLUMNS = (
    Column("device", "device"), Column("host", "host"), Column("model", "model"),
    Column("variant", "format"),
    Column("input_shape", "input shape"), Column("input_values", "input values"),
    Column("threads", "threads", "int"), Column("median_ms", "median ms", "ms"),
    Column("p90_ms", "p90 ms", "ms"), Column("mean_ms", "mean ms", "ms"),
    Column("load_ms", "load ms", "ms"), Column("accuracy", "accuracy", "pct"),
    Column("size_bytes", "size", "bytes"), Column("runtime", "runtime"),
    Column("status", "status"), Column("validity", "validity"), Column("notes", "reasons"),
    Column("placement", "placement"),
    Column("created_at", "measured", "time"), Column("id", "record", "id"),
)


def runs_table(runs: list[Run], key: str = "runs", title: str = "Every latency run") -> Table:
    return Table(key, title, RUN_COLUMNS, tuple(_run_row(r) for r in runs), fold=("host",))


#: ``bnn_pairs.csv``'s columns.
PAIRS_COLUMNS = (
    Column("device", "device"), Column("host", "host"), Column("model", "model"),
    Column("threads", "threads", "int"), Column("algorithm", "algorithm"),
    Column("format", "format"), Column("stat", "statistic"),
    Column("fp_ms", "FP32 ms", "ms"), Column("bin_ms", "binarized ms", "ms"),
    Column("speedup", "speedup", "ratio"), Column("fp_bytes", "FP32 size", "bytes"),
    Column("bin_bytes", "binarized size", "bytes"),
    Column("compression", "compression", "ratio"), Column("validity", "validity"))


def _pairs_table(report: Report) -> Table:
    invalid = report.tally.invalid_ids()
    tally = report.tally
    # A pair's two runs share their configuration, so their host (identity.key holds it).
    hosts = {run.id: run.host for run in (*tally.rows.runs(),
                                          *(run for run, _ in tally.plotted.values()))}
    rows = tuple({**p.to_dict(), "model": p.model, "host": hosts.get(p.bin_id),
                  "validity": INVALID if {p.fp_id, p.bin_id} & invalid else None}
                 for p in report.matching.pairs)
    return Table("bnn_pairs", "Binarized runs and their FP32 baselines", PAIRS_COLUMNS, rows,
                 fold=("host",))


#: ``om_infer.csv``'s columns.
OM_INFER_COLUMNS = (
    Column("algorithm", "algorithm"), Column("format", "format"), Column("pairs", "pairs", "int"),
    Column("speedup", "mean speedup", "ratio"), Column("compression", "mean compression", "ratio"),
    Column("om_infer", "OM_infer", "score"), Column("devices", "devices"))


def _om_table(report: Report) -> Table:
    rows = tuple({**s.to_dict(), "devices": ", ".join(s.devices)} for s in report.om_scores)
    return Table("om_infer", "OM_infer = sqrt((E²(T_fp/T_bin) + E²(S_fp/S_bin)) / 2)",
                 OM_INFER_COLUMNS, rows)


#: ``devices.csv``'s columns: the newest facts each device name reported.
DEVICES_COLUMNS = tuple(Column(k, k) for k in (
    "device", "hardware", "cpu", "soc", "cores", "abi", "os", "kernel", "transport", "emulated"))
#: ``versions.csv``'s columns.
VERSIONS_COLUMNS = (Column("what", "what"), Column("values", "seen"))


def _provenance_tables(report: Report) -> tuple[Table, ...]:
    p = report.provenance
    devices = Table("devices", "Devices", DEVICES_COLUMNS, tuple(p.devices))
    versions = Table("versions", "Versions", VERSIONS_COLUMNS, tuple(p.versions))
    return (devices, versions) if p.devices else (versions,)


#: ``training.csv``'s columns (``host``: the host that trained, where a latency table has
#: the device).
TRAINING_COLUMNS = (
    Column("model", "model"), Column("host", "host"), Column("binarize", "binarized"),
    Column("dataset", "dataset"), Column("epochs", "epochs", "int"),
    Column("accuracy", "test accuracy", "pct"), Column("seconds", "seconds", "score"),
    Column("status", "status"), Column("reason", "reason"),
    Column("created_at", "trained", "time"), Column("id", "record", "id"))


def _training_table(report: Report) -> Table:
    return Table("training", "Training runs", TRAINING_COLUMNS, tuple(report.trainings),
                 fold=("host",))


def _bnn_section(report: Report) -> Section:
    intro = ("Each binarized run (aiot run --binarize ALGO) against the newest FP32 tflite run "
             "of the same device, model and threads: speedup = T_fp32 / T_bin.")
    unpaired = len(report.matching.unpaired)
    if not report.matching.pairs:
        note = "no binarized run with an FP32 tflite baseline in these records"
        if unpaired:
            note += f" ({unpaired} binarized run(s) lack one: aiot score om-infer names them)"
        return Section("bnn", "BNN speedup vs FP32", intro, note=note)
    if unpaired:
        intro += f" {unpaired} binarized run(s) without a baseline are left out."
    return Section("bnn", "BNN speedup vs FP32", intro, ("bnn_speedup",),
                   (_pairs_table(report), _om_table(report)))


#: ``leaderboard.csv``'s columns: one row per device (as the scorer sums its tests).
LEADERBOARD_COLUMNS = (
    Column("device", "device"), Column("tests", "tests", "int"), Column("vips", "VIPS", "score"),
    Column("vops", "VOPS", "si"), Column("not_run", "not run", "int"),
    Column("not_run_why", "not run: why"))
#: ``vips_tests.csv``'s columns.
VIPS_TESTS_COLUMNS = (
    Column("device", "device"), Column("host", "host"), Column("implementation", "implementation"),
    Column("model", "model"), Column("accuracy", "accuracy", "pct"),
    Column("time_s", "time s", "score"), Column("stat", "statistic"),
    Column("flops_m", "MFLOPs", "score"), Column("flops_source", "FLOPs from"),
    Column("vips", "VIPS term", "score"), Column("vops", "VOPS term", "si"),
    Column("source", "record", "id"))


def _leaderboard_tables(board: Leaderboard) -> tuple[Table, ...]:
    devices = Table("leaderboard", "VIPS/VOPS per device", LEADERBOARD_COLUMNS, tuple(board.rows))
    tests = Table("vips_tests", "Tests summed", VIPS_TESTS_COLUMNS, tuple(board.tests),
                  fold=("host",))
    return devices, tests


def _leaderboard_section(report: Report) -> Section:
    intro = ("AIoTBench's scores per device, summed over the tests it ran (one per "
             "implementation and model; INVALID runs left out): VIPS = Σ accuracy / time, "
             "VOPS = Σ accuracy · FLOPs / time. Comparable only over the same tests.")
    board = report.leaderboard
    if not board.rows:
        return Section("leaderboard", "VIPS/VOPS leaderboard", intro, note=board.note)
    intro += "".join(f" {n}." for n in board.notes)
    return Section("leaderboard", "VIPS/VOPS leaderboard", intro, ("leaderboard",),
                   _leaderboard_tables(board))


def _sections(report: Report) -> list[Section]:
    """Every part in page order: the answer first (best per model, device and format; the
    formats compared), then the figures and the analyses, then provenance, failures and every
    run. A part with nothing to show carries only a note (``sections`` leaves it out)."""
    tally = report.tally
    sections = [summary.summary_section(report), summary.formats_section(report)]
    if tally.count:
        sections += [
            Section("latency", "Latency vs threads",
                    "Median latency per device, model and format over thread counts (whiskers "
                    "up to p90; the mean where a native tool printed only that). Runs at "
                    "different input shapes are different lines.", ("latency_threads",)),
            Section("accuracy", "Accuracy vs latency",
                    "Top-1 accuracy measured on the device against median latency.",
                    ("accuracy_latency",))
            if any(r.accuracy is not None for r in report.plotted_runs()) else None,
            measures.load_section(tally),
            _bnn_section(report), _leaderboard_section(report),
            summary.operators_section(report), measures.telemetry_section(tally),
        ]
    sections += (robust.sections(report.others) + predicted.sections(report)
                 + robust.kind_sections(predicted.without(report.others)))
    if report.trainings:
        sections.append(Section("training", "Training", "Models trained on the host.",
                                tables=(_training_table(report),)))
    sections += report.extra
    sections.append(Section("provenance", "Provenance", "Devices and versions the records name.",
                            tables=_provenance_tables(report)))
    if tally.flagged.seen:
        sections.append(Section(
            "flags", "INVALID and failed runs",
            "Measured but not defensible (INVALID, with the validity check's reasons), or not "
            "measured at all. They stay in every table, flagged; plots mark INVALID points.",
            tables=(_listed(tally.flagged, "flagged", "Flagged runs"),)))
    if tally.count:
        sections.append(Section("runs", "Every latency run", "Each stored latency record.",
                                tables=(_listed(tally.rows, "runs", "Every latency run"),)))
    else:
        sections.append(Section("latency", "Latency", "", note="no latency runs in these records"))
    return [s for s in sections if s is not None]


def _listed(runs, key: str, title: str) -> Table:
    """A run table (``runs``: a :class:`~aiot.host.report.tally.Newest`): every run, or at
    scale the newest ``limit``, newest first, saying so (the rest are one command away)."""
    if runs.limit is None or runs.seen <= runs.limit:
        return runs_table(runs.runs(), key, title)
    return runs_table(runs.runs(), key, f"{title}: the newest {runs.limit} of {runs.seen} "
                                        "(all: aiot results list, aiot results export)")
