"""``aiot score``: benchmark scores from stored runs or from external CSV measurements.

Scores are computed on demand from the raw records (never stored in their place):
AIoTBench's VIPS and VOPS per device, BiBench's OM_infer and OM_comp per algorithm.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from aiot.converters import get_converter
from aiot.core.errors import UsageError
from aiot.host.cli._output import fmt_bytes, fmt_ms, message, out, print_json, spinner, state
from aiot.host.cli.options import Algorithms, JsonOpt, OnlyDevice, OnlyModel, parse_algorithms
from aiot.host.scores.inputs import read_om_infer_csv, read_vips_csv
from aiot.host.scores.om_infer import DEFAULT_BASELINE, Matching, match_runs, om_infer
from aiot.host.scores.vips import Selection, device_scores, select_tests, si
from aiot.host.store import open_store
from aiot.models.model_ref import record_name

app = typer.Typer(no_args_is_help=True,
                  help="Benchmark scores: AIoTBench VIPS/VOPS, BiBench OM_infer and OM_comp.")

InputOpt = Annotated[Path | None, typer.Option(
    "--input", "-i", help="Score the measurements in this CSV file instead of stored runs.",
    dir_okay=False, show_default=False)]


def _baseline_command(u) -> str:
    """The ``aiot run`` that measures the baseline an unpaired binarized run lacks."""
    threads = f" --threads {u.threads}" if u.threads is not None else ""
    return f"aiot run --model {u.model} --format {u.baseline} --device {u.device}{threads}"


def _print_unpaired(unpaired) -> None:
    from rich.markup import escape

    if not unpaired:
        return
    baseline = unpaired[0].baseline
    message(f"[yellow]unpaired:[/] {len(unpaired)} binarized run(s) without a {escape(baseline)} "
            "baseline of the same device, model and threads; measure it with:")
    for u in unpaired:
        what = (f"{u.model}+{u.algorithm} ({u.format}, {u.threads}t @ {u.device}, "
                f"record {u.record_id[:8]})")
        message(f"  {escape(what)}: {escape(_baseline_command(u))}")


def _no_pairs(unpaired, baseline: str, device: str | None, model: str | None) -> UsageError:
    where = "".join(f" {k} '{v}'" for k, v in (("on device", device), ("for model", model)) if v)
    if unpaired:
        return UsageError(
            f"no binarized run{where} has an FP32 {baseline} baseline ({len(unpaired)} unpaired)",
            f"run: {_baseline_command(unpaired[0])}",
        )
    m = model or "M"
    return UsageError(
        f"no binarized run{where} with an FP32 {baseline} baseline in the result store",
        f"measure a binarized model and its FP32 baseline: aiot run --model {m} --binarize bnn "
        f"--format lce (or --format dabnn --native benchmark_single_model) and "
        f"aiot run --model {m} --format {baseline}, same --device and --threads",
    )


def _algorithm_name(name: str) -> str:
    """BiBench's name for an algorithm written in a CSV (``BNN``, ``Bi-Real``); others lowered."""
    from aiot.models.bibench import ALGORITHMS

    return ALGORITHMS.canonical(name) if name in ALGORITHMS else name.strip().lower()


def _csv_matching(path: Path, baseline: str | None, device: str | None, model: str | None):
    """The pairs of an OM_infer CSV file (filtered like stored runs) as a Matching."""
    if baseline is not None:
        raise UsageError("--baseline applies to stored runs",
                         "a CSV row carries its own FP32 time and size")
    pairs = [p for p in read_om_infer_csv(path, _algorithm_name)
             if device in (None, p.device) and model in (None, p.model)]
    if not pairs:
        where = "".join(f" {k} '{v}'" for k, v in (("of device", device), ("of model", model)) if v)
        raise UsageError(f"no row{where} in {path.name}")
    return Matching(pairs, [])


@app.command("om-infer")
def om_infer_command(
    ctx: typer.Context,
    device: OnlyDevice = None,
    model: OnlyModel = None,
    baseline: Annotated[str | None, typer.Option(
        "--baseline", help="Format of the FP32 runs binarized runs are compared with.",
        show_default="tflite")] = None,
    input_csv: InputOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """BiBench's hardware-inference score: speedup and compression of binarized models.

    Pairs each binarized run (aiot run --binarize ALGO) with the newest FP32 run of the same
    device, model and threads in the --baseline format, then per algorithm and format:
    OM_infer = sqrt((E(T_fp32/T_bin)² + E(S_fp32/S_bin)²) / 2), E the mean over the pairs.
    With --input, the pairs are the rows of a CSV file with the columns
    algorithm,device,model,threads,fp32_ms,bin_ms,fp32_bytes,bin_bytes (optionally format).
    """
    from rich.table import Table

    if input_csv is not None:
        matching = _csv_matching(input_csv, baseline, device, model)
        baseline = matching.pairs[0].baseline
    else:
        baseline = baseline or DEFAULT_BASELINE
        matching = _stored_matching(ctx, baseline, device, model)
    scores = om_infer(matching.pairs)
    if as_json:
        print_json({"baseline": baseline, "input": str(input_csv) if input_csv else None,
                    "scores": [s.to_dict() for s in scores], **matching.to_dict()})
        return
    pairs = Table("device", "model", "threads", "algorithm", "format", "stat", f"{baseline} ms",
                  "binarized ms", "speedup", f"{baseline} size", "binarized size", "compression",
                  title="binarized runs vs FP32 baselines")
    for p in matching.pairs:
        pairs.add_row(p.device, p.model, str(p.threads or "—"), p.algorithm, p.format, p.stat,
                      fmt_ms(p.fp_ms), fmt_ms(p.bin_ms), f"{p.speedup:.2f}x",
                      _size(p.fp_bytes), _size(p.bin_bytes),
                      f"{p.compression:.2f}x")
    out.print(pairs)
    table = Table("algorithm", "format", "pairs", "speedup", "compression", "OM_infer", "devices",
                  title="OM_infer = sqrt((E²(T_fp/T_bin) + E²(S_fp/S_bin)) / 2)",
                  caption="BiBench Table 3: bnn 5.45x, 15.62x, 11.70; "
                          "reactnet 4.89x, 15.52x, 11.51")
    for s in scores:
        table.add_row(s.algorithm, s.format, str(s.pairs), f"{s.speedup:.2f}x",
                      f"{s.compression:.2f}x", f"{s.om_infer:.2f}", ", ".join(s.devices))
    out.print(table)
    _print_unpaired(matching.unpaired)


def _size(size: float) -> str:
    """Bytes as KiB/MiB; a CSV's sizes in another unit (a float) as given."""
    return fmt_bytes(size) if isinstance(size, int) else f"{size:g}"


def _stored_matching(ctx: typer.Context, baseline: str, device: str | None, model: str | None):
    """The pairs of stored runs; an error naming what to measure when there are none."""
    get_converter(baseline)  # an unknown format fails with a did-you-mean hint
    with open_store(state(ctx).results_dir(), readonly=True) as store:
        records = store.query(kind="latency", status="ok", device=device, model=record_name(model))
    matching = match_runs(records, baseline)
    if not matching.pairs:
        _print_unpaired(matching.unpaired)
        raise _no_pairs(matching.unpaired, baseline, device, model)
    return matching


# -- AIoTBench: VIPS and VOPS ----------------------------------------------------------------

IncludeInvalidOpt = Annotated[bool, typer.Option(
    "--include-invalid", help="Count runs judged INVALID (left out and listed by default).")]
ThreadsOpt = Annotated[int | None, typer.Option(
    "--threads", "-t", min=1, help="Only runs at this thread count.",
    show_default="the newest run of each test")]


@app.command("vips")
def vips_command(ctx: typer.Context, device: OnlyDevice = None, input_csv: InputOpt = None,
                 threads: ThreadsOpt = None, include_invalid: IncludeInvalidOpt = False,
                 as_json: JsonOpt = False) -> None:
    """AIoTBench's Valid Images Per Second per device: VIPS = sum_i accuracy_i / time_i.

    The sum runs over the tests (model x implementation) a device ran, accuracy as a
    fraction and time the mean seconds per image (the median where a run has no mean).
    Tests a device did not run are left out and listed. With --input, the tests are the
    rows of a CSV file with the columns device,implementation,model,accuracy_pct,time_ms.
    """
    _aiotbench_score(ctx, "vips", device, input_csv, threads, include_invalid, as_json)


@app.command("vops")
def vops_command(ctx: typer.Context, device: OnlyDevice = None, input_csv: InputOpt = None,
                 threads: ThreadsOpt = None, include_invalid: IncludeInvalidOpt = False,
                 as_json: JsonOpt = False) -> None:
    """AIoTBench's Valid FLOPs Per Second per device: VOPS = sum_i accuracy_i * FLOPs_i / time_i.

    As vips, each test weighted by its model's multiply-accumulates (AIoTBench's reference
    FLOPs; aiot's own count for zoo models the paper has none for). With --input, a CSV as
    for vips, optionally with flops_m (millions); without it the zoo's reference FLOPs.
    """
    _aiotbench_score(ctx, "vops", device, input_csv, threads, include_invalid, as_json)


def _aiotbench_score(ctx: typer.Context, metric: str, device: str | None, input_csv: Path | None,
                     threads: int | None, include_invalid: bool, as_json: bool) -> None:
    selection = (_csv_tests(input_csv, device, threads, include_invalid) if input_csv
                 else _stored_tests(ctx, device, threads, include_invalid))
    scores = sorted(device_scores(selection.tests, selection.not_run),
                    key=lambda s: (-getattr(s, metric), s.device))
    if as_json:
        print_json({"score": metric, "input": str(input_csv) if input_csv else None,
                    "devices": [{"rank": rank, **s.to_dict()}
                                for rank, s in enumerate(scores, start=1)],
                    "tests": [t.to_dict() for t in selection.tests],
                    "not_run": [n.to_dict() for score in scores for n in score.not_run],
                    "notes": selection.notes})
        return
    _print_tests(metric, selection.tests)
    _print_ranking(metric, scores)
    ran: dict[str, set] = {}
    for t in selection.tests:
        ran.setdefault(t.device, set()).add((t.implementation, t.model))
    if len({frozenset(tests) for tests in ran.values()}) > 1:
        message("[yellow]note:[/] the devices ran different tests; their sums rank like for "
                "like only over the same tests")
    for note in selection.notes:
        message(f"[yellow]note:[/] {_escape(note)}")
    _print_not_run(scores)


def _csv_tests(path: Path, device: str | None, threads: int | None, include_invalid: bool):
    if threads is not None or include_invalid:
        raise UsageError("--threads and --include-invalid apply to stored runs",
                         "a CSV row is one test as it stands")
    data = read_vips_csv(path)
    tests = [t for t in data.tests if device in (None, t.device)]
    if not tests:
        raise UsageError(f"no test of device '{device}' in {path.name}")
    if all(t.accuracy <= 0.01 for t in tests):
        message(f"[yellow]warning:[/] every accuracy_pct in {_escape(path.name)} is at most 1: "
                "percentages are expected (74.94, not 0.7494)")
    return Selection(tests, [n for n in data.not_run if device in (None, n.device)], [])


def _stored_tests(ctx: typer.Context, device: str | None, threads: int | None,
                  include_invalid: bool):
    with open_store(state(ctx).results_dir(), readonly=True) as store:
        records = store.query(kind="latency", device=device)
    records = [r for r in records if threads in (None, r.threads)]
    selection = select_tests(records, include_invalid=include_invalid)
    if not selection.tests:
        _print_not_run_entries(selection.not_run)
        where = f" on device '{device}'" if device else ""
        where += f" at {threads} threads" if threads else ""
        raise UsageError(
            f"no run{where} with an accuracy and a latency in the result store"
            + (f" ({len(selection.not_run)} test(s) left out)" if selection.not_run else ""),
            "measure with: aiot paper aiotbench --device D --dataset folder:IMAGES, "
            "or score external numbers with --input FILE.csv",
        )
    return selection


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _print_tests(metric: str, tests) -> None:
    from rich.table import Table

    columns = ["device", "implementation", "model", "accuracy", "ms / image", "stat"]
    if metric == "vops":
        columns += ["FLOPs (M)", "FLOPs from"]
    term = "accuracy / time" if metric == "vips" else "accuracy x FLOPs / time"
    table = Table(*columns, term, title=f"{metric.upper()} terms, one per test")
    for t in sorted(tests, key=lambda t: (t.device, t.implementation, t.model)):
        row = [t.device, t.implementation, t.model, f"{t.accuracy * 100:.2f}%",
               fmt_ms(t.time_s * 1000), t.stat]
        if metric == "vops":
            row += [f"{t.flops_m:g}", t.flops_source]
        table.add_row(*row, f"{t.vips:.2f}" if metric == "vips" else si(t.vops))
    out.print(table)


def _print_ranking(metric: str, scores) -> None:
    from rich.table import Table

    formula = ("VIPS = sum_i accuracy_i / time_i" if metric == "vips"
               else "VOPS = sum_i accuracy_i * FLOPs_i / time_i")
    table = Table("rank", "device", "tests", metric.upper(), "not run",
                  title=f"AIoTBench {formula}",
                  caption="accuracy as a fraction, time in seconds per image")
    for rank, s in enumerate(scores, start=1):
        value = f"{s.vips:.2f}" if metric == "vips" else si(s.vops)
        table.add_row(str(rank), s.device, str(s.tests), value, str(len(s.not_run)))
    out.print(table)


def _print_not_run(scores) -> None:
    _print_not_run_entries([n for s in scores for n in s.not_run])


def _print_not_run_entries(entries) -> None:
    if entries:
        message(f"[yellow]not run:[/] {len(entries)} test(s) left out of the sums:")
    for n in entries:
        text = f"{n.device} {n.implementation}/{n.model}: {n.reason}"
        if n.source:  # a CSV line, or a record id (shortened as `aiot results` shows them)
            text += f" ({n.source if ' line ' in n.source else 'record ' + n.source[:8]})"
        message(f"  {_escape(text)}")


# -- BiBench: OM_comp ------------------------------------------------------------------------


@app.command("om-comp")
def om_comp_command(
    models: Annotated[list[str], typer.Argument(
        help="Zoo models to average over, e.g. resnet18 resnet34.", show_default=False)],
    binarize: Algorithms = None,
    as_json: JsonOpt = False,
) -> None:
    """BiBench's theoretical-complexity score per algorithm (eq. 8).

    OM_comp = sqrt((E²(r_c) + E²(r_s)) / 2), E the mean over the given models, with r_c and
    r_s the compression and speedup of eq. 7 (see aiot complexity for each model's counts).
    """
    from rich.table import Table

    from aiot.models import get_model_spec  # the zoo: torch
    from aiot.models.bibench import binarized_complexity

    algorithms = parse_algorithms(binarize)
    specs = list({s.name: s for s in map(get_model_spec, models)}.values())
    with spinner(f"counting {len(specs)} model(s) x {len(algorithms)} algorithm(s)…"):
        rows = [binarized_complexity(spec, a) for a in algorithms for spec in specs]
    scores = _om_comp_scores(rows)
    if as_json:
        print_json({"models": [s.name for s in specs], "scores": scores,
                    "rows": [r.to_dict() for r in rows]})
        return
    table = Table("algorithm", "E(r_c)", "E(r_s)", "OM_comp", "models",
                  title="OM_comp = sqrt((E²(r_c) + E²(r_s)) / 2)",
                  caption="BiBench Table 3 (ResNet-18, ImageNet): bnn 12.94, xnor 12.74, "
                          "bireal 12.79, reactnet 12.74")
    for s in scores:
        table.add_row(s["algorithm"], f"{s['r_c']:.2f}", f"{s['r_s']:.2f}", f"{s['om_comp']:.2f}",
                      ", ".join(s["models"]))
    out.print(table)


def _om_comp_scores(rows) -> list[dict]:
    """Per algorithm, in the order given: the mean ratios, OM_comp and the models averaged."""
    from aiot.models.bibench import om_comp_by_algorithm

    scores = []
    for algorithm, value in om_comp_by_algorithm(rows).items():
        group = [r for r in rows if r.algorithm == algorithm]
        scores.append({"algorithm": algorithm, "om_comp": value,
                       "r_c": sum(r.r_c for r in group) / len(group),
                       "r_s": sum(r.r_s for r in group) / len(group),
                       "models": [r.model for r in group]})
    return scores
