"""``aiot predict collect``: measure the kernels and models a predictor learns from, as an
ordinary sweep.

The kernels (:mod:`aiot.host.predict.grid`) are measured as ``torch.export`` programs
(:func:`aiot.host.predict.graphs.kernel_program`) and the models as zoo models, every run with its
per-operator profile where the runtime has one, each run an ordinary record of one sweep: the
same command resumes it (only missing or failed runs are measured again). The sweep is checked
as ``aiot sweep`` checks one, estimated before it starts, and run in slices that fit a time
budget: when the budget is spent no further slice starts, and the next call goes on.

A run judged INVALID for the machine's moment (busy, its CPU's speed changed, too noisy:
:func:`aiot.host.engine.validity.of_the_moment`) teaches a predictor nothing; once every run
has been measured, such runs are measured again, up to ``retries`` times each, within the same
budget. A run INVALID for what it is (an emulated device's, an implausible timing) is not: it
would be so again.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from aiot.core import notices
from aiot.host.engine.campaign import SweepPlan, plan_sweep, record_key, run_campaign, run_key
from aiot.host.engine.estimate import Estimate, duration, estimate
from aiot.host.engine.preflight import check_sweep, resolve_targets
from aiot.host.engine.runs import MeasureParams
from aiot.host.engine.spec import SweepSpec
from aiot.host.engine.validity import VALID, of_the_moment
from aiot.host.engine.workspace import artifacts_dir
from aiot.host.predict import graphs, grid
from aiot.host.store import open_store

#: Runs per slice of a collection without a budget (a slice's agent session is started once).
SLICE = 12
#: Retries of a run INVALID for the machine's moment, by default.
RETRIES = 1


@dataclass
class Collection:
    """What one ``collect`` call did.

    Attributes:
        sweep_id: the collection's sweep (``aiot results list --sweep``).
        planned, done_before: runs of the whole collection, and those an earlier call measured.
        records: the records this call wrote, first measurements; retried: its records of
            runs measured again after an INVALID verdict of the machine's moment.
        budget_spent: the budget ran out before every run was measured.
        seconds: this call's wall time; guess: the estimate said before it started.
    """

    sweep_id: str
    planned: int
    done_before: int
    records: list = field(default_factory=list)
    retried: list = field(default_factory=list)
    budget_spent: bool = False
    seconds: float = 0.0
    guess: Estimate | None = None

    def counts(self, retried: bool = False) -> Counter:
        """``ok VALID``, ``ok INVALID``, ``failed``, ``skipped``: this call's runs by outcome
        (``retried``: its retries')."""
        return Counter(f"{r.status} {r.validity}" if r.status == "ok" else r.status
                       for r in (self.retried if retried else self.records))

    @property
    def left(self) -> int:
        return self.planned - self.done_before - sum(r.status == "ok" for r in self.records)


def collection_spec(device: str, fmt: str, threads: int, kernels: int, models: list[str] | None,
                    seed: int = 0, params: MeasureParams | None = None, validity: str | None = None,
                    cooldown_max_s: float | None = 120.0) -> SweepSpec:
    """The sweep of a collection: ``kernels`` kernels drawn with ``seed`` and ``models`` (None:
    :func:`aiot.host.predict.grid.default_models`), in ``fmt`` on ``device`` at ``threads``,
    profiled (``params.profile`` is forced on)."""
    names = [str(graphs.kernel_program(name)) for name in grid.sample_kernels(kernels, seed)]
    chosen = grid.default_models() if models is None else models
    targets = resolve_targets(names + list(chosen), [fmt], None)
    timing = replace(params or MeasureParams(), profile=True)
    return SweepSpec(devices=(device,), targets=tuple((ref, tuple(f)) for ref, f in targets),
                     threads=(threads,), params=timing, seed=seed, shuffle=True,
                     cooldown_max_s=cooldown_max_s, validity=validity)


def collect(spec: SweepSpec, results_dir: Path, listener=None, budget_s: float | None = None,
            say=notices.say, retries: int = RETRIES) -> Collection:
    """Measure what ``spec`` asks for that the store does not hold yet, within ``budget_s``
    seconds of wall time (None: all of it), then the runs INVALID for the machine's moment
    again, up to ``retries`` times each; ``say`` hears the plan and the estimate."""
    started = time.monotonic()
    requests, session, probes = check_sweep(spec, results_dir)
    with open_store(results_dir) as store:
        plan = plan_sweep(requests, store, seed=spec.seed, shuffle=spec.shuffle, fresh=spec.fresh)
        recent = store.query(status="ok", limit=500)
    guess = estimate(plan.todo, artifacts_dir(results_dir), recent)
    found = Collection(plan.sweep_id, len(plan.requests), len(plan.done), guess=guess)
    say(f"collection {plan.sweep_id}: {len(plan.requests)} run(s), {len(plan.done)} done before"
        + (f"; {guess.line()}" if plan.todo else ""))
    if budget_s is not None and plan.todo and guess.seconds > budget_s:
        say(f"the budget ({duration(budget_s)}) covers part of it: the same command goes on")
    policy = spec.campaign_policy(session, probes)
    clock = _Clock(started, budget_s, guess.seconds / max(len(plan.todo), 1))
    try:
        found.records += _measure(plan, plan.todo, clock, results_dir, listener, policy)
        for _ in range(retries):
            again = [] if clock.spent() else _to_retry(plan, results_dir, retries)
            if not again:
                break
            say(f"measuring again {len(again)} run(s) judged INVALID for the machine's moment "
                "(busy, its speed changed, too noisy)")
            found.retried += _measure(plan, again, clock, results_dir, listener, policy)
    finally:
        if session is not None:
            session.close()
    found.budget_spent = clock.spent() and found.left > 0
    found.seconds = time.monotonic() - started
    return found


@dataclass
class _Clock:
    """A collection's budget: when it started, its seconds, and what a run takes here."""

    started: float
    budget_s: float | None
    per_run: float
    runs: int = 0

    def spent(self) -> bool:
        return self.budget_s is not None and time.monotonic() - self.started >= self.budget_s

    def room(self) -> int:
        """Runs the next slice may hold."""
        if self.budget_s is None:
            return SLICE
        left = self.budget_s - (time.monotonic() - self.started)
        return max(1, min(SLICE, int(left // max(self.per_run, 1.0))))

    def ran(self, runs: int) -> None:
        self.runs += runs
        self.per_run = (time.monotonic() - self.started) / self.runs  # what runs really take here


def _measure(plan: SweepPlan, todo: list, clock: _Clock, results_dir: Path, listener, policy) -> list:
    """The records of ``todo``'s runs, slice by slice, until they are done or the budget is."""
    records, done = [], 0
    while done < len(todo) and not clock.spent():
        chunk = todo[done:done + clock.room()]
        records += run_campaign(_slice(plan, chunk), results_dir, listener, policy)
        done += len(chunk)
        clock.ran(len(chunk))
    return records


def _to_retry(plan: SweepPlan, results_dir: Path, retries: int) -> list:
    """The runs of ``plan`` with no VALID record whose every verdict was INVALID for the
    machine's moment alone, measured fewer than ``1 + retries`` times."""
    with open_store(results_dir) as store:
        records = store.query(sweep_id=plan.sweep_id, status="ok")
    valid, moment, other = set(), Counter(), set()
    for record in records:
        key = record_key(record)
        if record.validity == VALID:
            valid.add(key)
        elif transient(record):
            moment[key] += 1
        else:
            other.add(key)
    return [r for r in plan.requests if (key := run_key(r)) in moment
            and key not in valid | other and moment[key] <= retries]


def transient(record) -> bool:
    """Whether a record is INVALID for the machine's moment alone (measured again)."""
    return of_the_moment(((record.result or {}).get("validity") or {}).get("reasons") or [])


def _slice(plan: SweepPlan, chunk: list) -> SweepPlan:
    """``plan`` with every run but ``chunk``'s counted as done: the campaign measures the
    slice, and its records keep their place (index, of) in the whole collection."""
    wanted = {run_key(r) for r in chunk}
    done = {run_key(r) for r in plan.requests} - wanted
    return SweepPlan(plan.sweep_id, plan.key, plan.seed, plan.requests, done,
                     skips=plan.skips, reasons=plan.reasons)
