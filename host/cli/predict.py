"""``aiot predict``: a model's latency on a device before it runs there, from kernels measured
there (``collect``), learned from the store (``fit``), checked on families it never saw
(``evaluate``), and asked (``aiot predict -m MODEL``)."""

from __future__ import annotations

from typing import Annotated

import typer

from aiot.converters import get_converter
from aiot.core.errors import UsageError
from aiot.host.cli._output import message, out, print_json, safe, spinner, state
from aiot.host.cli.options import Device, JsonOpt, check_seconds
from aiot.host.cli.progress import RichRunListener
from aiot.host.devices.resolve import emulation_warning, resolve_name
from aiot.host.engine.estimate import duration
from aiot.host.engine.runs import MeasureParams
from aiot.host.predict import graphs
from aiot.host.predict.collect import RETRIES, collection_spec
from aiot.host.predict.collect import collect as run_collection
from aiot.host.predict.evaluate import evaluate as held_out
from aiot.host.predict.evaluate import metrics
from aiot.host.predict.predictor import fit_predictor, load_predictor
from aiot.host.predict.record import store_prediction
from aiot.host.predict.training import training_set
from aiot.host.store import open_store
from aiot.host.store import predictions as stored
from aiot.models.model_ref import resolve_model

app = typer.Typer(invoke_without_command=True)

Format = Annotated[str, typer.Option("--format", "-f", help="Artifact format (tflite, onnx, ...).")]
Threads = Annotated[int, typer.Option(help="Inference threads.")]
Seed = Annotated[int, typer.Option(help="Seed of the kernels drawn and of the regressors.")]
#: Kernels a prediction lists without --all (the slowest).
SHOWN = 12


def _target(device: str | None, fmt: str, threads: int) -> tuple[str, str, int]:
    """The device's resolved name, the format's canonical one, threads checked."""
    if threads < 1:
        raise UsageError(f"--threads must be at least 1, got {threads}")
    return resolve_name(device), get_converter(fmt).name, threads


def _emulated(device: str) -> None:
    if warning := emulation_warning([device]):
        message(f"[yellow]warning:[/] {safe(warning)}: a prediction for it predicts this host")


@app.callback()
def predict(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option(
        "--model", "-m", help="A zoo name, your code as file.py:factory or module:factory, or a "
                              ".pt2 program.")] = None,
    device: Device = None,
    fmt: Format = "tflite",
    threads: Threads = 1,
    every: Annotated[bool, typer.Option("--all", help="List every kernel, not only the slowest.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Predict a model's latency on a device from kernels measured there: collect, fit,
    evaluate, then aiot predict -m MODEL.

    aiot predict -m MODEL prints the predicted median with a 95 % interval, the kernels it
    summed and a warning for each kernel outside what was collected, and stores the
    prediction: a later run of the model shows predicted against measured (aiot results show,
    aiot report).
    """
    if ctx.invoked_subcommand is not None:
        return
    if model is None:
        out.print(ctx.get_help())
        raise typer.Exit(0)
    name, fmt, threads = _target(device, fmt, threads)
    ref = resolve_model(model)
    results = state(ctx).results_dir()
    with spinner(f"reading {ref.label()}'s kernels…"):
        decomposition = graphs.of_reference(ref)
    with spinner(f"loading the predictor of {name} · {fmt} · {threads}t…"):
        predictor = load_predictor(results, name, fmt, threads)
    guess = predictor.predict(ref.label(), decomposition)
    record = store_prediction(results, guess, ref, predictor)
    _emulated(name)  # on stderr: --json's stdout stays JSON
    if as_json:
        print_json({**guess.to_dict(), "record": record.id})
        return
    _print_prediction(guess, record, every)


def _print_prediction(guess, record, every: bool) -> None:
    from rich.table import Table

    out.print(f"[bold]{safe(guess.model)}[/] · {guess.format} · {guess.threads}t @ {safe(guess.device)}: "
              f"predicted [bold]{guess.ms:.4g} ms[/] (95 % interval {guess.low_ms:.4g}–{guess.high_ms:.4g} ms)"
              f" from {len(guess.kernels)} kernels")
    lines = sorted(guess.kernels, key=lambda k: -k.ms)
    shown = lines if every else lines[:SHOWN]
    total = sum(k.ms for k in lines) or 1.0
    table = Table(title=f"kernels summed (alone){'' if every else f', the {len(shown)} slowest'}")
    for column in ("kernel", "where", "ms alone", "share", "note"):
        table.add_column(column, justify="right" if column in ("ms alone", "share") else "left")
    for line in shown:
        note = "outside: " + line.outside if line.outside else ("" if line.own else "pooled regressor")
        note = "; ".join(filter(None, (f"{line.path} path" if line.path else "", note)))
        table.add_row(safe(line.kernel.describe()), safe(line.kernel.label), f"{line.ms:.4f}",
                      f"{100 * line.ms / total:.1f} %", safe(note))
    out.print(table)
    fitted = guess.predictor
    message(f"predictor of {fitted.get('fitted_at')} ({fitted.get('kernel_samples')} kernels, "
            f"{fitted.get('models')} models, {fitted.get('runs')} runs); stored as record "
            f"{record.id[:8]}: a later run shows predicted against measured")
    for warning in guess.warnings:
        message(f"[yellow]warning:[/] {safe(warning)}")


@app.command()
def collect(
    ctx: typer.Context,
    device: Device = None,
    fmt: Format = "tflite",
    threads: Threads = 1,
    kernels: Annotated[int, typer.Option(help="Kernels to draw (conv, depthwise, pointwise, pooling, "
                                              "fc, add, concat, bn, squeeze-excite, blocks).")] = 300,
    models: Annotated[str | None, typer.Option(
        help="Whole models too, comma-separated, or none (default: the zoo's full-precision "
             "models).")] = None,
    seed: Seed = 0,
    budget_s: Annotated[float | None, typer.Option(
        "--budget-s", help="Start no further run after this many seconds (the same command "
                           "goes on where it stopped).")] = None,
    min_runs: Annotated[int, typer.Option(help="Timed iterations per run (at least).")] = MeasureParams().min_runs,
    min_s: Annotated[float, typer.Option(help="Timed seconds per run (at least).")] = MeasureParams().min_s,
    warmup_runs: Annotated[int, typer.Option(help="Warm-up iterations (at least).")] = MeasureParams().warmup_runs,
    warmup_min_s: Annotated[float, typer.Option(help="Warm-up seconds (at least).")] = MeasureParams().warmup_min_s,
    cooldown_max_s: Annotated[float, typer.Option(
        help="Before each run wait at most this long for the device to cool down (0: never).")] = 120.0,
    validity: Annotated[str | None, typer.Option(
        help="Validity limits over AIOT_VALIDITY's (e.g. load=2 on a busy machine); only VALID "
             "runs are learned from.")] = None,
    retries: Annotated[int, typer.Option(
        help="Measure a run judged INVALID for the machine's moment (busy, its CPU's speed "
             "changed, too noisy) again up to this many times, within the budget.")] = RETRIES,
    as_json: JsonOpt = False,
) -> None:
    """Measure kernels drawn from the shapes CNNs use, and whole models, with per-operator
    profiles, as ordinary records of one sweep.

    Says an estimate before it starts; running the same command again resumes (only missing or
    failed runs are measured), so --budget-s spreads a collection over several calls. Runs
    INVALID for the machine's moment are measured again at the end (--retries).
    """
    name, fmt, threads = _target(device, fmt, threads)
    check_seconds({"--budget-s": budget_s, "--min-s": min_s, "--warmup-min-s": warmup_min_s,
                   "--cooldown-max-s": cooldown_max_s})
    if kernels < 0 or retries < 0:
        raise UsageError(f"--kernels and --retries must be 0 or more, got {kernels} and {retries}")
    chosen = None if models is None else [m.strip() for m in models.split(",")
                                          if m.strip() and m.strip().lower() != "none"]
    params = MeasureParams(warmup_runs=warmup_runs, warmup_min_s=warmup_min_s, min_runs=min_runs,
                           min_s=min_s)
    with spinner("drawing the kernels (each exported once into the cache)…"):
        spec = collection_spec(name, fmt, threads, kernels, chosen, seed, params, validity, cooldown_max_s)
    results = state(ctx).results_dir()
    with RichRunListener() as listener:
        done = run_collection(spec, results, listener, budget_s, say=message, retries=retries)
    counts, again = done.counts(), done.counts(retried=True)
    summary = {"sweep_id": done.sweep_id, "planned": done.planned, "done_before": done.done_before,
               "measured": dict(counts), "retried": dict(again), "left": done.left,
               "budget_spent": done.budget_spent,
               "seconds": done.seconds, "estimate_s": done.guess.seconds if done.guess else None}
    if as_json:
        print_json(summary)
        return
    measured = ", ".join(f"{n} {what}" for what, n in counts.most_common()) or "nothing new"
    message(f"collection {done.sweep_id}: {measured} in {duration(done.seconds)}; "
            + (f"{done.left} run(s) left: the same command goes on" if done.left > 0 else "complete")
            + f"; see: aiot results list --sweep {done.sweep_id}")
    if again:
        message("measured again: " + ", ".join(f"{n} {what}" for what, n in again.most_common()))
    # a run INVALID at first and VALID measured again is learned from: not counted here
    invalid = counts.get("ok INVALID", 0) - again.get("ok VALID", 0)
    if invalid > 0:
        message(f"[yellow]warning:[/] {invalid} run(s) were judged INVALID"
                + (" (measured again too)" if again else "") + ": fit learns only from VALID ones "
                "(a busy machine: --validity load=… relaxes it, stated in each verdict)")
    _emulated(name)


@app.command()
def fit(
    ctx: typer.Context,
    device: Device = None,
    fmt: Format = "tflite",
    threads: Threads = 1,
    seed: Seed = 0,
    as_json: JsonOpt = False,
) -> None:
    """Learn per-kernel predictors for a device, format and thread count from every VALID run
    in the store (collected or not) and keep them beside the store."""
    name, fmt, threads = _target(device, fmt, threads)
    results = state(ctx).results_dir()
    with spinner("reading the store's runs and their models' kernels…"), open_store(results, readonly=True) as store:
        training = training_set(store, name, fmt, threads)
    with spinner(f"fitting {len(training.kernels)} kernels and {len(training.models)} models…"):
        predictor = fit_predictor(training, seed)
    path = predictor.save(results)
    regs, comp = predictor.regressors, predictor.composition
    summary = {"file": str(path), "runs": training.runs, "kernels": len(training.kernels),
               "models": len(training.models), "left_out": dict(training.left_out),
               "relaxed": dict(training.relaxed), "emulated": training.emulated,
               "kinds": {k: {"samples": n, "regressor": "own" if k in regs.own else "pooled",
                             "cv_mape": regs.mape.get(k)} for k, n in regs.counts.items()},
               "paths": {k: {"paths": r.paths, "agreement": r.agreement} for k, r in regs.paths.items()},
               "composition": comp.to_dict(), "fusion": predictor.fusion}
    _emulated(name)
    if as_json:
        print_json(summary)
        return
    _print_fit(training, predictor, path)


def _print_fit(training, predictor, path) -> None:
    from rich.table import Table

    regs, comp = predictor.regressors, predictor.composition
    blocks = sum(s.family == "kernels" for s in training.models)
    families = len({s.family for s in training.models} - {"kernels"})
    out.print(f"learned from {training.runs} VALID run(s) of {safe(training.device)} · {training.format} · "
              f"{training.threads}t: {len(training.kernels)} kernels, {len(training.models)} models "
              f"({families} families" + (f", {blocks} collected blocks" if blocks else "") + ")")
    if line := training.left_out_line():
        message(safe(line))
    if training.relaxed:
        message("judged under looser validity limits than the defaults: " + ", ".join(
            f"{n} run(s) {limit}" for limit, n in training.relaxed.most_common()))
    table = Table(title="kernel regressors (cross-validated error of a kernel alone)")
    for column in ("kind", "samples", "regressor", "CV MAPE", "the runtime ran it as"):
        table.add_column(column, justify="right" if column in ("samples", "CV MAPE") else "left")
    for kind, count in sorted(regs.counts.items(), key=lambda kv: -kv[1]):
        mape = regs.mape.get(kind)
        table.add_row(kind, str(count), "own" if kind in regs.own else "pooled",
                      f"{mape:.1f} %" if mape is not None else "—", safe(_fusion_text(predictor, kind)))
    out.print(table)
    for kind, rule in regs.paths.items():
        agreement = "" if rule.agreement is None else (
            f"; the rule that picks one gives {100 * rule.agreement:.0f} % of them their own (out of fold)")
        message(f"{kind}: its profiled kernels ran on the runtime's {' and '.join(rule.paths)} paths, "
                f"a regressor each{agreement}")
    if comp.models >= 2:
        cold = "" if comp.cold_kernel_mib is None else (
            f" + {comp.per_cold_weight_ms * 1e6:.3f} ns per weight of a kernel over "
            f"{comp.cold_kernel_mib:g} MiB of them in a model over {comp.cold_model_mib:g} MiB (read "
            "from memory, not a cache)")
        message(f"composition over {comp.models} models: {comp.scale:.3f} × Σ kernels − "
                f"{comp.per_call_ms * 1000:.1f} µs per further kernel − {comp.per_element_ms * 1e6:.2f} ns "
                f"per element copied{cold}; leave-one-out error {100 * (comp.sigma or 0):.1f} %")
    else:
        message("[yellow]warning:[/] fewer than 2 whole models measured: the kernels' sum is "
                "not corrected for the runtime's per-call overhead (collect some models)")
    message(f"saved {safe(path)}")


def _fusion_text(predictor, key: str) -> str:
    """``conv+bn+relu: CONV_2D, TRANSPOSE`` for the patterns of regressor ``key`` (a kind, or a
    kind's path: ``gconv@plain``) seen in collection."""
    parts = []
    for pattern, ops in predictor.fusion.items():
        head = pattern.split("+")[0]
        if key in (head, head.split("@")[0]):
            shown = ops.get("runtime") or ops.get("graph")
            parts.append(f"{pattern}: {', '.join(shown) or '—'}")
    return "; ".join(parts[:3])


@app.command()
def evaluate(
    ctx: typer.Context,
    device: Device = None,
    fmt: Format = "tflite",
    threads: Threads = 1,
    seed: Seed = 0,
    as_json: JsonOpt = False,
) -> None:
    """Hold out each family of measured models in turn and predict it from everything else:
    RMSE, MAPE and the share within ±5 % and ±10 %, against a FLOPs baseline.

    Also checks the predictions stored so far against the runs measured after them.
    """
    name, fmt, threads = _target(device, fmt, threads)
    results = state(ctx).results_dir()
    with spinner("reading the store's runs and their models' kernels…"), open_store(results, readonly=True) as store:
        training = training_set(store, name, fmt, threads)
        later = [(p, m) for p, m in stored.pairs(store.query(device=name, fmt=fmt)) if m.threads == threads]
    with spinner("fitting a predictor per held-out family…"):
        found = held_out(training, seed)
    checked = metrics([(p.result["predicted_ms"], m.median_ms) for p, m in later if m.validity == "VALID"])
    _emulated(name)
    if as_json:
        print_json({**found.to_dict(), "stored_predictions": checked})
        return
    _print_evaluation(found, checked)
    if line := training.left_out_line():
        message(safe(line))


def _print_evaluation(found, checked: dict) -> None:
    from rich.table import Table

    for why in found.skipped:
        message(f"[yellow]warning:[/] {safe(why)}")
    if not found.outcomes:
        return
    table = Table(title=f"held-out families, {safe(found.device)} · {found.format} · {found.threads}t "
                        f"({found.kernels} kernels learned from)")
    for column in ("family", "models", "RMSE ms", "MAPE", "±5 %", "±10 %"):
        table.add_column(column, justify="left" if column == "family" else "right")
    rows = [(f, found.of(f)) for f in found.families()] + [("all", found.of()),
                                                           ("FLOPs baseline", found.baseline())]
    for family, m in rows:
        table.add_row(safe(family), str(m["n"]), *_metric_cells(m))
    out.print(table)
    models = Table(title="each held-out model")
    for column in ("model", "measured ms", "predicted ms", "error", "95 % interval"):
        models.add_column(column, justify="left" if column == "model" else "right")
    for o in found.outcomes:
        models.add_row(safe(o.model), f"{o.measured_ms:.4g}", f"{o.predicted_ms:.4g}", f"{o.error_pct:+.1f} %",
                       f"{o.low_ms:.4g}–{o.high_ms:.4g}")
    out.print(models)
    if checked["n"]:
        message(f"stored predictions against the VALID runs after them: {checked['n']}, MAPE "
                f"{checked['mape']:.1f} %, {checked['within_10']:.0f} % within ±10 %")


def _metric_cells(m: dict) -> list[str]:
    if not m["n"]:
        return ["—"] * 4
    return [f"{m['rmse_ms']:.4g}", f"{m['mape']:.1f} %", f"{m['within_5']:.0f} %", f"{m['within_10']:.0f} %"]
