"""Every binarized zoo model that BiBench's Table 4 lets LCE or daBNN deploy, converted from
its default (seeded) init, judged by sign agreement per binary layer.

For each zoo model with binarizable layers, each algorithm Table 4 does not refuse for the
library, and each of lce / dabnn: ``aiot convert`` through the same code path, one row with
the status (ok / unsupported: the model's structure is outside what the emitter can write,
e.g. daBNN's BatchNorm-after-every-binary-conv rule / failed), the lowest per-layer sign
agreement, the logits' max abs error (information only for binarized artifacts) and the
conversion time. A daBNN row whose artifact runs a deployed form that differs from the
training graph (clamps a float layer reads, dropped) says "(deployed form)", and its JSON row
carries the change and its cost against the training graph. Writes ``bench/out/<out>.json`` after every row, so an interrupted run keeps
what it measured.

Usage: ``python bench/binary_parity.py [--models all|a,b] [--formats lce,dabnn]
[--algorithms bnn,...] [--out binary-parity]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_json  # noqa: E402


def binarizable_models(choice: str) -> list[str]:
    """Zoo models with at least one layer BiBench binarizes (others have nothing to test)."""
    from aiot.models import get_model_spec, model_specs
    from aiot.models.bibench import binarizable_layers

    names = [s.name for s in model_specs()] if choice == "all" else choice.split(",")
    return [n for n in names if binarizable_layers(get_model_spec(n).build())]


def deployable(algorithms: list[str], fmt: str) -> list[str]:
    from aiot.models.bibench import verdict

    return [a for a in algorithms if not verdict(a, fmt).refused]


def main() -> int:
    from aiot.converters.matrix import convert_row
    from aiot.models.bibench import ALGORITHMS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="all")
    parser.add_argument("--formats", default="lce,dabnn")
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS.names()))
    parser.add_argument("--out", default="binary-parity")
    args = parser.parse_args()
    rows, table = [], []
    with tempfile.TemporaryDirectory(prefix="aiot-bench-bnn-") as tmp:
        for model in binarizable_models(args.models):
            for fmt in args.formats.split(","):
                for algorithm in deployable(args.algorithms.split(","), fmt):
                    started = time.perf_counter()
                    row = convert_row(model, fmt, Path(tmp), None, {}, None, algorithm)
                    signs = _signs(row)
                    rows.append({"model": model, "algorithm": algorithm, **row, **signs,
                                 "wall_s": time.perf_counter() - started})
                    status = row["status"] + (" (deployed form)" if signs["deployed_form"] else "")
                    table.append([model, algorithm, fmt, status,
                                  _pct(signs["min_sign_agreement"]), str(signs["binary_layers"] or "—"),
                                  "—" if row["max_abs"] is None else f"{row['max_abs']:.2g}",
                                  f"{rows[-1]['wall_s']:.0f}", (row["reason"] or "")[:70]])
                    print(" ".join(table[-1][:6]), flush=True)
                    write_json(args.out, {"rows": rows})
    print_table(["model", "algorithm", "format", "status", "min sign agree", "binary layers",
                 "logits max abs", "s", "reason"], table)
    failed = [r for r in rows if r["status"] == "failed"]
    print(f"\n{len(rows)} conversions: {sum(r['status'] == 'ok' for r in rows)} ok, "
          f"{sum(r['status'] == 'unsupported' for r in rows)} unsupported, {len(failed)} failed")
    return 1 if failed else 0


def _signs(row: dict) -> dict:
    """The sign report of a converted row's sidecar (None where it did not convert)."""
    if row["status"] != "ok":
        return {"min_sign_agreement": None, "binary_layers": None, "deployed_form": None}
    from aiot.converters.sidecar import read_sidecar

    sidecar = read_sidecar(Path(row["artifact"]))
    signs = (sidecar.get("parity") or {}).get("signs") or {}
    form = sidecar.get("deployed_form")  # daBNN: clamps a float layer reads, dropped (said)
    return {"min_sign_agreement": signs.get("min_sign_agreement"),
            "binary_layers": len(signs.get("binary_layers") or []),
            "per_layer": [layer["sign_agreement"] for layer in signs.get("binary_layers") or []],
            "deployed_form": form and {k: form[k] for k in ("change", "modules", "training_graph")
                                       if k in form}}


def _pct(value) -> str:
    return "—" if value is None else f"{value:.2%}"


if __name__ == "__main__":
    sys.exit(main())
