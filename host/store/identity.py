"""What one stored run is: its configuration, its key, its label and its latency, in one place.

Every view of stored runs groups and names them through this module: the sweep table
(:mod:`aiot.host.cli.sweep_view`), the report (:mod:`aiot.host.report.build` and its first
screen and plots), ``results compare`` and the leaderboards (:mod:`aiot.host.store.compare`),
BiBench's tables and OM_infer (:mod:`aiot.host.engine.bibench_hw`,
:mod:`aiot.host.scores.om_infer`), the profile tables and the campaign's resume key. So two
runs are "the same configuration" in one view exactly when they are in every other: an int8
run, a ``--via app`` run and the float run of one model never merge anywhere.

* **Host** (:func:`this_host`, :func:`host_of`): the machine that drove the run, by its host
  id (``provenance.host.id``): ``AIOT_HOST_ID`` when set (a CI runner class, or a lab's name
  for a host), else the host name and a digest of the machine's id. Two hosts' ``local`` are
  two devices, and a phone driven from two hosts is measured twice: the host is part of the
  configuration, of a sweep's id and of what a sweep resumes from (records of another host,
  or imported ones, never complete this host's sweep). Records written before host ids were
  recorded have none (``None``): views show their host name, and ``results compare`` pairs
  them with any host's, saying so.
* **Configuration** (:class:`Configuration`): what sets one measurement apart, less its
  thread count: host, device, model (as the record names it, with the BiBench algorithm it was
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
  ``resnet18_bnn · tflite[quant=int8] · benchmark_model · 4t on big via app @ phone``; a
  binarized model in a format that runs it in float says so (:func:`deployment_note`:
  ``tflite (BNN as float)``), in every view that names runs.
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

import functools
import hashlib
import json
import re
import secrets
import socket
from pathlib import Path
from typing import NamedTuple

from aiot.converters import CONVERTERS, get_converter
from aiot.core import environment
from aiot.core.errors import UsageError
from aiot.core.paths import state_dir
from aiot.models.model_ref import model_label

__all__ = [
    "KEY_FIELDS",
    "Configuration",
    "Key",
    "Latency",
    "BNN_AS_FLOAT",
    "configuration",
    "deployment_note",
    "dims_text",
    "format_label",
    "HOST_ENV",
    "host_of",
    "host_name_of",
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
    "this_host",
    "variant",
]

SHELL = "shell"  # how the agent starts unless --via says otherwise (specs leave it out)
#: The record columns a key reads (each falls back to the spec's entry of that name) and the
#: spec entries it reads besides: what the store's facts (:mod:`aiot.host.store.facts`)
#: keep of a record so that :func:`key` makes its key again without the record.
KEY_COLUMNS = ("device", "model", "format", "threads", "host")
KEY_SPEC = ("binarize", "native", "delegate", "cluster", "via", "input_shapes", "options")


# -- the host --------------------------------------------------------------------------------

#: The variable that names this host's id (see :func:`this_host`).
HOST_ENV = "AIOT_HOST_ID"
_HOST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_MACHINE_ID_FILES = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))


@functools.cache
def _machine_digest() -> str:
    """Six hex digits that tell this machine from another of the same host name: a digest of
    the OS's machine id (never the id itself), else of a random id kept in aiot's state."""
    for path in _MACHINE_ID_FILES:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text:
            return hashlib.sha256(f"aiot host {text}".encode()).hexdigest()[:6]
    return _kept_random_id()


def _kept_random_id() -> str:
    """A random id made once and kept in aiot's state folder (a machine without a machine id:
    a container, macOS), so the same machine keeps its id across runs."""
    path = state_dir() / "host-id"
    try:
        text = path.read_text().strip()
        if re.fullmatch(r"[0-9a-f]{6}", text):
            return text
    except OSError:
        pass
    made = secrets.token_hex(3)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(made + "\n")
    except OSError:  # an unwritable state folder: this process's id, said once
        pass
    return made


def _host_name() -> str:
    """This machine's host name, as an id may hold it (``[A-Za-z0-9._-]``)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname().split(".")[0]).strip("-._")
    return (name or "host")[:48]


def this_host() -> str:
    """This machine's host id: ``$AIOT_HOST_ID`` when set, else ``<host name>-<6 hex>``
    (the hex a digest of the machine's id). Read on every call: a process that stands for two
    hosts (a test) sets the variable between them.

    Raises:
        UsageError: ``$AIOT_HOST_ID`` is not 1-64 letters, digits, ``.``, ``_`` or ``-``.
    """
    given = environment.get(HOST_ENV)
    if given is not None and given != "":
        if not _HOST_ID.fullmatch(given):
            raise UsageError(f"{HOST_ENV}={given[:80]!r} is not a host id",
                             "give 1-64 letters, digits, '.', '_' or '-', starting with a "
                             "letter or digit (e.g. lab-pi-1, ci-x86-2core)")
        return given
    return f"{_host_name()}-{_machine_digest()}"


def _provenance_host(run) -> dict:
    prov = getattr(run, "provenance", None)
    host = prov.get("host") if isinstance(prov, dict) else None
    return host if isinstance(host, dict) else {}


def host_of(run) -> str | None:
    """The host id of a stored record (``provenance.host.id``; None for a record written
    before ids were recorded), of a row that carries it as a column (``host``), or, for a run
    request (anything with ``to_spec`` and no provenance), this host's."""
    column = getattr(run, "host", None)
    if isinstance(column, str):
        return column
    if getattr(run, "provenance", None) is None and hasattr(run, "to_spec"):
        return this_host()
    value = _provenance_host(run).get("id")
    return value if isinstance(value, str) else None


def host_name_of(run) -> str | None:
    """How a view names a record's host: its id, else (an older record) its host name."""
    found = host_of(run)
    if found is not None:
        return found
    name = _provenance_host(run).get("hostname")
    return name if isinstance(name, str) else None


class Configuration(NamedTuple):
    """What sets one measurement apart, less its thread count (see the module's doc).

    Values are hashable: ``input_shapes`` as ``((input, dims), ...)`` sorted by input,
    ``options`` as sorted ``((key, value), ...)``; None where the run used the default.
    ``host`` is the host id that drove it (:func:`host_of`).
    """

    device: str | None
    host: str | None
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
        device=_column(run, spec, "device"), host=host_of(run), model=_column(run, spec, "model"),
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
    return (c.device or "", c.host or "", c.model_label or "", c.format or "", threads or 0, rest)


# -- labels --------------------------------------------------------------------------------------

def dims_text(dims) -> str:
    """``[1, 3, 224, 224]`` → ``1x3x224x224``; a scalar is ``scalar``."""
    return "x".join(str(d) for d in dims) if dims else "scalar"


#: What a table says of a binarized model (``--model resnet18_bnn``) run in a format whose
#: runtime computes in float (tflite, onnx, ...): its binary layers run as float layers, so it
#: is no longer the binarized deployment a binary runtime (LCE, daBNN) measures.
BNN_AS_FLOAT = "BNN as float"


def deployment_note(run_or_fields) -> str | None:
    """:data:`BNN_AS_FLOAT` for a run (a record, a request or a key's fields) of a binarized
    model in a format that does not execute binary layers as such; None otherwise. Every view
    of runs says it through :func:`format_label` (or :func:`variant`)."""
    f = _fields(run_or_fields)
    fmt = f.get("format")
    if not f.get("binarize") or not fmt or fmt not in CONVERTERS:
        return None
    return None if get_converter(fmt).binary_native else BNN_AS_FLOAT


def _format_options(fields: dict) -> str:
    options = fields.get("options")
    opts = f"[{','.join(f'{k}={v}' for k, v in options)}]" if options else ""
    return f"{fields.get('format') or '—'}{opts}"


def format_label(fields: dict) -> str:
    """The format with its converter options: ``tflite``, ``tflite[quant=int8]``, and a
    binarized model's run in float said so (``tflite (BNN as float)``, :func:`deployment_note`)."""
    note = deployment_note(fields)
    return _format_options(fields) + (f" ({note})" if note else "")


def shapes_label(fields: dict) -> str | None:
    """The requested input shapes, ``x=1x3x64x64``; None for the model's own."""
    shapes = fields.get("input_shapes")
    return " ".join(f"{name}={dims_text(dims)}" for name, dims in shapes) if shapes else None


def variant(run_or_fields, via: bool = True) -> str:
    """How a model runs, for a table with device, model, shape and threads in their own
    columns: ``tflite[quant=int8]+nnapi (benchmark_model) @big via app`` (``via=False``:
    for a table whose device column says it)."""
    f = _fields(run_or_fields)
    text = _format_options(f) + (f"+{f['delegate']}" if f.get("delegate") else "")
    text += f" ({f['native']})" if f.get("native") else ""
    text += f" @{f['cluster']}" if f.get("cluster") else ""
    text += f" via {f['via']}" if via and f.get("via") else ""
    note = deployment_note(f)
    return text + (f" ({note})" if note else "")


def label(run_or_fields, with_host: bool = False) -> str:
    """The one label of a run (or of a key's fields, some of which may be left out):
    ``resnet18_bnn · tflite[quant=int8] · benchmark_model · nnapi · x=1x3x64x64 · 4t on big
    via app @ phone``; ``with_host`` (a view of several hosts' records): ``@ phone on lab-b``."""
    f = _fields(run_or_fields)
    parts = [str(model_label(f.get("model"), f.get("binarize"))), format_label(f)]
    parts += [f[name] for name in ("native", "delegate") if f.get(name)]
    shapes = shapes_label(f)
    parts += [shapes] if shapes else []
    threads = f"{f['threads']}t" if f.get("threads") is not None else ""
    where = threads + (f" on {f['cluster']}" if f.get("cluster") else "")
    where += f" via {f['via']}" if f.get("via") else ""
    parts += [where.strip()] if where.strip() else []
    where = f" @ {f.get('device') or '—'}"
    if with_host:
        where += f" on {f.get('host') or 'an unrecorded host'}"
    return " · ".join(parts) + where


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
