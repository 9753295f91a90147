"""``aiot models``: the model zoo."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from aiot.converters import get_converter, user_converters
from aiot.converters.outputs import with_flat_outputs
from aiot.converters.sidecar import read_sidecar, sidecar_path
from aiot.converters.inputs import input_facts, integer_ranges
from aiot.converters.source import load_user_model
from aiot.core.errors import AiotError
from aiot.core.units import size_text
from aiot.host.cli._output import err, out, print_json, progress_enabled
from aiot.host.cli.options import JsonOpt
from aiot.host.engine.input_shapes import flat_shapes, free_dims_line, parse_shape_args
from aiot.host.engine.preflight import keras_as_tflite
from aiot.host.engine.signature import declared_reader, read_signature
from aiot.models.model_facts import complexities
from aiot.models.model_ref import DEFAULT_BINARY_FORMAT, default_format, resolve_model
from aiot.models.model_ref import ZOO as ZOO_KIND  # a reference's kind, not the zoo itself
from aiot.models.quant.deploy import deployment_refusal
from aiot.models.quant.methods import BITS, METHODS, Quantization

app = typer.Typer(no_args_is_help=True, help="The model zoo: architectures, inputs, complexity.")


def _describe(spec, facts: dict) -> dict:
    return {
        "name": spec.name, "family": spec.family, "variant": spec.variant, "paper": spec.paper,
        "input": spec.input.to_dict(), "num_classes": spec.num_classes,
        "params": facts["params"], "macs": facts["macs"],
        "reference_flops_m": spec.reference_flops_m, "description": spec.description,
    }


def _facts_with_progress(names: list[str]) -> dict:
    if not progress_enabled():
        return complexities(names)
    from rich.progress import Progress

    with Progress(console=err, transient=True) as progress:
        task = progress.add_task("counting parameters and MACs", total=None)
        return complexities(names, on_step=lambda n: progress.update(task, description=f"counting {n}"))


@app.command("list")
def list_models(
    paper: Annotated[str | None, typer.Option(help="Only models of one paper (AIoTBench, BiBench, RobustMQ, aiot).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List zoo models with input spec, parameters and MACs next to the papers' reference FLOPs."""
    from rich.table import Table

    from aiot.models import ZOO  # the zoo: torch

    specs = [s for s in ZOO if paper is None or s.paper.lower() == paper.lower()]
    facts = _facts_with_progress([s.name for s in specs])
    rows = [{**_describe(s, facts[s.name]), **_forms(s.name)} for s in specs]
    if as_json:
        print_json(rows)
        return
    table = Table("model", "paper", "input", "classes", "params (M)", "MACs (M)", "paper MACs (M)",
                  "default format")
    for r in rows:
        shape = "×".join(str(d) for d in r["input"]["shape"])
        ref = f"{r['reference_flops_m']:.0f}" if r["reference_flops_m"] else "—"
        table.add_row(r["name"], r["paper"], shape, str(r["num_classes"]), _millions(r["params"], 2),
                      _millions(r["macs"], 1), ref, r["default_format"])
    out.print(table)
    out.print(_forms_note())


def _forms(name: str) -> dict:
    """The model's default format, its ``<zoo>_<algorithm>`` names with theirs, its
    ``<zoo>_<method><bits>`` names (trained and described) and, of those, the ones that deploy
    as integer artifacts with the formats they deploy to (:func:`_deployed`)."""
    from aiot.models.bibench import ALGORITHMS

    return {"default_format": default_format(resolve_model(name)),
            "binarized": {f"{name}_{a}": default_format(resolve_model(f"{name}_{a}"))
                          for a in ALGORITHMS.names()},
            "quantized": [f"{name}_{m}{b}" for m in METHODS.names() for b in BITS],
            "quantized_deploys": {f"{name}_{q.suffix}": formats for q, formats in _deployed()}}


def _deployed() -> list[tuple[Quantization, list[str]]]:
    """Each quantization that deploys as an integer artifact, with the formats it deploys to,
    as :mod:`aiot.models.quant.deploy` decides (the others are measured in PyTorch)."""
    found = []
    for method in METHODS.names():
        for bits in BITS:
            chosen = Quantization(method, bits)
            formats = [c.name for c in user_converters() if not deployment_refusal(chosen, c.name)]
            if formats:
                found.append((chosen, formats))
    return found


def _forms_note() -> str:
    """How to name a binarized or quantized zoo model, your own files and code (under the
    table)."""
    from aiot.models.bibench import ALGORITHMS

    names = ALGORITHMS.names()
    lce = [a for a in names if default_format(resolve_model(f"tiny_vgg_{a}")) ==
           DEFAULT_BINARY_FORMAT]
    return (f"Binarized: <model>_<algorithm>, algorithm one of {', '.join(names)} (e.g. "
            f"resnet18_bnn); default format {DEFAULT_BINARY_FORMAT} for {', '.join(lce)}, else "
            "tflite.\nQuantized: <model>_<method><bits>, method one of "
            f"{', '.join(METHODS.names())}, bits {', '.join(map(str, BITS))} (e.g. resnet18_lsq4; "
            f"aiot train --quantize lsq:4); {_deployed_note()}.\nYour own model: --model FILE "
            "(.tflite, .onnx, .ort, .pte, .ptl, .dab, predict_net.pb, .pt2) or --model "
            "file.py:factory.")


def _deployed_note() -> str:
    """``lsq8 deploys as int8 to onnx, executorch, tflite (e.g. resnet18_mnist_lsq8); the
    others are measured in PyTorch``, from :func:`_deployed`."""
    deployed = _deployed()
    if not deployed:
        return "none deploys as an integer artifact yet (they are measured in PyTorch)"
    parts = [f"{q.suffix} deploys as int8 to {', '.join(formats)}" for q, formats in deployed]
    return (f"{'; '.join(parts)} (e.g. resnet18_mnist_{deployed[0][0].suffix}); the others are "
            "measured in PyTorch")


@app.command("info")
def info(model: Annotated[str, typer.Argument(
             help="Zoo model (resnet18, resnet18_bnn, resnet18_lsq4), an artifact file or "
                  "file.py:factory.")],
         binarize: Annotated[str | None, typer.Option(
             help="Also show this BiBench algorithm's binarized model: which layers, "
                  "deployability on LCE and daBNN, r_c and r_s.")] = None,
         input_shape: Annotated[list[str], typer.Option(
             "--input-shape", help="NAME=DxD (DxD for one): the inputs of a .ptl aiot did not make, or a "
                                   "factory's bare module.")] = [],  # noqa: B006 - Typer literal
         as_json: JsonOpt = False) -> None:
    """Show one model: input spec (layout, channel order, normalisation), size and MACs; for
    your own file or code, its inputs and outputs."""
    from rich.table import Table

    from aiot.models import get_model_spec  # the zoo: torch

    ref = resolve_model(keras_as_tflite(model), binarize, quantized_ok=True)
    if ref.kind != ZOO_KIND:
        _user_model_info(ref, flat_shapes(parse_shape_args(input_shape)), as_json)
        return
    spec, binarize = get_model_spec(ref.name), ref.binarize
    binarized = _binarized_facts(spec, binarize) if binarize else None
    row = _describe(spec, _facts_with_progress([spec.name])[spec.name])
    if binarized:
        row["binarized"] = binarized
    if ref.quantize:
        row["quantized"] = _quantized_facts(spec, ref.quantize)
    if as_json:
        print_json(row)
        return
    table = Table(show_header=False, title=f"model {spec.name}")
    table.add_column(style="bold")
    table.add_column()
    inp = row["input"]
    rows = [
        ("family / variant", f"{row['family']} / {row['variant']}"), ("paper", row["paper"]),
        ("input", f"{'×'.join(map(str, inp['shape']))} {inp['layout']} {inp['channel_order']}"),
        ("normalisation", f"mean {inp['mean']} std {inp['std']}"),
        ("classes", row["num_classes"]), ("parameters", _count(row["params"])),
        ("MACs", _count(row["macs"])),
        ("paper MACs", f"{row['reference_flops_m']:.0f} M" if row["reference_flops_m"] else "—"),
        ("about", row["description"]),
    ]
    if binarized:
        rows += _binarized_rows(binarized)
    if ref.quantize:
        rows += _quantized_rows(row["quantized"])
    for key, value in rows:
        table.add_row(key, str(value))
    out.print(table)


def _millions(count: int | None, digits: int) -> str:
    """``4.65`` for 4,652,008 at two digits; "—" for a model that could not be counted."""
    return "—" if count is None else f"{count / 1e6:.{digits}f}"


def _count(count: int | None) -> str:
    return "—" if count is None else f"{count:,}"


def _binarized_facts(spec, algorithm: str) -> dict:
    """What binarizing ``spec`` with ``algorithm`` gives: layers, verdicts, complexity."""
    from aiot.models.bibench import (
        binarized_complexity,
        binarized_layers,
        build_binarized,
        get_algorithm,
        verdicts,
    )

    algo = get_algorithm(algorithm)
    model = build_binarized(spec, algo.name)
    layers = [name for name, _ in binarized_layers(model)]
    complexity = binarized_complexity(spec, algo.name)
    return {**algo.to_dict(), "binarized_layers": layers,
            "deployability": [v.to_dict() for v in verdicts(algo)],
            "dabnn_deployed_form": _dabnn_form(spec, model, algo.name),
            "r_c": complexity.r_c, "r_s": complexity.r_s,
            "storage_bytes": complexity.storage_bytes}


def _quantized_facts(spec, option: str) -> dict:
    """What quantizing ``spec`` with ``option`` (``lsq:4``) gives: method, layers kept in float."""
    from aiot.models.quant import build_quantized, parse_quantize, quantized_layers

    chosen = parse_quantize(option)
    model = build_quantized(spec, chosen)
    layers = quantized_layers(model)
    formats = dict(_deployed()).get(chosen, [])
    return {**METHODS.get(chosen.method).to_dict(), "bits": chosen.bits,
            "quantized_layers": [name for name, _ in layers],
            "quantizer_params": sum(layer.quantizer_params() for _, layer in layers),
            "deploys_to": formats, "deployment": (f"as int8 to {', '.join(formats)}" if formats
                                                  else deployment_refusal(chosen))}


def _quantized_rows(facts: dict) -> list[tuple[str, str]]:
    layers = facts["quantized_layers"]
    shown = ", ".join(layers[:4]) + (f", … ({len(layers)} in all)" if len(layers) > 4 else "")
    return [("quantized with", f"{facts['title']} ({facts['paper']}), {facts['bits']} bits"),
            ("weights / activations", f"{facts['weights']} / {facts['activations']}"),
            ("quantized layers", f"{shown} (first and last stay full precision; "
                                 f"{facts['quantizer_params']} learned step/clip values)"),
            ("deploys", facts["deployment"])]


def _binarized_rows(facts: dict) -> list[tuple[str, str]]:
    layers = facts["binarized_layers"]
    shown = ", ".join(layers[:4]) + (f", … ({len(layers)} in all)" if len(layers) > 4 else "")
    rows = [("binarized with", (f"{facts['title']} ({facts['paper']}): scale {facts['scale']}, "
                               f"gradient {facts['gradient']}")),
            ("binarized layers", shown),
            ("r_c / r_s", (f"{facts['r_c']:.2f} / {facts['r_s']:.2f} "
                          f"(storage {size_text(facts['storage_bytes'])})"))]
    for v in facts["deployability"]:
        rows.append((f"deploys to {v['library']}", f"{v['deployable']}: {v['reason']}"))
    form = facts.get("dabnn_deployed_form")
    if form:
        rows.append(("daBNN deployed form", f"{form['summary']} (why: {form['why']}; the "
                     "sidecar of `aiot convert --format dabnn` has its measured parity)"))
    return rows


def _dabnn_form(spec, model, algorithm: str) -> dict | None:
    """How daBNN's deployed form differs from the training graph (None: it does not, or the
    algorithm does not reach daBNN): the clamps a float layer reads, which daBNN drops."""
    import torch

    from aiot.converters.dabnn.form import deployed_form, describe
    from aiot.models.bibench import freeze, verdict

    if verdict(algorithm, "dabnn").refused:
        return None
    example = torch.zeros(spec.input.batch_shape(1))
    try:
        _model, facts = deployed_form(freeze(model, "dabnn", example), example)
    except AiotError:  # not lowerable for daBNN: the convert command says why
        return None
    return facts and {**facts, "summary": describe(facts)}


def _user_model_info(ref, shapes: dict, as_json: bool) -> None:
    """A user's artifact (its inputs and outputs, read by its runtime) or code (its example)."""
    from rich.markup import escape
    from rich.table import Table

    facts = {"model": ref.name, **ref.source(), **_user_facts(ref, shapes)}
    if as_json:
        print_json(facts)
        return
    table = Table("", "name", "shape", "dtype", "quantization", title=f"model {escape(ref.label())}"
                  + (f" ({ref.format})" if ref.format else ""))
    for kind in ("inputs", "outputs"):
        for io in facts.get(kind) or []:
            quant = io.get("quantization")
            dtype = io["dtype"] + (f" in [{io['range'][0]}, {io['range'][1]}) ({io['range_from']})"
                                   if io.get("range") else "")
            table.add_row(kind[:-1], escape(io["name"]), _dims(io["shape"]), escape(dtype),
                          f"scale {quant['scale']:.4g}, zero {quant['zero_point']}" if quant else "—")
    out.print(table)
    if facts.get("note"):
        out.print(escape(facts["note"]))
    if ref.is_artifact and free_dims_line(facts.get("inputs"), ref.path):
        out.print(escape(free_dims_line(facts.get("inputs"), ref.path)))
    if facts.get("params") is not None:
        out.print(f"parameters: {facts['params']:,}")
    if facts.get("deployed_form"):
        from aiot.converters.dabnn.form import describe

        form = facts["deployed_form"]
        out.print(f"deployed form differs from the training graph: {escape(describe(form))}; "
                  f"parity against PyTorch with the same change: binary-layer signs agree "
                  f"≥ {form['parity_signs_min']:.2%}" if form.get("parity_signs_min") is not None
                  else f"deployed form: {escape(describe(form))}")


def _user_facts(ref, shapes: dict) -> dict:
    if ref.is_artifact:
        converter = get_converter(ref.format)
        backend = converter.backend
        describe = converter.describe  # an emit-only format aiot can read (None: cannot)
        if backend is None and describe is not None:  # ArtifactError: not a model of its format
            return {**describe(ref.path), **_sidecar_form(ref.path)}
        if backend is None:
            return {"inputs": None, "outputs": None,
                    "note": f"{ref.format} is emit-only: no runtime here reads its inputs",
                    **_sidecar_form(ref.path)}
        if backend == "pytorch_mobile" and shapes:  # a lite module declares no inputs
            found = read_signature(backend, ref.path, ref.sha256, json.dumps(shapes))
        else:
            found = read_signature(backend, ref.path, ref.sha256)
        if declared_reader(backend) is not None:  # says what it read, and what it did not
            found = {**found, "note": f"read from the file's own tables: the {backend} runtime "
                                      "first loads it when it runs"}
        return {**_sidecar_form(ref.path), **found}

    user = load_user_model(ref, shapes)
    model, outputs = with_flat_outputs(user.model, user.example, ref.name)
    inputs = input_facts(user.example, user.names, integer_ranges(model, user.example))
    return {"inputs": [{"name": i["name"], "shape": [i["batch"], *i["shape"]], "dtype": i["dtype"],
                        "quantization": None, **({"range": i["range"], "range_from": i["range_from"]}
                                                 if "range" in i else {})} for i in inputs],
            "outputs": outputs, "params": sum(p.numel() for p in user.model.parameters())}


def _sidecar_form(path) -> dict:
    """``{"deployed_form": …}`` from the artifact's sidecar where its graph differs from the
    training graph (a daBNN file with clamps dropped), with the parity measured on it."""
    if not sidecar_path(path).exists():
        return {}
    sidecar = read_sidecar(path)
    form = sidecar.get("deployed_form")
    named = [o["name"] for o in sidecar.get("outputs") or []]
    note = {"note": f"the model's outputs, in this order: {', '.join(named)} (the file's own "
                    "names may differ)"} if named else {}
    if not form:
        return note
    signs = (sidecar.get("parity") or {}).get("signs") or {}
    return {**note, "deployed_form": {**form, "parity_signs_min": signs.get("min_sign_agreement")}}


def _dims(shape) -> str:
    return "×".join("?" if d is None or d < 0 else str(d) for d in shape) or "scalar"
