"""The campaign engine: a sweep over a rack of devices, in parallel, resumable, never losing a run.

* **Plan.** A sweep's runs are shuffled with a recorded seed (so run order cannot masquerade
  as a device or model effect) and get a sweep id derived from what the sweep measures:
  running the same ``aiot sweep`` command again finds it and redoes only runs that have no
  ``ok`` record yet (``fresh=True`` starts a new attempt, ``<key>.<time>``, keeping the old).
* **Execute.** One worker per device, runs on one device strictly serial (two runs on one
  phone would time each other), devices in parallel. Every run gets a ``pending`` record
  before it starts (see :func:`aiot.host.engine.executor.execute_run`).
* **Retry.** A run that fails because the device or the link to it failed (a transient
  failure) is retried with exponential backoff on a fresh connection; after
  ``retries`` attempts the device is declared lost, its remaining runs are recorded as
  ``skipped: device lost …`` and the other devices carry on. Resuming redoes them.
* **Cancel.** Ctrl-C (or SIGTERM, or SIGHUP) stops starting new runs, closes the devices' agent sessions
  (which ends the runs in flight) and marks what was still pending as failed: the store stays
  consistent. Pending records of a campaign that was killed outright (SIGKILL, a crash) are
  marked failed by the next campaign, once their process is certainly gone. A store that
  fails under a device's worker (full, locked past the wait, damaged) stops every worker from
  starting another run; the runs in flight finish and are written if the store lets them.
* **Exclusive.** A campaign locks its devices and its sweep id across processes
  (:mod:`aiot.host.store.locks`): a second campaign on a busy device is refused at once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import socket
import threading
import time
import uuid
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from pathlib import Path

from aiot.core import children
from aiot.core.errors import StoreError
from aiot.host.devices.reservations import current_user
from aiot.host.engine.executor import execute_run, measure_run, skip_run
from aiot.host.engine.runs import NullListener, RunListener, RunRequest
from aiot.host.engine.workspace import Workspace
from aiot.host.store.identity import request_key, this_host
from aiot.host.store.locks import campaign_locks
from aiot.host.store.store import RunRecord, Store, open_store, utc_now
from aiot.host.transports.probe import DeviceFacts

log = logging.getLogger(__name__)

_sleep = time.sleep  # the backoff's wait (tests replace it)

#: At most this long a cancelled campaign waits for a store another process holds locked
#: before keeping its failed records beside it (a service manager's SIGKILL comes soon).
_CLEANUP_WAIT_S = 10.0

#: At most this long a cancelled campaign waits for its device workers to close their runs
#: (their conversion children are killed at once) before marking what is left failed.
_STOP_WAIT_S = 3.0

#: Thread counts up to this run everywhere (BiBench's 1, 2, 4, 8); above it only on devices
#: with at least that many cores (BiBench's 16 threads on Apple M1).
ALWAYS_RUN_THREADS = 8


@dataclass(frozen=True)
class CampaignPolicy:
    """How a campaign treats devices.

    Args:
        retries: attempts of one run on transient (device/link) failures before the
            device is declared lost.
        backoff_s: first wait between attempts; doubles each time, capped at ``backoff_max_s``.
        parallel: one worker per device (False: devices one after another, for debugging).
        cooldown: a :class:`aiot.host.engine.cooldown.CooldownPolicy` to gate every run on the
            device's temperature and frequencies, or None for no gating.
        persistent_agent: one agent session per device for the campaign, each run in a child
            forked from it (None: the default, on unless ``AIOT_AGENT_SESSION=0``); False
            starts an agent process per command.
        lab: a :class:`aiot.host.lab.session.LabSession`: each device's runs are measured on
            the lab node that owns it (records are still written here), or None.
        probes: each device's probe as preflight read it
            (:class:`~aiot.host.engine.preflight.Checked`): its workspace starts from it
            rather than probing the device again.
        validity: the :class:`aiot.host.engine.validity.ValidityPolicy` every run is judged
            by (``--validity`` over ``AIOT_VALIDITY``), or None for ``AIOT_VALIDITY``'s.
    """

    retries: int = 3
    backoff_s: float = 2.0
    backoff_max_s: float = 30.0
    parallel: bool = True
    cooldown: object | None = None
    persistent_agent: bool | None = None
    lab: object | None = None
    probes: dict | None = None
    validity: object | None = None  # a ValidityPolicy (None: AIOT_VALIDITY's, read per run)

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        return min(self.backoff_s * 2 ** (attempt - 1), self.backoff_max_s)


def run_key(request: RunRequest) -> str:
    """A stable id of one run's whole request (:func:`aiot.host.store.identity.request_key`),
    computed once per request (:attr:`RunRequest.key`)."""
    return request.key


def record_key(record: RunRecord) -> str:
    """:func:`run_key` of the run a stored record measured (its spec is the request's)."""
    return request_key(record.spec)


def _digest(payload) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class SweepPlan:
    """The runs of one sweep, in the order they will run.

    Args:
        sweep_id: the store's sweep id (``key`` or ``key.<time>`` after a fresh start).
        key: the sweep's identity: a hash of its runs and seed.
        seed: the shuffle seed (recorded in every run's provenance).
        requests: the runs, shuffled.
        done: run keys that already have an ok record in this sweep (not run again).
        skips: run keys known not to be runnable, with the reason (recorded as skipped,
            once: a resumed sweep records no skip its newest record already says).
        reasons: run keys not done yet, with the reason of their newest record in this sweep.
    """

    sweep_id: str
    key: str
    seed: int
    requests: list[RunRequest]
    done: set[str] = field(default_factory=set)
    skips: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def todo(self) -> list[RunRequest]:
        """The runs still to do."""
        return [r for r in self.requests if run_key(r) not in self.done]

    def devices(self) -> list[str]:
        """Devices in first-appearance order."""
        return list(dict.fromkeys(r.device for r in self.requests))


def plan_sweep(requests: list[RunRequest], store: Store, seed: int = 0, shuffle: bool = True,
               fresh: bool = False) -> SweepPlan:
    """Shuffle ``requests`` with ``seed`` and find the sweep's earlier attempt to resume.

    Pending records left by killed processes are marked failed first, so that they read as
    the failures they are (and are redone)."""
    store.reap_stale()
    keys = sorted(run_key(r) for r in requests)
    key = sweep_key(keys, seed, shuffle)
    ordered = list(requests)
    if shuffle:  # from a canonical order, so the same runs and seed give the same order
        ordered.sort(key=run_key)
        random.Random(seed).shuffle(ordered)
    sweep_id, history = resume_sweep(store, key, fresh)
    if not history:
        return SweepPlan(sweep_id, key, seed, ordered)
    done = {record_key(r) for r in history if r.status == "ok"}
    newest = {record_key(r): r.reason for r in history}  # oldest first: newest wins
    reasons = {k: why for k, why in newest.items() if k not in done and why is not None}
    return SweepPlan(sweep_id, key, seed, ordered, done & set(keys), reasons=reasons)


def sweep_key(keys: list[str], seed: int = 0, shuffle: bool = True) -> str:
    """A sweep's identity: a hash of its runs' keys (sorted), its shuffle and this host
    (:func:`aiot.host.store.identity.this_host`); the same work asked for again on the same
    host gets the same key, so it resumes (a paper procedure's grid too), and the same command
    on another host is another sweep, whose records (imported here) never complete this one."""
    return _digest({"runs": sorted(keys), "seed": seed, "shuffle": shuffle,
                    "host": this_host()})[:12]


def resume_sweep(store: Store, key: str, fresh: bool = False) -> tuple[str, list[RunRecord]]:
    """``(sweep_id, records)``: the newest attempt of sweep ``key`` with this host's own
    records of it (oldest first) to resume, or a new attempt's id and no records (``fresh``,
    or none yet). Records another host wrote, and any record that came in by ``results
    import`` (whatever host it names), are never resumed from: what they hold was not
    measured here."""
    previous = None if fresh else store.latest_sweep(key)
    if previous is None:
        return (key if store.latest_sweep(key) is None else _fresh_id(key)), []
    return previous, store.query(sweep_id=previous, host=this_host(), own=True)


def _fresh_id(key: str) -> str:
    """A ``--fresh`` attempt's id, ``<token>.<key>``: it starts with a token of its own, so no
    prefix of it names the earlier attempt (``key.<time>`` did: ``key`` was a prefix of
    both), and it ends with ``key``, so the same command resumes it."""
    import secrets

    return f"{secrets.token_hex(4)}.{key}"


@dataclass
class _Shared:
    """What the device workers share with the main thread."""

    plan: SweepPlan
    results_dir: Path
    listener: RunListener
    policy: CampaignPolicy
    cancel: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)  # start no further run
    cancel_reason: str = "interrupted by user"
    workspaces: dict[str, Workspace] = field(default_factory=dict)
    stores: list[Store] = field(default_factory=list)  # the workers' (a cancel shortens their waits)
    lost: dict[str, str] = field(default_factory=dict)
    conversions: dict = field(default_factory=dict)  # the workspaces' (each artifact once)
    lock: threading.Lock = field(default_factory=threading.Lock)


def run_campaign(plan: SweepPlan, results_dir: Path, listener: RunListener | None = None,
                 policy: CampaignPolicy | None = None) -> list[RunRecord]:
    """Execute ``plan``: devices in parallel, runs on a device serial; returns its records.

    Returns the final record of every run this call touched, in plan order (ok, failed or
    skipped); runs already done before are not repeated and not returned.

    Raises:
        Busy: another aiot process is measuring one of the devices, or this very sweep.
    """
    by_device: dict[str, list[tuple[int, RunRequest]]] = {}
    for index, request in enumerate(plan.requests):
        by_device.setdefault(request.device, []).append((index, request))
    info = {"user": current_user(), "host": socket.gethostname(), "runs": len(plan.requests),
            "started": utc_now()}
    children.allow()  # a campaign after a cancelled one (in one process) converts again
    with campaign_locks(plan.sweep_id, by_device, info):  # Busy: another process measures there
        with open_store(results_dir) as store:
            store.reap_stale()
        return _run_locked(plan, results_dir, by_device, listener, policy)


def run_sweep(requests: list[RunRequest], workspace: Workspace,
              listener: RunListener | None = None, sweep_id: str | None = None) -> list[RunRecord]:
    """Execute ``requests`` in the given order as one new sweep; returns the finished records.

    A thin entry to :func:`run_campaign` (devices in parallel, retries,
    pending records failed on Ctrl-C) without shuffling or resuming, for callers that
    want exactly these runs now; each device worker opens its own connection to the
    workspace's store.
    """
    sweep_id = sweep_id or uuid.uuid4().hex[:12]
    try:
        return run_campaign(SweepPlan(sweep_id, sweep_id, 0, list(requests)), workspace.results_dir,
                            listener)
    finally:
        workspace.close()


def _run_locked(plan: SweepPlan, results_dir: Path,
                by_device: dict[str, list[tuple[int, RunRequest]]],
                listener: RunListener | None, policy: CampaignPolicy | None) -> list[RunRecord]:
    """:func:`run_campaign` once its devices and sweep are locked."""
    shared = _Shared(plan, results_dir, listener or NullListener(), policy or CampaignPolicy())
    results: dict[int, RunRecord] = {}
    futures = _start_workers(shared, by_device, results)
    try:
        _wait_all(futures)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM or SIGHUP (see aiot.host.cli.app.Terminated)
        _cancel(shared, getattr(exc, "reason", "interrupted by user"))
        wait(futures, timeout=_STOP_WAIT_S)
        with open_store(results_dir) as store:
            store.wait_s = min(store.wait_s, _CLEANUP_WAIT_S)
            store.fail_pending(shared.cancel_reason, sweep_id=plan.sweep_id)
        raise
    for future in futures:
        future.result()  # a bug in a worker surfaces here
    return [results[i] for i in sorted(results)]


def _start_workers(shared: _Shared, by_device: dict[str, list[tuple[int, RunRequest]]],
                   results: dict[int, RunRecord]) -> list[Future]:
    """One thread per device (one for all with ``parallel=False``), each future holding its
    device's outcome; named :data:`aiot.core.children.WORKER_THREAD`.

    A cancel kills the conversions' child processes and marks the pending records; a worker
    still inside a conversion's own Python work (tracing, lowering a ResNet) is not waited for
    past :data:`_STOP_WAIT_S`: the command line ends the process without it
    (:func:`aiot.host.cli.app.main`), where Python's exit would wait for it to finish.
    """
    jobs = list(by_device.items())
    futures = [Future() for _ in jobs]

    def work(indices: list[int]) -> None:
        for i in indices:
            if not futures[i].set_running_or_notify_cancel():
                continue
            try:
                futures[i].set_result(_device_worker(shared, *jobs[i], results))
            except BaseException as exc:  # noqa: BLE001 - the main thread raises it
                futures[i].set_exception(exc)

    groups = [[i] for i in range(len(jobs))] if shared.policy.parallel else [list(range(len(jobs)))]
    for group in groups:
        threading.Thread(target=work, args=(group,), name=children.WORKER_THREAD).start()
    return futures


def _wait_all(futures) -> None:
    """Wait in short slices so Ctrl-C reaches the main thread promptly."""
    pending = set(futures)
    while pending:
        _done, pending = wait(pending, timeout=0.2)


def _cancel(shared: _Shared, reason: str) -> None:
    shared.cancel_reason = reason
    shared.cancel.set()
    # A worker converting waits on a toolchain child (minutes for LCE): end it now, so the
    # worker closes its record and the process exits within seconds.
    children.stop_all()
    with shared.lock:
        workspaces, stores = list(shared.workspaces.values()), list(shared.stores)
    for store in stores:  # a write waiting for a locked store gives up soon: the user said stop
        store.wait_s = min(store.wait_s, _CLEANUP_WAIT_S)
    for workspace in workspaces:  # ends the agents of runs in flight, and opens no new one
        try:
            getattr(workspace, "cancel", workspace.close)()
        except Exception:
            log.debug("closing a workspace while cancelling failed", exc_info=True)


def _device_worker(shared: _Shared, device: str, runs: list[tuple[int, RunRequest]],
                   results: dict[int, RunRecord]) -> None:
    lab = shared.policy.lab
    workspace = (lab.workspace(device, shared.results_dir) if lab is not None
                 else Workspace(shared.results_dir, persistent_agent=shared.policy.persistent_agent,
                                conversions=shared.conversions, probes=shared.policy.probes))
    with shared.lock:
        shared.workspaces[device] = workspace
    try:
        with open_store(shared.results_dir) as store:
            with shared.lock:
                shared.stores.append(store)
            for index, request in runs:
                if shared.cancel.is_set() or shared.stop.is_set():
                    return
                if run_key(request) in shared.plan.done:
                    continue
                record = _one_run(shared, store, workspace, index, request)
                if record is not None:
                    results[index] = record
    except StoreError:  # the store takes no record: the other devices start no more runs
        shared.stop.set()
        raise
    finally:
        workspace.close()


def _one_run(shared: _Shared, store: Store, workspace: Workspace, index: int,
             request: RunRequest) -> RunRecord | None:
    """Run ``request`` with retries; records a skip instead when it cannot run (None when the
    same skip is already this sweep's newest record of it: a rerun adds no copy of a skip
    that says nothing new, whether the plan knew it or the device's cores or loss told it)."""
    plan, policy, listener = shared.plan, shared.policy, shared.listener
    context = {"sweep": {"id": plan.sweep_id, "seed": plan.seed, "index": index,
                         "of": len(plan.requests)}}
    skip = _skip_reason(shared, workspace, request)
    if skip and skip == plan.reasons.get(run_key(request)):
        return None
    if skip:
        record = skip_run(request, store, plan.sweep_id, skip, context)
        listener.on_run_end(record)
        return record
    listener.on_run_start(request, index, len(plan.requests))
    for attempt in range(1, policy.retries + 1):
        context["sweep"]["attempt"] = attempt
        record = execute_run(request, store, workspace, listener, plan.sweep_id, context=context,
                             cooldown=policy.cooldown, measure=getattr(workspace, "measure", measure_run),
                             validity=policy.validity)
        error = (record.result or {}).get("error") or {}
        if shared.cancel.is_set():
            if record.status == "failed":  # its agent was ended by the cancel, not by a fault
                store.finish(record.id, "failed", reason=shared.cancel_reason)
                record = store.get(record.id)
            break
        if record.status == "ok" or not error.get("transient"):
            break
        if attempt == policy.retries:
            shared.lost[request.device] = record.reason or "unreachable"
            log.warning("%s: lost after %d attempts: %s", request.device, attempt, record.reason)
            break
        workspace.forget(request.device)
        delay = policy.backoff(attempt)
        log.info("%s: transient failure (%s); retrying in %.0f s", request.device, record.reason, delay)
        _sleep(delay)
    listener.on_run_end(record)
    return record


def _skip_reason(shared: _Shared, workspace: Workspace, request: RunRequest) -> str | None:
    """Why ``request`` is not run at all (recorded as skipped), or None."""
    known = shared.plan.skips.get(run_key(request))
    if known:
        return known
    lost = shared.lost.get(request.device)
    if lost:
        return lost if lost.startswith("node lost") else f"device lost: {lost}"
    if request.threads > ALWAYS_RUN_THREADS:
        try:
            facts = DeviceFacts.of(workspace.device_info(request.device, agent=False))
        except Exception as exc:  # noqa: BLE001 - the run itself will report the device
            log.debug("cannot count cores of %s: %s", request.device, exc)
            return None
        if facts.lacks_cores_for(request.threads):
            return f"{request.threads} threads but the device has {facts.cores} cores"
    return None
