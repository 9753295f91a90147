"""``aiot predict collect``: measure the kernels and models a predictor learns from, as an
ordinary sweep.

The kernels (:mod:`aiot.host.predict.grid`) are measured as ``torch.export`` programs
(:func:`aiot.host.predict.graphs.kernel_program`) and the models as zoo models, every run with its
per-operator profile where the runtime has one, each run an ordinary record of one sweep: the
same command resumes it (only missing or failed runs are measured again). The sweep is checked
as ``aiot sweep`` checks one, estimated before it starts, and run in slices that fit a time
budget: when the budget is spent no further slice starts, and the next call goes on.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from aiot.core import notices
from aiot.host.engine.campaign import SweepPlan, plan_sweep, run_campaign, run_key
from aiot.host.engine.estimate import Estimate, duration, estimate
from aiot.host.engine.preflight import check_sweep, resolve_targets
from aiot.host.engine.runs import MeasureParams
from aiot.host.engine.spec import SweepSpec
from aiot.host.engine.workspace import artifacts_dir
from aiot.host.predict import graphs, grid
from aiot.host.store import open_store

#: Runs per slice of a collection without a budget (a slice's agent session is started once).
SLICE = 12


@dataclass
class Collection:
    """What one ``collect`` call did.

    Attributes:
        sweep_id: the collection's sweep (``aiot results list --sweep``).
        planned, done_before: runs of the whole collection, and those an earlier call measured.
        records: the records this call wrote.
        budget_spent: the budget ran out before every run was measured.
        seconds: this call's wall time; guess: the estimate said before it started.
    """

    sweep_id: str
    planned: int
    done_before: int
    records: list = field(default_factory=list)
    budget_spent: bool = False
    seconds: float = 0.0
    guess: Estimate | None = None

    def counts(self) -> Counter:
        """``ok VALID``, ``ok INVALID``, ``failed``, ``skipped``: this call's runs by outcome."""
        return Counter(f"{r.status} {r.validity}" if r.status == "ok" else r.status for r in self.records)

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
            say=notices.say) -> Collection:
    """Measure what ``spec`` asks for that the store does not hold yet, within ``budget_s``
    seconds of wall time (None: all of it); ``say`` hears the plan and the estimate."""
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
    todo = plan.todo
    per_run = guess.seconds / max(len(todo), 1)
    done = 0
    policy = spec.campaign_policy(session, probes)
    try:
        while done < len(todo):
            elapsed = time.monotonic() - started
            if budget_s is not None and elapsed >= budget_s:
                found.budget_spent = True
                break
            room = SLICE if budget_s is None else int((budget_s - elapsed) // max(per_run, 1.0))
            chunk = todo[done:done + max(1, min(SLICE, room))]
            found.records += run_campaign(_slice(plan, chunk), results_dir, listener, policy)
            done += len(chunk)
            per_run = (time.monotonic() - started) / done  # what runs really take here
    finally:
        if session is not None:
            session.close()
    found.seconds = time.monotonic() - started
    return found


def _slice(plan: SweepPlan, chunk: list) -> SweepPlan:
    """``plan`` with every run but ``chunk``'s counted as done: the campaign measures the
    slice, and its records keep their place (index, of) in the whole collection."""
    wanted = {run_key(r) for r in chunk}
    done = {run_key(r) for r in plan.requests} - wanted
    return SweepPlan(plan.sweep_id, plan.key, plan.seed, plan.requests, done,
                     skips=plan.skips, reasons=plan.reasons)
