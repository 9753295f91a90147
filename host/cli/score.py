"""``aiot score``: benchmark scores computed from stored runs."""

from __future__ import annotations

from typing import Annotated

import typer

from aiot.host.errors import UsageError

app = typer.Typer(no_args_is_help=True,
                  help="Benchmark scores from stored runs (BiBench OM_infer).")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]


def _baseline_command(u) -> str:
    """The ``aiot run`` that measures the baseline an unpaired binarized run lacks."""
    threads = f" --threads {u.threads}" if u.threads is not None else ""
    return f"aiot run --model {u.model} --format {u.baseline} --device {u.device}{threads}"


def _print_unpaired(unpaired) -> None:
    from rich.markup import escape

    from aiot.host.cli._output import message

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


@app.command("om-infer")
def om_infer_command(
    ctx: typer.Context,
    device: Annotated[str | None, typer.Option(
        "--device", "-d", help="Only runs on this device.")] = None,
    model: Annotated[str | None, typer.Option(
        "--model", "-m", help="Only runs of this zoo model.")] = None,
    baseline: Annotated[str, typer.Option(
        "--baseline", help="Format of the FP32 runs binarized runs are compared with.")] = "tflite",
    as_json: JsonOpt = False,
) -> None:
    """BiBench's hardware-inference score: speedup and compression of binarized models.

    Pairs each binarized run (aiot run --binarize ALGO) with the newest FP32 run of the same
    device, model and threads in the --baseline format, then per algorithm and format:
    OM_infer = sqrt((E(T_fp32/T_bin)² + E(S_fp32/S_bin)²) / 2), E the mean over the pairs.
    """
    from rich.table import Table

    from aiot.converters import get_converter
    from aiot.host.cli._output import fmt_bytes, fmt_ms, out, print_json, state
    from aiot.host.scores.om_infer import match_runs, om_infer
    from aiot.host.store import open_store

    get_converter(baseline)  # an unknown format fails with a did-you-mean hint
    with open_store(state(ctx).results_dir()) as store:
        records = store.query(kind="latency", status="ok", device=device, model=model)
    matching = match_runs(records, baseline)
    if not matching.pairs:
        _print_unpaired(matching.unpaired)
        raise _no_pairs(matching.unpaired, baseline, device, model)
    scores = om_infer(matching.pairs)
    if as_json:
        print_json({"baseline": baseline, "scores": [s.to_dict() for s in scores],
                    **matching.to_dict()})
        return
    pairs = Table("device", "model", "threads", "algorithm", "format", "stat", f"{baseline} ms",
                  "binarized ms", "speedup", f"{baseline} size", "binarized size", "compression",
                  title="binarized runs vs FP32 baselines")
    for p in matching.pairs:
        pairs.add_row(p.device, p.model, str(p.threads or "—"), p.algorithm, p.format, p.stat,
                      fmt_ms(p.fp_ms), fmt_ms(p.bin_ms), f"{p.speedup:.2f}x", fmt_bytes(p.fp_bytes),
                      fmt_bytes(p.bin_bytes), f"{p.compression:.2f}x")
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
