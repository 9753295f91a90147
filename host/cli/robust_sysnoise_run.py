"""The work of ``aiot robust sysnoise`` (its options: :mod:`aiot.host.cli.robust_sysnoise`)."""

from __future__ import annotations

import typer

from aiot.core.errors import UsageError
from aiot.host.cli._output import fmt_pct, message, out, spinner
from aiot.host.cli.robust_bits import show_runs, sysnoise_row
from aiot.host.cli.robust_common import suite_context, suite_targets
from aiot.host.devices.resolve import resolve_name
from aiot.host.robust.data import eval_set
from aiot.host.robust.deployed import deployed_if_format
from aiot.host.robust.record import run_recorded
from aiot.host.robust.sysnoise import DEPLOYED, evaluate, parse_types


def run_sysnoise(ctx: typer.Context, options: dict) -> None:
    """Score every model of the command's ``options`` (by parameter name) under each noise
    type and print or store the results."""
    types, fmt, limit, seed = options["types"], options["fmt"], options["limit"], options["seed"]
    chosen = parse_types(types)
    devices = parse_devices(options["device"])
    _check_deployed(chosen, types is not None, fmt)
    targets = suite_targets(options, devices[0])
    images = eval_set(options["dataset"], limit, seed)
    spec = {"types": chosen, "devices": devices, "dataset": images.name, "limit": limit, "seed": seed}
    runs = []
    for target in targets:
        result, record = _run(ctx, target, images, spec, options["dataset"])
        runs.append((result, record))
        if not options["as_json"]:
            message(f"sysnoise on {len(images)} {images.name} images, types: {', '.join(chosen)}")
            _print_result(result, record)
    show_runs("system noise", runs, options, sysnoise_row)


def parse_devices(values: list[str] | None) -> list[str]:
    """Device names from repeated and comma-separated ``--device`` values, in order, unique.

    Raises:
        UsageError: an empty name (``--device ,``).
    """
    if not values:
        return [resolve_name(None)]
    names = [part.strip() for value in values for part in value.split(",")]
    if not all(names):
        raise UsageError("--device got an empty name", "e.g. --device local,arm64")
    return list(dict.fromkeys(names))


def _check_deployed(types: list[str], explicit: bool, fmt: str | None) -> None:
    """Precision and platform asked for by name need an artifact format."""
    asked = [t for t in types if t in DEPLOYED]
    if explicit and asked and fmt is None:
        raise UsageError(f"--types {','.join(asked)} needs a deployed artifact",
                         "add --format ort (or tflite, ...) and optionally --device")


def _cell(value, column: str) -> str:
    if value is None:
        return "—"
    if column in ("accuracy", "flip rate", "changed px"):
        return fmt_pct(value)
    if column == "dACC":
        return f"{value * 100:+.2f} pp"
    if isinstance(value, float):
        return f"{value:.3g}" if column != "SNI" else f"{value:+.3f}"
    return str(value)


def _print_table(table: dict) -> None:
    from rich.markup import escape
    from rich.table import Table

    view = Table(*table["columns"], title=escape(table["title"]), title_justify="left")
    for row in table["rows"]:
        status = row[table["columns"].index("status")] if "status" in table["columns"] else "ok"
        style = "dim" if status not in ("ok", "differs", "reference") else None
        view.add_row(*(escape(_cell(v, c)) for v, c in zip(row, table["columns"], strict=True)),
                     style=style)
    out.print(view)


def _print_result(result: dict, record) -> None:
    from rich.markup import escape

    for table in result["tables"]:
        _print_table(table)
    out.print("[bold]Summary[/]")
    clean = result["clean_accuracy"]
    if clean is not None:
        out.print(f"  reference accuracy: {fmt_pct(clean)}")
    for key, value in result["summary"].items():
        if key == "clean_accuracy" or key.endswith(".options"):
            continue
        shown = _cell(value, "dACC" if "dacc" in key else "flip rate" if "flip" in key or "agreement" in key
                      else "SNI" if "robustness" in key else "")
        out.print(f"  {escape(key)}: {escape(shown)}")
    for note in result["notes"]:
        out.print(f"[dim]• {escape(note)}[/]")
    out.print(f"record: {record.id[:8]}")


def _run(ctx, target, images, spec: dict, dataset: str):
    """One recorded sysnoise run of ``target``: ``(result, record)``."""
    chosen, devices = spec["types"], spec["devices"]
    with suite_context(ctx, target, dataset) as (store, workspace), spinner(
            f"sysnoise: {target.label} on {len(images)} {images.name} images…") as status:

        def work(provenance: dict) -> dict:
            # With --format, the deployed artifact (not PyTorch) scores the pre-processing
            # types: what the device computes on the perturbed pipeline is what counts.
            with deployed_if_format(target, workspace, provenance) as deployed:
                result, learned = evaluate(target, images, types=chosen, devices=devices,
                                           workspace=workspace, predictor=deployed,
                                           progress=status.update)
            if deployed is not None:
                result["notes"].append(f"pre-processing types scored by the deployed artifact "
                                       f"({deployed.name}, {deployed.queries} queries)")
            provenance.update(learned)
            return result

        return run_recorded(store, "robust-sysnoise", target, spec, work)
