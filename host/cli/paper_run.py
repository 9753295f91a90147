"""The work of ``aiot paper aiotbench`` and ``aiot paper bibench``: plan (or resume) the paper's
procedure as one campaign sweep, run it and print its table. Their options live in
:mod:`aiot.host.cli.paper`, which imports this module only when one of them runs, so that
``aiot paper --help`` does not import the engine (issue 53)."""

from __future__ import annotations

import typer

from aiot.converters.api import zoo_ref
from aiot.core.errors import AiotError, UsageError
from aiot.core.toolchains import runtime_python
from aiot.host.cli._output import fmt_bytes, fmt_ms, fmt_pct, message, out, print_json, state
from aiot.host.cli.bibench_table import print_grid
from aiot.host.cli.options import parse_threads, split_list
from aiot.host.cli.progress import RichRunListener
from aiot.host.devices.resolve import resolve_name
from aiot.host.engine import aiotbench, bibench_hw
from aiot.host.engine.campaign import CampaignPolicy, plan_sweep, record_key, run_campaign, run_key
from aiot.host.engine.estimate import estimate
from aiot.host.engine.preflight import check_data_options, validate_devices
from aiot.host.engine.runs import MeasureParams
from aiot.host.engine.spec import cooldown_policy
from aiot.host.engine.workspace import Workspace, artifacts_dir
from aiot.host.native.config import inventory_binaries
from aiot.host.store import open_store


def run_aiotbench(ctx: typer.Context, device: str | None, models: str | None, dataset: str | None,
                  limit: int | None, threads: int, min_runs: int, min_s: float, fresh: bool,
                  as_json: bool) -> None:
    """``aiot paper aiotbench``'s work (its options: :func:`aiot.host.cli.paper.aiotbench_command`)."""
    devices = list(dict.fromkeys(split_list(device, "devices"))) if device else [resolve_name(None)]
    names = list(dict.fromkeys(zoo_ref(m, None).name for m in split_list(models, "models"))) \
        if models else list(aiotbench.MODELS)
    (threads,) = parse_threads(str(threads))  # the same range as run and sweep
    dataset = check_data_options(None, dataset, limit)
    validate_devices(devices)
    params = MeasureParams(min_runs=min_runs, min_s=min_s, max_s=max(150.0, min_s)).validate()
    requests = aiotbench.requests_for(devices, names, params, dataset, limit, threads)
    results_dir = state(ctx).results_dir()
    skips = _skips(requests, results_dir)
    _, records = _run_procedure("AIoTBench", "tests", requests, skips, results_dir, fresh, 120.0)
    records = _newest_per_test(records)
    rows = [aiotbench.row(r) for r in records]
    if as_json:
        print_json(rows)
    else:
        _print_table(rows)
    if any(r["status"] == "failed" for r in rows):
        raise typer.Exit(1)


def _run_procedure(paper: str, unit: str, requests, skips: dict, results_dir, fresh: bool,
                   cooldown_max_s: float) -> tuple[str, list]:
    """Plan (or resume) a paper procedure's requests as one campaign sweep, run what is left
    with ``skips`` recorded as skipped, and return the sweep id with every record it holds."""
    with open_store(results_dir) as store:
        plan = plan_sweep(requests, store, fresh=fresh)
        recent = store.query(status="ok", limit=500)  # how long runs took here, for the estimate
    plan.skips = {run_key(r): why for r, why in skips.items()}
    if plan.done:
        message(f"resuming {paper} sweep {plan.sweep_id}: {len(plan.done)} {unit} already done")
    todo = [r for r in plan.todo if run_key(r) not in plan.skips]
    message(estimate(todo, artifacts_dir(results_dir), recent).line())
    with RichRunListener() as listener:
        run_campaign(plan, results_dir, listener, CampaignPolicy(cooldown=cooldown_policy(cooldown_max_s)))
    with open_store(results_dir) as store:
        return plan.sweep_id, store.query(sweep_id=plan.sweep_id)


def _skips(requests, results_dir) -> dict:
    """Tests each device cannot run, with the reason; a device that cannot be reached at all
    has every test skipped with the connection error."""
    workspace = Workspace(results_dir)
    infos, reasons = {}, {}
    try:
        for request in requests:
            device = request.device
            if device not in infos:
                try:
                    infos[device] = workspace.device_info(device)
                except AiotError as exc:
                    infos[device] = {"unreachable": exc.one_line()}
            info = infos[device]
            why = (f"device unreachable: {info['unreachable']}" if "unreachable" in info
                   else aiotbench.skip_reason(aiotbench.test_of(request), device, info))
            if why:
                reasons[request] = why
    finally:
        workspace.close()
    return reasons


def _newest_per_test(records) -> list:
    """The last record of each (device, model, test): retries and resumed runs replace older ones."""
    newest = {}
    for record in records:  # oldest first
        newest[record_key(record)] = record
    return sorted(newest.values(), key=lambda r: (r.device, r.model, r.format, str(r.spec.get("native"))))


def _print_table(rows: list[dict]) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table("device", "model", "test", "load ms", "avg ms/image", "accuracy", "size", "status",
                  title="AIoTBench")
    for r in rows:
        status = {"ok": "[green]ok[/]", "failed": "[red]failed[/]"}.get(r["status"], "[yellow]skipped[/]")
        if r["status"] != "ok" and r["reason"]:
            status += f": {escape(r['reason'])}"
        elif r["validity"] == "INVALID":
            status += " [yellow](INVALID)[/]"
        table.add_row(r["device"], r["model"], r["test"], fmt_ms(r["load_ms"]), fmt_ms(r["mean_ms"]),
                      fmt_pct(r["accuracy"]), fmt_bytes(r["size_bytes"]), status)
    out.print(table)


def run_bibench(ctx: typer.Context, device: str | None, size: str, threads: str | None,
                min_runs: int, min_s: float, warmup_runs: int, warmup_min_s: float,
                cooldown_max_s: float, fresh: bool, as_json: bool) -> None:
    """``aiot paper bibench``'s work (its options: :func:`aiot.host.cli.paper.bibench_command`)."""
    if size not in bibench_hw.SIZES:
        raise UsageError(f"unknown size '{size}'", f"use one of: {', '.join(bibench_hw.SIZES)}")
    devices = list(dict.fromkeys(split_list(device, "devices"))) if device else [resolve_name(None)]
    counts = parse_threads(threads) if threads else None
    validate_devices(devices)
    params = MeasureParams(warmup_runs=warmup_runs, warmup_min_s=warmup_min_s, min_runs=min_runs,
                           min_s=min_s, max_s=max(150.0, min_s)).validate()
    results_dir = state(ctx).results_dir()
    infos, binaries = _device_facts(devices, results_dir)
    cells, skips = bibench_hw.plan(devices, size, counts, params, infos, binaries)
    requests = [c.request for c in cells if c.request is not None]
    sweep_id, records = _run_procedure("BiBench", "runs", requests, skips, results_dir, fresh,
                                       cooldown_max_s)
    result = bibench_hw.report(cells, records, infos, sweep_id)
    if as_json:
        print_json(result)
    else:
        print_grid(result)
    if any(c["status"] == "failed" for row in result["rows"] for c in row["cells"].values()):
        raise typer.Exit(1)


def _device_facts(devices: list[str], results_dir) -> tuple[dict, dict]:
    """Probe + agent facts per device (``{"unreachable": why}`` where it cannot be reached) and
    each device's configured native binaries."""
    infos, binaries = {}, {}
    workspace = Workspace(results_dir)
    try:
        for device in devices:
            try:
                infos[device] = _with_toolchain_runtimes(workspace.device_info(device))
            except AiotError as exc:
                infos[device] = {"unreachable": exc.one_line()}
            binaries[device] = inventory_binaries(device)
    finally:
        workspace.close()
    return infos, binaries


def _with_toolchain_runtimes(info: dict) -> dict:
    """``info`` with the runtimes this host's toolchain environments add where the device is
    this machine: the local agent runs LCE in the ``lce`` toolchain's interpreter, which its
    own hello (in aiot's Python, NumPy 2) cannot see."""
    if info.get("transport") != "local":
        return info
    agent = dict(info.get("agent") or {})
    runtimes = dict(agent.get("runtimes") or {})
    for backend in ("lce",):
        if not runtimes.get(backend) and runtime_python(backend) is not None:
            runtimes[backend] = "toolchain"
    return {**info, "agent": {**agent, "runtimes": runtimes}}
