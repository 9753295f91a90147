"""``--bits``: one robustness suite over a quantized model's bit-widths (RobustMQ's sweep; the
option itself is :data:`aiot.host.cli.robust_options.Bits`).

``aiot robust attack -m tiny_cnn_lsq4 --bits 2,4,8`` runs the suite once per width, as
``tiny_cnn_lsq2``, ``tiny_cnn_lsq4`` and ``tiny_cnn_lsq8`` (each its own record, with the
newest ``aiot train --quantize`` of that width), then prints one row per width with the
suite's headline metrics: AR, AAI and WCAR for attacks, mNR/NCI/mFP for corruptions, dACC
and the std of SNI (systematic robustness) for system noise.
"""

from __future__ import annotations

import math
from pathlib import Path

from aiot.converters.api import zoo_ref
from aiot.core.errors import UsageError
from aiot.host.cli._output import out, print_json
from aiot.host.robust import metrics
from aiot.models.quant.methods import quantization


def bit_models(model: str, bits: str | None, weights: Path | None) -> list[str]:
    """The models a suite runs: ``model`` alone, or with ``--bits`` the same quantized zoo
    model at each width (``tiny_cnn_lsq2``, ...), every width checked before any work.

    Raises:
        UsageError: ``--bits`` on a model that is not quantized, a width RobustMQ lacks, or
            ``--weights`` (one file) for several widths.
    """
    if bits is None:
        return [model]
    ref = zoo_ref(model, None, quantized_ok=True)
    if not ref.quantize:
        raise UsageError(f"--bits sweeps a quantized model's bit-width; {model} is not quantized",
                         f"name its method, e.g. -m {ref.name}_lsq4 --bits {bits}")
    method = ref.quantize.partition(":")[0]
    widths = [quantization(method, part.strip()) for part in bits.split(",") if part.strip()]
    if not widths:
        raise UsageError("--bits takes comma-separated bit-widths, got nothing", "e.g. --bits 2,4,8")
    if weights is not None and len(widths) > 1:
        raise UsageError("--weights names one width's weights, not one per bit-width",
                         "drop --weights: each width runs with its newest aiot train --quantize")
    return [f"{ref.name}_{q.suffix}" for q in dict.fromkeys(widths)]


def _pct(value) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.2%}"


def _num(value) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def attack_row(result: dict) -> dict[str, str]:
    """Clean accuracy, AR and AAI per attack, WCAR, for the reference (and the deployment)."""
    summary, row = result["summary"], {}
    names = [r[0] for r in result["tables"][0]["rows"]]
    for label in ("reference", "deployed"):
        clean = summary.get(f"clean_{label}")
        if clean is None:
            continue
        where = "" if label == "reference" else " (deployed)"
        row[f"clean{where}"] = _pct(clean)
        for name in dict.fromkeys(names):
            ar = summary.get(f"{name}_{label}")
            row[f"{name} AR{where}"] = _pct(ar)
            row[f"{name} AAI{where}"] = _num(None if ar is None else metrics.aai(clean, ar))
        row[f"WCAR{where}"] = _pct(summary.get(f"wcar_{label}"))
    return row


def corrupt_row(result: dict) -> dict[str, str]:
    """Clean accuracy, mNR, mean NCI and mFP (what the suite measured)."""
    summary = result["summary"]
    return {label: (_pct if key != "mean_NCI" else _num)(summary.get(key))
            for key, label in (("clean_accuracy", "clean"), ("mNR", "mNR"),
                               ("mean_NCI", "mean NCI"), ("mFP", "mFP")) if key in summary}


def sysnoise_row(result: dict) -> dict[str, str]:
    """Clean accuracy, mean dACC per noise type and systematic robustness (std of SNI)."""
    row = {"clean": _pct(result.get("clean_accuracy"))}
    for key, value in result["summary"].items():
        kind, _, name = key.partition(".")
        if name == "dacc_mean":
            row[f"{kind} dACC"] = "—" if value is None else f"{value * 100:+.2f} pp"
        elif name.startswith("systematic_robustness"):
            case = name[len("systematic_robustness"):].lstrip("_")
            row[f"{kind}{' ' + case if case else ''} SNI std"] = _num(value)
    return row


def show_runs(suite: str, runs: list[tuple[dict, object]], options: dict, row) -> None:
    """What a suite ends with: ``--json``'s answer (the one run, or every width's as
    ``{"sweep": [...]}``), or under ``--bits`` the table of :func:`print_sweep`."""
    if options["as_json"]:
        shown = [{**result, "record": record.id} for result, record in runs]
        print_json(shown[0] if options["bits"] is None else {"sweep": shown})
    elif options["bits"] is not None:
        print_sweep(suite, runs, row)


def print_sweep(suite: str, runs: list[tuple[dict, object]], row) -> None:
    """One table row per bit-width: ``runs`` are ``(result, record)``, ``row`` the suite's
    ``*_row`` function."""
    from rich.table import Table

    rows = [(result.get("quantization") or {}, record, row(result)) for result, record in runs]
    columns = list(dict.fromkeys(c for _, _, cells in rows for c in cells))
    table = Table("method", "bits", *columns, "record", title=f"{suite} over bit-widths")
    for quant, record, cells in rows:
        table.add_row(str(quant.get("method", "—")), str(quant.get("bits", "—")),
                      *(cells.get(c, "—") for c in columns), record.id[:8])
    out.print(table)
