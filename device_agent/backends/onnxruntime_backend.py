"""ONNX Runtime backend (``.onnx`` and ``.ort``), CPU execution provider.

ONNX Runtime takes any size for a dynamic (symbolic) dim on every run, so an input-shape
override needs no resizing here: the arrays fed have that shape.

An ORT-format file is not optimized again when loaded; what it gets beyond the level it was
saved at are the optimizations recorded in it (aiot's default ``.ort``: ONNX Runtime's runtime
style), which the session replays for this CPU only when asked to (``REPLAY_KEY``) and only
up to its graph optimization level, so both are set here.

Placement (:meth:`Session.placement`): the nodes each execution provider ran, from the session
profile of one run of a second, profiled session (:func:`provider_placement`): the timed
session is never profiled, since profiling slows every run it records.
"""

from __future__ import annotations

import builtins
import json
import os
import tempfile

from collections import Counter

from ..signature import check_arrays, entry
from .base import SessionBase, installed_from, placement_entry

#: Package names the runtime ships as (see ``installed_version``).
DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino")

NAME = "onnxruntime"
#: The execution providers a session asks for, in ONNX Runtime's order of preference: the
#: first is the engine the run asked for (placement judges the others' nodes as outside).
PROVIDERS = ("CPUExecutionProvider",)
#: Session config entry that replays an ORT file's recorded runtime optimizations: opt-in in
#: recent ONNX Runtime (without it 1.32 loads the file unfused); unknown keys are ignored.
REPLAY_KEY = "session.enable_saved_runtime_optimizations"
EXTENSIONS = (".onnx", ".ort")
TOOLCHAIN = None  # the runtime is in aiot's own environment
NO_PROFILER = None  # a ProfiledBackend: see PROFILER

# ONNX Runtime's type strings -> NumPy dtype names
_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
          "tensor(int8)": "int8", "tensor(uint8)": "uint8", "tensor(int16)": "int16",
          "tensor(uint16)": "uint16", "tensor(int32)": "int32", "tensor(uint32)": "uint32",
          "tensor(int64)": "int64", "tensor(uint64)": "uint64", "tensor(bool)": "bool",
          "tensor(string)": "string"}


def version() -> str | None:
    """The installed onnxruntime version, or None."""
    try:
        import onnxruntime
    except Exception:
        return None
    return onnxruntime.__version__


def installed_version() -> str | None:
    """The runtime's installed version, from package metadata (nothing imported)."""
    return installed_from(DISTRIBUTIONS)


def _entries(metas) -> list[dict]:
    return [entry(m.name, m.shape or [], _TYPES.get(m.type, "string")) for m in metas]


class Session(SessionBase):
    """One loaded model; inputs are set once and ``invoke`` runs it.

    With ``profile_dir`` the session is created with ONNX Runtime's session profiling on
    (it can only be switched on at creation): see :meth:`profile_start`.
    """
    def __init__(self, path: str, threads: int, input_shapes: dict | None = None,
                 profile_dir: str | None = None) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        # intra-op threads are what "threads" means for a single CNN inference; inter-op
        # parallelism would only add threads that the sweep does not account for.
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if path.lower().endswith(".ort"):
            # Replay only rewrites nodes into the CPU provider's own fused kernels; the file is
            # one the host sent to be run, as trusted as a .ptl whose TorchScript runs as it is.
            options.add_session_config_entry(REPLAY_KEY, "1")
        if profile_dir is not None:
            options.enable_profiling = True
            options.profile_file_prefix = os.path.join(profile_dir, "ort_profile")
        self._runs = 0
        self._profiled_from = None
        self._path, self._threads, self._shapes_asked = path, threads, input_shapes
        self._sess = ort.InferenceSession(path, options, providers=list(PROVIDERS))
        self._declare(_entries(self._sess.get_inputs()), _entries(self._sess.get_outputs()),
                      input_shapes)
        self._names = [spec["name"] for spec in self.inputs]
        self._feed = None
        self._outs = None

    def set_inputs(self, arrays) -> None:
        check_arrays(self.inputs, arrays)
        self._feed = dict(zip(self._names, arrays))

    def invoke(self) -> None:
        self._outs = self._sess.run(None, self._feed)
        self._runs += 1

    def outputs_all(self) -> list:
        return list(self._outs)

    def placement(self) -> dict:
        """The nodes each provider ran in one run of the inputs set, from the profile of a
        second session made for it (:func:`provider_placement`)."""
        probe = open_profiled(self._path, self._threads, self._shapes_asked)
        probe.set_inputs([self._feed[name] for name in self._names])
        probe.profile_start()
        probe.invoke()
        return provider_placement(probe.profile_events(), PROVIDERS[0])

    def profile_start(self) -> None:
        """Profile the runs from here on (the trace holds every run: earlier ones are
        dropped when it is read)."""
        self._profiled_from = self._runs

    def profile_stop(self) -> list[dict]:
        """The node rows of the runs since :meth:`profile_start` (see ``profiling.py``)."""
        return node_rows(self.profile_events(), skip_runs=self._profiled_from or 0)

    def profile_events(self) -> list:
        """The session's profile trace (Chrome trace events), read and deleted: profiling ends."""
        trace = self._sess.end_profiling()
        try:
            with builtins.open(trace, encoding="utf-8") as fh:
                events = json.load(fh)
        finally:
            os.unlink(trace)
            try:
                os.rmdir(os.path.dirname(trace))  # open_profiled's own folder, now empty
            except OSError:
                pass
        return events


def open(path: str, threads: int, input_shapes: dict | None = None) -> Session:  # noqa: A001
    """Load ``path`` for inference with ``threads`` intra-op threads."""
    return Session(path, threads, input_shapes)


PROFILER = "ONNX Runtime session profiling (enable_profiling)"


def open_profiled(path: str, threads: int, input_shapes: dict | None = None) -> Session:
    """As :func:`open`, with session profiling on; the trace goes to a temporary folder."""
    return Session(path, threads, input_shapes, profile_dir=tempfile.mkdtemp(prefix="aiot-ort-"))


_KERNEL = "_kernel_time"


def node_rows(events: list, skip_runs: int = 0) -> list[dict]:
    """Per-node kernel time of an ONNX Runtime profile trace (Chrome trace events).

    Each ``model_run`` event (category ``Session``) spans one run; the ``Node`` events named
    ``<node>_kernel_time`` inside it are its operators (``args.op_name``: the operator type,
    ``dur``: microseconds). The first ``skip_runs`` runs (the warm-up) are left out.
    """
    runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                  if e.get("cat") == "Session" and e.get("name") == "model_run")[skip_runs:]
    rows = []
    for e in events:
        name = e.get("name", "")
        if e.get("cat") != "Node" or not name.endswith(_KERNEL):
            continue
        if not any(start <= e["ts"] <= end for start, end in runs):
            continue
        rows.append({"name": name[: -len(_KERNEL)], "type": (e.get("args") or {}).get("op_name", "?"),
                     "us": float(e.get("dur", 0))})
    return rows


def provider_placement(events: list, requested: str) -> dict:
    """Nodes per execution provider of a session profile's runs (one run suffices).

    Each ``Node`` event named ``<node>_kernel_time`` carries ``args.provider`` and
    ``args.op_name``; a node is counted once, however many runs the trace holds. The nodes
    are those of the optimized graph the session runs: a compiling provider's partition (an
    NNAPI or CoreML fused node) is one node. Nodes of another provider than ``requested`` are
    outside, by operator type.
    """
    providers: dict[str, str] = {}
    types: dict[str, str] = {}
    for e in events:
        name = e.get("name", "")
        if e.get("cat") != "Node" or not name.endswith(_KERNEL):
            continue
        args = e.get("args") or {}
        node = name[: -len(_KERNEL)]
        providers[node] = str(args.get("provider") or "?")
        types[node] = str(args.get("op_name") or "?")
    by_provider = Counter(providers.values())
    outside = Counter(types[n] for n, provider in providers.items() if provider != requested)
    return placement_entry(requested, "session profile", total=len(providers),
                           delegated=by_provider.get(requested, 0),
                           outside=dict(sorted(outside.items())),
                           by_engine=dict(sorted(by_provider.items())))
