"""What the lab view shows, read from where each fact lives: the inventory and reachability
(devices), the campaigns' locks (who measures what now), reservations, the lab's Ray nodes and
the result store (telemetry, SoC, setup and errors of each device's newest record; sweeps'
progress; the results pages). Plain data: :mod:`.pages` renders it, :mod:`.server` serves it.

Every store read is bounded (one index range or the newest N records), so a page costs the
same with 100 records or 100k.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from aiot.core import environment
from aiot.host.devices import inventory, reservations
from aiot.host.devices.reachability import adb_states, ssh_state
from aiot.host.devices.resolve import LOCAL
from aiot.host.lab.node import load_nodes
from aiot.host.lab.session import connect, lab_nodes
from aiot.host.store import open_store
from aiot.host.store.locks import held
from aiot.host.store.queries import Filters, parse_time
from aiot.host.transports.probe import DeviceFacts

PAGE_SIZE = 50
#: How long the devices page waits for the lab's GCS (a node dying can stall it a while).
LAB_ANSWER_S = 5.0
_LAB_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aiot-view-lab")
#: Filters of the results page, as its query parameters name them.
RESULT_FILTERS = ("device", "host", "model", "format", "sweep_id", "status", "kind", "since",
                  "until")


class DeviceWatch:
    """Devices' rows over successive polls: remembers since when each is in its state (so an
    offline phone reads "offline since 02:14")."""

    def __init__(self, live=None) -> None:
        self._since: dict[str, tuple[str, float]] = {}
        self._lab_seen: dict[str, str] = {}  # lab device -> its node, as last listed
        self.live = live  # a LiveTelemetry: free devices of this host read now and then

    def rows(self, results_dir: Path) -> list[dict]:
        """Every device (this host, the inventory, the lab's nodes) with its state, its
        reservation, and what its newest records say of it."""
        busy = {note.get("device"): note for note in held("device")}
        booked = reservations.load()
        rows = []
        with open_store(results_dir, readonly=True) as store:
            for name, transport, state in _reachability():
                row = {"name": name, "transport": transport, "node": "this host", **_from_store(store, name)}
                rows.append(self._live(self._stated(row, state, busy.get(name), booked.get(name))))
            # a lab node's device: what the sweeps this driver ran there stored of it
            for row in self._lab():
                stored = _from_store(store, row["name"])
                row.update({k: v for k, v in stored.items() if row.get(k) is None})
                rows.append(self._stated(row, row.pop("state"), None, booked.get(row["name"])))
        return rows

    def _lab(self) -> list[dict]:
        """The lab's devices; one whose node is no longer listed (Ray drops a dead node's
        resources) stays on the page, offline, as a dead phone would."""
        rows = lab_rows()
        listed = {row["name"] for row in rows}
        self._lab_seen.update({row["name"]: row["node"] for row in rows if row["transport"] == "ray"
                               and row["node"] != "?"})
        rows += [{"name": name, "transport": "ray", "node": node, "state": "offline",
                  "last_error": "its lab node is gone"} for name, node in self._lab_seen.items() if name not in listed]
        return rows

    def _live(self, row: dict) -> dict:
        """The row with its live telemetry when there is a reading (else its newest record's)."""
        reading = self.live.reading(row["name"], row["state"]) if self.live is not None else None
        if reading is not None:
            row["telemetry"] = reading
        return row

    def _stated(self, row: dict, state: str, busy: dict | None, booked) -> dict:
        if busy is not None and state == "online":
            state = "busy"
            row["busy"] = {k: busy.get(k) for k in ("sweep", "user", "host", "pid")}
        key = f"{row.get('node')}/{row['name']}"
        known = self._since.get(key)
        if known is None or known[0] != state:
            self._since[key] = known = (state, time.time())
        row["state"], row["since"] = state, _clock(known[1])
        row["reservation"] = booked
        return row


def _reachability() -> list[tuple[str, str, str]]:
    """(name, transport, state) of this host and every inventoried device, as
    ``devices list`` sees them (a TCP connect for SSH, the adb server's word for ADB)."""
    found = [(LOCAL, "local", "online")]
    adb = adb_states()
    for entry in inventory.load().values():
        if entry.transport == "ssh":
            state = ssh_state(entry, timeout=0.5)
        else:
            state = adb.get(entry.serial, "unreachable")
        found.append((entry.name, entry.transport, "online" if state == "online" else "offline"))
    return found


def _from_store(store, device: str) -> dict:
    """SoC, cores, setup, telemetry and last error of ``device`` from its newest records
    measured here: an imported record (another host's ``local``, or one dated in the future)
    never stands for this host's device."""
    def newest_of(status: str | None):
        return next(store.records(Filters(device=device, status=status, own=True),
                                  newest_first=True, limit=1), None)

    # a finished run's provenance is whole (a pending one's has no telemetry yet)
    newest, failed = newest_of("ok") or newest_of(None), newest_of("failed")
    info, telemetry = {}, None
    if newest is not None:
        info = newest.provenance.get("device") or {}
        state = newest.provenance.get("device_state") or {}
        telemetry = state.get("after") or state.get("before")
    agent = info.get("agent") or {}
    return {
        "soc": info.get("soc_name") or info.get("soc") or info.get("hardware"),
        "model_name": info.get("model"),
        "cores": DeviceFacts.of(info).cores,  # the probe's count (records hold no "processors")
        "runtimes": sorted(agent.get("runtimes") or agent.get("backends") or []) if agent else None,
        "telemetry": telemetry if isinstance(telemetry, dict) else None,
        "last_run": newest.created_at if newest else None,
        "last_error": (failed.reason or "failed") if failed is not None else None,
        "last_error_at": failed.created_at if failed is not None else None,
    }


def lab_rows() -> list[dict]:
    """The devices of every node of the lab this process joined (:func:`join_lab`), a row
    per device; none when it joined no lab."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return []
    asked = _LAB_POOL.submit(lab_nodes)
    try:
        nodes = asked.result(timeout=LAB_ANSWER_S)
    except Exception as exc:  # noqa: BLE001  Ray's errors have no common base; the page says it
        said = str(exc).splitlines()[0][:200] if str(exc) else f"no answer in {LAB_ANSWER_S:g} s"
        return [{"name": "lab", "transport": "ray", "node": "?", "state": "offline",
                 "last_error": f"the lab did not answer: {said}"}]
    rows = []
    for node in nodes:
        for device in node.devices:
            state = "offline" if not node.alive else "busy" if device in node.busy else "online"
            rows.append({"name": device, "transport": "ray", "node": node.hostname or node.address,
                         "state": state, "last_error": node.compatible()})
    return rows


def join_lab(address: str | None, token: Path | None = None) -> str | None:
    """Join the lab at ``address`` (default: ``$AIOT_LAB``, else a live node this host
    started) as a driver, so the devices page lists its nodes' devices; the address joined,
    or None when there is no lab."""
    address = address or environment.get("AIOT_LAB") or next(
        (state.address for state in load_nodes() if state.alive()), None)
    if address:
        connect(address, token)
    return address


def campaigns(results_dir: Path, recent: int = 15) -> dict:
    """Running sweeps (their locks are held) with progress and failures, and recent ones."""
    running = []
    with open_store(results_dir, readonly=True) as store:
        for note in held("sweep"):
            sweep = note.get("sweep")
            if not isinstance(sweep, str):
                continue
            counts = store.sweep_counts(sweep)
            running.append(_progress(note, counts, store.sweep_failures(sweep, 10),
                                     list(store.records(Filters(sweep_id=sweep, status="pending"), limit=5))))
        ids = {r["sweep"] for r in running}
        finished = [s for s in store.recent_sweeps(limit=recent + len(ids)) if s["sweep_id"] not in ids]
        for sweep in finished:
            sweep["failures"] = store.sweep_failures(sweep["sweep_id"], 3) if sweep["failed"] else []
    return {"running": sorted(running, key=lambda r: r["started"] or ""), "finished": finished[:recent]}


def _progress(note: dict, counts: dict[str, int], failures: list[dict], current: list) -> dict:
    total = note.get("runs") if isinstance(note.get("runs"), int) else None
    done = counts.get("ok", 0) + counts.get("skipped", 0)
    started = note.get("started") if isinstance(note.get("started"), str) else None
    elapsed = _elapsed(started)
    eta = None
    if total and done and elapsed is not None and done < total:
        eta = elapsed / done * (total - done)
    return {"sweep": note["sweep"], "user": note.get("user"), "host": note.get("host"), "pid": note.get("pid"),
            "started": started, "elapsed_s": elapsed, "eta_s": eta, "total": total, "done": done,
            "failed": counts.get("failed", 0), "pending": counts.get("pending", 0), "failures": failures,
            "current": [f"{r.device} · {r.model} · {r.format} · {r.threads} thr" for r in current]}


def _elapsed(started: str | None) -> float | None:
    try:
        return (datetime.now(UTC) - datetime.fromisoformat(started)).total_seconds() if started else None
    except ValueError:
        return None


@dataclass
class ResultsPage:
    """One page of the store's records, newest first."""

    records: list
    page: int
    more: bool
    filters: dict
    total: int


def results(results_dir: Path, params: dict[str, str], page: int = 0) -> ResultsPage:
    """Records matching ``params`` (:data:`RESULT_FILTERS`; empty ones ignored), page ``page``.

    Raises:
        UsageError: a ``since``/``until`` that is no time.
    """
    given = {k: params[k].strip() for k in RESULT_FILTERS if params.get(k, "").strip()}
    values = {k: v for k, v in given.items() if k not in ("since", "until")}
    filters = Filters(**values, since=parse_time(given.get("since"), "since"),
                      until=parse_time(given.get("until"), "until"))
    page = max(page, 0)
    with open_store(results_dir, readonly=True) as store:
        found = list(store.records(filters, newest_first=True, limit=PAGE_SIZE + 1, offset=page * PAGE_SIZE))
        total = store.count()
    return ResultsPage(found[:PAGE_SIZE], page, len(found) > PAGE_SIZE, given, total)


def record(results_dir: Path, record_id: str):
    """One record by id (or a unique prefix of it)."""
    with open_store(results_dir, readonly=True) as store:
        return store.get(record_id)


def _clock(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).isoformat(timespec="seconds")
