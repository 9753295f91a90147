"""``aiot convert``: PyTorch model → on-device artifact with sidecar and parity report."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from aiot.converters import api, format_table
from aiot.converters.keras import is_keras_file, tflite_of
from aiot.converters.inputs import InputFeed
from aiot.converters.matrix import convert_all
from aiot.core import stage_limit
from aiot.core.errors import UsageError
from aiot.core.fileio import atomic_path
from aiot.core.units import size_text
from aiot.host.cli._output import message, out, print_json, spinner, state
from aiot.host.cli.options import Binarize, JsonOpt, Opt, parse_options
from aiot.host.cli.record_view import nonfinite_text, outputs_parity_text
from aiot.host.engine.input_shapes import flat_shapes, parse_shape_args
from aiot.host.engine.input_values import parse_value_args
from aiot.host.engine.preflight import announce_weights
from aiot.host.engine.weights import choose_weights
from aiot.models.model_ref import default_format, resolve_model


def _print_format_table(as_json: bool) -> None:
    rows = format_table()
    if as_json:
        print_json(rows)
        return
    table = Table("format", "file", "runs on", "available", "description")
    for r in rows:
        status = "[green]yes[/]" if r["available"] else f"[red]no[/] — {r['reason']}" + (
            f" ({r['hint']})" if r.get("hint") else "")
        description = r["description"] + (f" [dim](limits: {r['limits']})[/]" if r.get("limits") else "")
        table.add_row(r["name"], r["extension"], r["backend"] or "emit-only", status, description)
    out.print(table)


def convert(
    model: Annotated[str | None, typer.Argument(
        help="Zoo model (resnet18), binarized zoo model (resnet18_bnn), a .pt2 program or "
             "your code as file.py:factory or module:factory.")] = None,
    fmt: Annotated[str | None, typer.Option("--format", "-f", help="Artifact format (see --list; default: lce for a binarized model LCE deploys, else tflite).")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Output folder (default: <results>/artifacts).")] = None,
    weights: Annotated[Path | None, typer.Option(help="State-dict file to load (default: the newest aiot train of the model, else its packaged weights, else a seeded random init).")] = None,
    binarize: Binarize = None,
    opt: Opt = None,
    input_shape: Annotated[list[str], typer.Option("--input-shape", help="DxD (or NAME=DxD, repeated for several inputs): the example input of a factory that returns a bare module (float32).")] = [],  # noqa: B006 - Typer needs a literal default
    input_value: Annotated[list[str], typer.Option("--input-value", metavar="NAME=NUMBER", help="Hold input NAME at NUMBER in the parity check (a sample rate, a mode flag); the sidecar says so.")] = [],  # noqa: B006
    inputs: Annotated[Path | None, typer.Option("--inputs", metavar="FILE.npz", help="Real inputs for the parity check instead of noise: one batch per input name, batch first, in each input's dtype.")] = None,
    list_formats: Annotated[bool, typer.Option("--list", help="List formats and their availability.")] = False,
    timeout_s: Annotated[str | None, typer.Option(
        "--timeout-s", metavar="SECONDS",
        help="Seconds each stage of a conversion (load, export, parity) may take before its "
             f"child process is killed and the conversion fails (default: ${stage_limit.ENV}, "
             f"else {stage_limit.DEFAULT_S:g}).")] = None,
    as_json: JsonOpt = False,
    ctx: typer.Context = None,
) -> None:
    """Convert a model into an artifact, check parity with PyTorch and write a sidecar.

    The model is a zoo name (resnet18, resnet18_bnn), a torch.export .pt2 program file, or
    your own code: a file.py:factory or module:factory returning an nn.Module (or the module
    and its example inputs). A Keras file (.keras, .h5) converts to tflite with TensorFlow. An artifact file (.tflite, .onnx, ...) needs no conversion:
    aiot run --model FILE measures it as it is.
    """
    if list_formats:
        _print_format_table(as_json)
        return
    if not model:
        raise UsageError("convert needs a MODEL", "e.g. aiot convert resnet18 --format tflite")
    if timeout_s is not None:  # checked now; the variable reaches every stage (and thread)
        stage_limit.parse_limit(timeout_s, "--timeout-s")
    with _variable(stage_limit.ENV, timeout_s), _stopped_words(f"the conversion of {model}"):
        stage_limit.limit_s()  # a bad AIOT_CONVERT_TIMEOUT_S: one line before any work
        feed = InputFeed(parse_value_args(input_value), _npz(inputs), strict=True)
        _convert(model, fmt, out_dir or state(ctx).results_dir() / "artifacts", weights,
                 binarize, opt, input_shape, as_json, feed)


@contextlib.contextmanager
def _variable(name: str, value: str | None):
    """``name=value`` in the environment for the block (unchanged when ``value`` is None)."""
    if value is None:
        yield
        return
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def _npz(path: Path | None) -> str | None:
    """``--inputs``' file, checked to exist (its arrays are checked against the model's
    inputs once the model is loaded)."""
    if path is None:
        return None
    if not path.expanduser().is_file():
        raise UsageError(f"--inputs {path}: no such file", "give an .npz saved with numpy.savez")
    return str(path.expanduser())


def _convert(model: str, fmt: str | None, out_dir: Path, weights: Path | None,
             binarize: str | None, opt, input_shape: list[str], as_json: bool,
             feed: InputFeed) -> None:
    """:func:`convert` once its options are checked."""
    if is_keras_file(model):
        with _stopped_words(f"the conversion of {Path(model).name} to tflite"):
            _convert_keras(Path(model).expanduser(), fmt, out_dir, as_json)
        return
    shapes = flat_shapes(parse_shape_args(input_shape))
    ref = resolve_model(model, binarize, quantized_ok=True)  # convert_model says where it deploys
    if fmt is None:
        fmt = default_format(ref)
        message(f"format: {fmt} (the default for {model}; --format names another)")
    weights = _weights(ref, weights)
    if fmt == "all":
        with _stopped_words(f"converting {model} to every format", every=out_dir):
            _convert_all(model, out_dir, weights, parse_options(opt), as_json, binarize, shapes,
                         feed)
        return
    with _stopped_words(f"the conversion of {model} to {fmt}"), \
            spinner(f"converting {model} to {fmt}…"):
        # The reference resolved above: the user's file is not read and hashed again.
        res = api.convert_model(ref, fmt, out_dir, weights=weights, options=parse_options(opt),
                                binarize=binarize, input_shapes=shapes or None, feed=feed)
    deployed = res.facts.get("deployed_form")  # the sidecar as written: not read back
    report = {
        "artifact": str(res.artifact), "sidecar": str(res.sidecar), "sha256": res.sha256,
        "size_bytes": res.size_bytes, "seconds": res.seconds, "cached": res.cached, "parity": res.parity,
        **({"deployed_form": deployed} if deployed else {}),
    }
    if as_json:
        print_json(report)
        return
    p = res.parity
    out.print(f"[green]✓[/] {escape(str(res.artifact))} ({size_text(res.size_bytes)}"
              f"{', cached' if res.cached else f', {res.seconds:.1f} s'})")
    if deployed:  # the runtime runs a changed graph: say so before any parity figure
        from aiot.converters.dabnn.form import describe as describe_form  # here: it imports torch

        out.print(f"  [yellow]deployed form differs from the training graph[/]: "
                  f"{escape(describe_form(deployed))}")
    if p:
        out.print(f"  parity vs PyTorch{' (deployed form)' if deployed else ''}: {_parity_line(p)}")


@contextlib.contextmanager
def _stopped_words(what: str, every: Path | None = None):
    """Ctrl-C, SIGTERM, SIGHUP during ``what``: the words say what it left (a conversion
    writes its artifact whole or not at all, and no record; :func:`api.convert_model`)."""
    try:
        yield
    except KeyboardInterrupt as exc:
        if getattr(exc, "said", None):  # said by an inner block, which knew more
            raise
        how = getattr(exc, "reason", None) or "interrupted"
        if every is not None:
            left = (f"the formats converted before it are kept in {every}; the one in progress "
                    "wrote nothing")
        elif getattr(exc, "converted", None) is not None:
            left = f"its artifact was complete and is kept: {exc.converted}"
        else:
            left = "nothing was written (no artifact, no record)"
        exc.said = f"{how}: {what} stopped; {left}"
        raise


def _convert_keras(path: Path, fmt: str | None, out_dir: Path, as_json: bool) -> None:
    """A Keras file to ``out_dir/NAME.tflite`` (TensorFlow's converter, parity vs Keras)."""
    if fmt not in (None, "tflite"):
        raise UsageError(f"{path.name} is a Keras model: aiot converts it to tflite only",
                         f"aiot convert {path.name} -f tflite")
    with spinner(f"converting {path.name} to tflite with TensorFlow (lce toolchain)…"), \
            stage_limit.stage(f"{path.name} to tflite", "export"):
        done = tflite_of(path)
    out_dir.mkdir(parents=True, exist_ok=True)
    artifact = out_dir / done.artifact.name
    with atomic_path(artifact) as tmp:  # whole or not at all: a stop leaves nothing half-copied
        shutil.copyfile(done.artifact, tmp)
    size = artifact.stat().st_size
    if as_json:
        print_json({"artifact": str(artifact), "size_bytes": size, "seconds": done.seconds,
                    "cached": done.cached, "parity": done.parity})
        return
    out.print(f"[green]✓[/] {escape(str(artifact))} ({size_text(size)}"
              f"{', cached' if done.cached else f', {done.seconds:.1f} s'})")
    out.print(f"  parity vs Keras: max |diff| {done.parity['max_abs_diff']:.2g} on "
              f"{', '.join(i['name'] for i in done.parity['inputs'])} (tolerance "
              f"{done.parity['tolerance']:g} of each output's scale)")


def _weights(ref, weights: Path | None) -> Path | None:
    """``--weights``, else what a run of the model would use (the newest ``aiot train`` of
    it), said on stderr: the artifact ``run`` measures is then this very one."""
    if ref.is_artifact:
        return weights  # convert_model refuses it in one line
    picked = choose_weights(ref, weights)
    announce_weights([(ref.name, ref.binarize, picked)], None)
    return picked.path


def _parity_line(p: dict) -> str:
    # Where top-1 agreement is the rule (int8, binarized in a float runtime), the logits'
    # error is shown for information: a "tol" beside it would read as a limit it breaks.
    atol = ("not judged" if p.get("min_top1") is not None
            else f"tol {p['atol']:.0e}" if p.get("atol") is not None else "tol —")
    inconclusive = p.get("inconclusive")
    line = "" if not inconclusive else (
        f"[yellow]inconclusive[/]: {escape(inconclusive['reason'])}\n  fix: "
        f"{escape(inconclusive['fix'])}\n  ")
    line += (f"{p['n']} noise inputs: max abs {p['max_abs']:.2e} ({atol}), max rel "
            f"{p['max_rel']:.2e}, top-1 agreement {p['top1_agreement']:.0%}")
    if p.get("nonfinite"):  # the model's own NaN/Inf, matched place by place
        line += f"; {nonfinite_text(p['nonfinite'])}"
    if p.get("outputs"):  # several outputs: the figures above are all of them together
        line += f"\n  {escape(outputs_parity_text(p))}"
    data = p.get("dataset")
    if data:
        line += f"; {data['n']} {data['name']} images: top-1 agreement {data['top1_agreement']:.0%}"
    if p.get("min_top1") is not None:  # the rule counts images: say how many agreed
        where = data or p
        line += (f" ({round(where['top1_agreement'] * where['n'])} of {where['n']}, "
                 f"required ≥ {p['min_top1']:.0%})")
    signs = p.get("signs")
    if signs:  # a binarized artifact: the signs decide, the logits are information
        line += (f"\n  binary layers: signs agree ≥ {signs['min_sign_agreement']:.2%} in all "
                 f"{len(signs['binary_layers'])} (required: first ≥ "
                 f"{signs['required_first_layer']:.0%}, then ≤ {signs['max_drop_per_layer']:.0%} "
                 f"below the layer before, ≥ {signs['required_sign_agreement']:.0%}); logits "
                 "not judged (binarized)")
    return line


def _convert_all(model: str, out_dir: Path, weights: Path | None, options: dict, as_json: bool,
                 binarize: str | None = None, input_shapes: dict | None = None,
                 feed: InputFeed | None = None) -> None:

    with spinner(f"converting {model} to every format…") as status:
        rows = convert_all(model, out_dir, weights, options, binarize=binarize,
                           progress=lambda fmt: status.update(f"converting {model} to {fmt}…"),
                           input_shapes=input_shapes or None, feed=feed)
    if as_json:
        print_json(rows)
    else:
        colour = {"ok": "green", "unsupported": "yellow", "unavailable": "yellow", "failed": "red"}
        # max rel too: an untrained deep net's logits can reach 1e11, where abs errors of 1e6
        # are float32 rounding
        table = Table("format", "status", "size", "max abs err", "max rel err",
                      "top-1 agree (noise/images)", "seconds", "runs on",
                      title=f"{model} in every format")
        for r in rows:
            state_text = f"[{colour[r['status']]}]{r['status']}[/]"
            if r.get("parity_verdict") == "inconclusive":  # reason: why, in the row
                state_text = "[yellow]ok, parity inconclusive[/]"
            if r["reason"]:
                state_text += f": {escape(r['reason'])}"
            agree = "—" if r["top1_agreement"] is None else (
                f"{r['top1_agreement']:.0%} / " + ("—" if r["dataset_top1_agreement"] is None
                                                    else f"{r['dataset_top1_agreement']:.0%}"))
            table.add_row(r["format"], state_text,
                          size_text(r["size_bytes"]),
                          "—" if r["max_abs"] is None else f"{r['max_abs']:.1e}",
                          "—" if r["max_rel"] is None else f"{r['max_rel']:.1e}", agree,
                          "—" if r["seconds"] is None else f"{r['seconds']:.1f}", r["runs_on"])
        out.print(table)
    if any(r["status"] == "failed" for r in rows):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("convert")(convert)
