"""aiot from Python: a result store's runs as a pandas DataFrame, and convert, run and sweep with
the objects the CLI uses.

Three lines give a sweep's runs::

    import aiot
    store = aiot.open_store()          # the store `aiot results list` reads
    df = store.runs(sweep="SWEEP_ID")  # its runs, with the CSV export's columns

:func:`convert` is :func:`aiot.converters.api.convert_model`, as ``aiot convert`` calls it;
:func:`run` and :func:`sweep` build the :class:`~aiot.host.engine.spec.SweepSpec` that
``aiot run`` and ``aiot sweep`` build, check it with the engine's preflight and measure it with
its campaign (:func:`~aiot.host.engine.campaign.run_campaign`), so a record made here is the one
the CLI would make. Errors are the CLI's :class:`~aiot.core.errors.AiotError`, with the same
message and hint. The DataFrame needs the ``api`` extra (pandas); nothing here prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from aiot.converters import api as converters_api
from aiot.core.errors import UsageError
from aiot.core.paths import results_dir as default_results_dir
from aiot.host.cli.record_table import dataframe
from aiot.host.devices.resolve import resolve_name
from aiot.host.engine.campaign import plan_sweep, run_campaign
from aiot.host.engine.preflight import check_sweep, resolve_targets
from aiot.host.engine.runs import MeasureParams, NullListener
from aiot.host.engine.spec import SweepSpec
from aiot.host.engine.weights import choose_weights
from aiot.host.store import RunRecord
from aiot.host.store import open_store as _open
from aiot.host.store.queries import Filters
from aiot.models.model_ref import default_format, resolve_model, split_models

__all__ = ["Store", "Sweep", "convert", "open_store", "run", "sweep"]


def open_store(results_dir: str | Path | None = None) -> Store:
    """The result store in ``results_dir``, else the CLI's (``--results-dir`` >
    ``$AIOT_RESULTS_DIR`` > ``./results`` in a checkout > ``~/.local/share/aiot/results``)."""
    return Store(default_results_dir(results_dir))


class Store:
    """A result store, read as the CLI reads it. Each call opens the store read-only and
    closes it again, so a notebook that keeps a :class:`Store` sees a sweep's new runs and
    never holds the store's lock.

    Args:
        results_dir: the folder that holds ``aiot.sqlite`` (see :func:`open_store`).
    """

    def __init__(self, results_dir: str | Path) -> None:
        self.results_dir = Path(results_dir)

    def __repr__(self) -> str:
        return f"Store({str(self.results_dir)!r})"

    def records(self, sweep: str | None = None, *, kind: str | None = None,
                status: str | None = None, device: str | None = None, model: str | None = None,
                format: str | None = None, host: str | None = None) -> list[RunRecord]:
        """The records every given filter matches, oldest first (``results list``'s filters;
        ``sweep``: a sweep id or a prefix of one that names one sweep)."""
        with _open(self.results_dir, readonly=True) as store:
            sweep_id = _sweep_id(store, sweep) if sweep else None
            filters = Filters(kind=kind, status=status, sweep_id=sweep_id, device=device,
                              model=model, format=format, host=host)
            return list(store.records(filters))

    def runs(self, sweep: str | None = None, **filters) -> object:
        """:meth:`records` as a pandas DataFrame: one row per record, the columns of
        ``aiot results export --format csv`` in its order, each of one type (numbers as
        numbers; ``stats_ms`` and ``provenance`` as JSON text)."""
        return dataframe(self.records(sweep, **filters))

    def record(self, record_id: str) -> RunRecord:
        """The record whose id is or starts with ``record_id`` (at least 4 characters)."""
        with _open(self.results_dir, readonly=True) as store:
            return store.get(record_id)

    def sweeps(self, limit: int = 20) -> list[dict]:
        """The newest sweeps, newest first: each one's id, times, counts by status and devices."""
        with _open(self.results_dir, readonly=True) as store:
            return store.recent_sweeps(limit=limit)


def _sweep_id(store, given: str) -> str:
    """The sweep id ``given`` names: itself, or the one sweep it is a prefix of."""
    found = store.sweep_ids(given, limit=2)
    if found and found[0] == given:
        return given
    if len(found) == 1:
        return found[0]
    if found:
        raise UsageError(f"sweep '{given}' is ambiguous: {', '.join(found)}, …",
                         "give more characters")
    raise UsageError(f"no sweep '{given}' in {store.path}", "see: aiot results list")


def convert(model: str, format: str | None = None, *, results_dir: str | Path | None = None,
            out_dir: str | Path | None = None, weights: str | Path | None = None,
            binarize: str | None = None, options: dict[str, str] | None = None):
    """Convert ``model`` into ``format`` as ``aiot convert`` does: the artifact and its sidecar
    in ``out_dir`` (default ``<results>/artifacts``), its parity checked against PyTorch.

    Returns:
        The :class:`~aiot.converters.api.ConversionResult` (``artifact``, ``sha256``,
        ``parity``, ``size_bytes``, ``cached``).
    """
    ref = resolve_model(model, binarize, quantized_ok=True)
    fmt = format or default_format(ref)
    folder = Path(out_dir) if out_dir else default_results_dir(results_dir) / "artifacts"
    given = Path(weights) if weights else None
    chosen = given if ref.is_artifact else choose_weights(ref, given).path  # as aiot convert
    return converters_api.convert_model(ref, fmt, folder, weights=chosen, options=options or {},
                                        binarize=binarize)


@dataclass(frozen=True)
class Sweep:
    """What :func:`sweep` measured: its id (as ``aiot results list --sweep`` takes it) and every
    record of it, the runs resumed from earlier included, oldest first."""

    id: str
    records: list[RunRecord]

    def runs(self) -> object:
        """The records as :meth:`Store.runs` gives them (a pandas DataFrame)."""
        return dataframe(self.records)


def sweep(model: str | Sequence[str], format: str | Sequence[str] | None = None, *,
          device: str | Sequence[str] | None = None, threads: int | Iterable[int] = (1,),
          results_dir: str | Path | None = None, fresh: bool = False, shuffle: bool = True,
          listener=None, **timing) -> Sweep:
    """Measure every combination of ``model`` × ``format`` × ``device`` × ``threads`` as
    ``aiot sweep`` does: checked first (one :class:`~aiot.core.errors.AiotError` for what is
    wrong), then measured, each run stored; called again, it resumes (``fresh``: measures
    everything again).

    Args:
        device: a name or names (default: ``$AIOT_DEVICE``, else the device of
            ``$ANDROID_SERIAL``, else ``local``, as the CLI chooses).
        shuffle: run in a seeded random order (``--no-shuffle``: False).
        timing: :class:`~aiot.host.engine.runs.MeasureParams`' fields (``min_runs``,
            ``min_s``, ``warmup_runs``, ``warmup_min_s``, ``max_s``, ``target_cv``, …) and
            ``cooldown_max_s``, as the options of ``aiot sweep`` of the same names.
        listener: an :class:`~aiot.host.engine.runs.RunListener` told of each run (default:
            none).
    """
    cooldown = {k: timing.pop(k) for k in ("cooldown_max_s",) if k in timing}  # a SweepSpec's
    models, formats = _models(model), _names(format)
    devices = list(dict.fromkeys(_names(device))) or [resolve_name(None)]
    targets = tuple((ref, tuple(fmts)) for ref, fmts in
                    resolve_targets(models, formats or None, None, None))
    counts = (threads,) if isinstance(threads, int) else tuple(threads)
    spec = SweepSpec(devices=tuple(devices), targets=targets, threads=counts,
                     params=MeasureParams(**timing), fresh=fresh, shuffle=shuffle, **cooldown)
    folder = default_results_dir(results_dir)
    requests, session, probes = check_sweep(spec, folder)
    try:
        with _open(folder) as store:
            plan = plan_sweep(requests, store, seed=spec.seed, shuffle=spec.shuffle,
                              fresh=spec.fresh)
        if plan.todo:
            run_campaign(plan, folder, listener or NullListener(),
                         spec.campaign_policy(session, probes))
    finally:
        if session is not None:
            session.close()
    return Sweep(plan.sweep_id, Store(folder).records(plan.sweep_id))


def run(model: str, format: str | None = None, *, device: str | None = None, threads: int = 1,
        results_dir: str | Path | None = None, **timing) -> RunRecord:
    """Measure one model in one format on one device at one thread count, as ``aiot run``
    does (always measured anew, nothing to shuffle), and return its stored record."""
    done = sweep(model, format, device=resolve_name(device), threads=threads,
                 results_dir=results_dir, fresh=True, shuffle=False, **timing)
    return done.records[-1]


def _names(value) -> list[str]:
    """``"a,b"``, ``["a", "b"]`` or None as a list of names."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return list(value)


def _models(value) -> list[str]:
    """Models as ``--model`` takes them: a comma-separated text (a file name may hold commas,
    :func:`~aiot.models.model_ref.split_models`) or a list."""
    return split_models(value) if isinstance(value, str) else list(value)
