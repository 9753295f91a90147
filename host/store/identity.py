"""What one stored run is: its configuration, its key, its label and its latency, in one place.

Every view of stored runs groups and names them through this module: the sweep table
(:mod:`aiot.host.cli.sweep_view`), the report (:mod:`aiot.host.report.build` and its first
screen and plots), ``results compare`` and the leaderboards (:mod:`aiot.host.store.compare`),
BiBench's tables and OM_infer (:mod:`aiot.host.engine.bibench_hw`,
:mod:`aiot.host.scores.om_infer`), the profile tables and the campaign's resume key. So two
runs are "the same configuration" in one view exactly when they are in every other: an int8
run, a ``--via app`` run and the float run of one model never merge anywhere.

* **Configuration** (:class:`Configuration`): what sets one measurement apart, less its
  thread count: device, model (as the record names it, with the BiBench algorithm it was
  binarized with: ``--model resnet18_bnn``), format, native tool, delegate, CPU cluster, how
  the agent was started (``via``: None for ``adb shell``, the default), the requested input
  shapes and the converter options (``--opt quant=int8``). Timing parameters, weights, the
  data set and the binary's path are not part of it: they change how well a configuration
  is measured, not what is measured (``results compare`` checks artifacts' hashes and lists
  differing parameters).
* **Key** (:func:`key`): the configuration and the thread count. A thread count is a point
  *of* a configuration: the sweep table's speed-up is a key's latency over the same
  configuration's at 1 thread, the report's first screen shows each configuration's best
  thread count, ``results compare`` pairs runs per key, leaderboards rank keys.
* **Label** (:func:`label`, :func:`variant`, :func:`model_label`): how a key is written,
  ``resnet18_bnn · tflite[quant=int8] · benchmark_model · 4t on big via app @ phone``.
* **Latency** (:func:`latency`): an ok run's median, else its mean (native tools that print
  a mean only). A median of 0.0 is a value, not a missing one: whether it is believable is
  the validity check's business (:mod:`aiot.host.engine.validity`), not each view's.
* **Request key** (:func:`request_key`): the campaign's resume key, a digest of the whole run
  spec (timing parameters, weights and data set included): a sweep redoes a run unless
  exactly that request has an ok record. Its bytes are those of every store written so far
  (changing them would redo finished sweeps); records of one request key share one key.

Here, in the store rather than the engine: a configuration is a fact of a stored record (its
columns and spec), every view reads records, and the store is below the engine (the engine
writes records; the store imports no engine module for this), so the store's own views
(``results compare``) use it without an upward import.
"""

from __future__ import annotations

import hashlib
import json
from typing import NamedTuple

from aiot.models.model_ref import model_label

__all__ = [
    "KEY_FIELDS",
    "Configuration",
    "Key",
    "Latency",
    "configuration",
    "dims_text",
    "format_label",
    "key",
    "key_fields",
    "label",
    "latency",
    "latency_ms",
    "model_label",
    "record_shapes",
    "request_key",
    "shape_label",
    "shapes_label",
    "sort_key",
    "variant",
]

SHELL = "shell"  # how the agent starts unless --via says otherwise (specs leave it out)
#: The record columns a key reads (each falls back to the spec's entry of that name) and the
#: spec entries it reads besides: what the store's facts (:mod:`aiot.host.store.facts`)
#: keep of a record so that :func:`key` makes its key again without the record.
KEY_COLUMNS = ("device", "model", "format", "threads")
KEY_SPEC = ("binarize", "native", "delegate", "cluster", "via", "input_shapes", "options")


class Configuration(NamedTuple):
    """What sets one measurement apart, less its thread count (see the module's doc).

    Values are hashable: ``input_shapes`` as ``((input, dims), ...)`` sorted by input,
    ``options`` as sorted ``((key, value), ...)``; None where the run used the default.
    """

    device: str | None
    model: str | None
    binarize: str | None
    format: str | None
    native: str | None
    delegate: str | None
    cluster: str | None
    via: str | None  # None: adb shell (the default), else e.g. "app"
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] | None
    options: tuple[tuple[str, str], ...] | None

    @property
    def model_label(self) -> str | None:
        """The model as ``--model`` names it (``resnet18_bnn``)."""
        return model_label(self.model, self.binarize)


class Key(NamedTuple):
    """A configuration at one thread count: what one run measures."""

    configuration: Configuration
    threads: int | None


#: The fields of a key as :func:`key_fields` names them (``results compare``'s columns).
KEY_FIELDS = (*Configuration._fields, "threads")


class Latency(NamedTuple):
    """A run's latency and the statistic it is (``median``, or ``mean``)."""

    stat: str
    ms: float


def _spec(run) -> dict:
    """A stored record's spec, or a run request's (anything with ``to_spec()``)."""
    spec = getattr(run, "spec", None)
    if spec is None and hasattr(run, "to_spec"):
        spec = run.to_spec()
    return spec if isinstance(spec, dict) else {}


def _column(run, spec: dict, name: str):
    """A record's column (device, model, format, threads), else the spec's value."""
    value = getattr(run, name, None)
    return value if value is not None else spec.get(name)


def _shapes(value) -> tuple | None:
    if not isinstance(value, dict) or not value:
        return None
    return tuple(sorted((str(name), tuple(dims) if isinstance(dims, (list, tuple)) else (dims,))
                        for name, dims in value.items()))


def _options(value) -> tuple | None:
    if not isinstance(value, dict) or not value:
        return None
    return tuple(sorted((str(k), str(v)) for k, v in value.items()))


def configuration(run) -> Configuration:
    """The configuration of a stored record (or of a run request: its spec is a record's)."""
    spec = _spec(run)
    via = spec.get("via")
    return Configuration(
        device=_column(run, spec, "device"), model=_column(run, spec, "model"),
        binarize=spec.get("binarize") or None, format=_column(run, spec, "format"),
        native=spec.get("native") or None, delegate=spec.get("delegate") or None,
        cluster=spec.get("cluster") or None, via=None if via in (None, "", SHELL) else via,
        input_shapes=_shapes(spec.get("input_shapes")), options=_options(spec.get("options")))


def key(run) -> Key:
    """The configuration and thread count of a record (or request)."""
    return Key(configuration(run), _column(run, _spec(run), "threads"))


def key_fields(run) -> dict:
    """The key as named fields (:data:`KEY_FIELDS`), for tables and JSON."""
    k = key(run)
    return {**k.configuration._asdict(), "threads": k.threads}


def sort_key(run) -> tuple:
    """Device, model, format, threads, then the rest of the configuration: tables' order."""
    c, threads = key(run)
    rest = tuple(str(v) if v is not None else "" for v in (c.native, c.delegate, c.cluster, c.via,
                                                           c.input_shapes, c.options))
    return (c.device or "", c.model_label or "", c.format or "", threads or 0, rest)


# -- labels --------------------------------------------------------------------------------------

def dims_text(dims) -> str:
    """``[1, 3, 224, 224]`` → ``1x3x224x224``; a scalar is ``scalar``."""
    return "x".join(str(d) for d in dims) if dims else "scalar"


def format_label(fields: dict) -> str:
    """The format with its converter options: ``tflite``, ``tflite[quant=int8]``."""
    options = fields.get("options")
    opts = f"[{','.join(f'{k}={v}' for k, v in options)}]" if options else ""
    return f"{fields.get('format') or '—'}{opts}"


def shapes_label(fields: dict) -> str | None:
    """The requested input shapes, ``x=1x3x64x64``; None for the model's own."""
    shapes = fields.get("input_shapes")
    return " ".join(f"{name}={dims_text(dims)}" for name, dims in shapes) if shapes else None


def variant(run_or_fields, via: bool = True) -> str:
    """How a model runs, for a table with device, model, shape and threads in their own
    columns: ``tflite[quant=int8]+nnapi (benchmark_model) @big via app`` (``via=False``:
    for a table whose device column says it)."""
    f = _fields(run_or_fields)
    text = format_label(f) + (f"+{f['delegate']}" if f.get("delegate") else "")
    text += f" ({f['native']})" if f.get("native") else ""
    text += f" @{f['cluster']}" if f.get("cluster") else ""
    return text + (f" via {f['via']}" if via and f.get("via") else "")


def label(run_or_fields) -> str:
    """The one label of a run (or of a key's fields, some of which may be left out):
    ``resnet18_bnn · tflite[quant=int8] · benchmark_model · nnapi · x=1x3x64x64 · 4t on big
    via app @ phone``."""
    f = _fields(run_or_fields)
    parts = [str(model_label(f.get("model"), f.get("binarize"))), format_label(f)]
    parts += [f[name] for name in ("native", "delegate") if f.get(name)]
    shapes = shapes_label(f)
    parts += [shapes] if shapes else []
    threads = f"{f['threads']}t" if f.get("threads") is not None else ""
    where = threads + (f" on {f['cluster']}" if f.get("cluster") else "")
    where += f" via {f['via']}" if f.get("via") else ""
    parts += [where.strip()] if where.strip() else []
    return " · ".join(parts) + f" @ {f.get('device') or '—'}"


def _fields(run_or_fields) -> dict:
    return run_or_fields if isinstance(run_or_fields, dict) else key_fields(run_or_fields)


# -- latency -------------------------------------------------------------------------------------

def latency(record) -> Latency | None:
    """An ok run's median, else its mean; None for a run that is not ok or has neither.

    A 0.0 median is returned as it is (the validity check judges it), never replaced by the
    mean: every view then shows the same number for the same run."""
    if record is None or getattr(record, "status", "ok") != "ok":
        return None
    if record.median_ms is not None:
        return Latency("median", record.median_ms)
    mean = ((record.result or {}).get("stats_ms") or {}).get("mean")
    return Latency("mean", mean) if mean is not None else None


#: :func:`latency`'s number in SQL over a ``runs`` row (``{r}``: the row's name and a dot, or
#: nothing), for the store's facts: an ok run's median, else its result's mean.
LATENCY_SQL = ("CASE WHEN {r}status = 'ok' THEN coalesce({r}median_ms, CASE WHEN "
               "json_valid({r}result_json) THEN json_extract({r}result_json, '$.stats_ms.mean') "
               "END) END")


def latency_ms(record) -> float | None:
    """:func:`latency` in ms alone."""
    found = latency(record)
    return found.ms if found else None


# -- the campaign's resume key -------------------------------------------------------------------

def request_key(spec: dict) -> str:
    """The campaign's run key of a run spec (see the module's doc): these exact bytes are
    what resumed sweeps match stored records by."""
    payload = json.dumps(spec, sort_keys=True, default=str).encode()
    return hashlib.sha256(payload).hexdigest()[:16]


def record_shapes(record) -> dict[str, list[int]]:
    """``{input name: dims}`` a record ran at: the agent's inputs, else the run's shapes."""
    result = record.result or {}
    inputs = result.get("inputs")
    if inputs:
        return {i["name"]: list(i["shape"]) for i in inputs}
    if result.get("input_shape") is not None:
        return {"input": list(result["input_shape"])}
    return dict((record.spec or {}).get("input_shapes") or {})


def shape_label(record, width: int | None = 24) -> str:
    """The input shape(s) of a record for a table: ``1x3x640x640`` for one input,
    ``a=1x8 b=1x8 k=scalar`` for several (cut to ``width``), ``—`` when unknown."""
    shapes = record_shapes(record)
    if not shapes:
        return "—"
    if len(shapes) == 1:
        text = dims_text(next(iter(shapes.values())))
    else:
        text = " ".join(f"{n}={dims_text(d)}" for n, d in shapes.items())
    return text if width is None or len(text) <= width else text[:width - 1] + "…"


def shape_detail(record) -> str:
    """The ``results show`` line: every input, and which batch dims aiot set to 1."""
    shapes = record_shapes(record)
    if not shapes:
        return "—"
    text = ", ".join(f"{n} {dims_text(d)}" for n, d in shapes.items())
    defaulted = (record.provenance or {}).get("input_shapes_defaulted")
    if defaulted:
        text += f" (free batch dim set to 1: {', '.join(defaulted)})"
    return text
