"""What TFLite's ``benchmark_model`` (and ``lce_benchmark_model``) say about delegation.

Two kinds of line, in every vintage recorded under ``tests/unit/fixtures/native/``:

* the interpreter's own, when a delegate partitions the graph (``INFO:`` or ``VERBOSE:``, or a
  logcat prefix): ``Replacing 792 out of 836 node(s) with delegate (TfLiteXNNPackDelegate)
  node, yielding 21 partitions for subgraph 0.``; builds before TensorFlow 2.10 or so leave
  out ``out of M`` and the ``for ...`` tail. Lines for another subgraph than the first (a
  control-flow body) are not the graph's;
* the tool's summary of a delegate it applied because it was asked to: ``Explicitly applied
  XNNPACK delegate, and the model graph will be partially executed by the delegate w/ 22
  delegate kernels.`` (or ``completely executed``), or ``Though NNAPI delegate is explicitly
  applied, the model graph will not be executed by the delegate.``

:func:`delegations` reads both; :func:`native_placement` makes a run's ``placement`` (the
agent's fields, ``aiot.device_agent.protocol.PLACEMENT``) for the engine the run asked for.
The tools name no operator types: what stayed outside is a count.
"""

from __future__ import annotations

import re

from aiot.host.devices.agent_messages import placement_problem

_REPLACING = re.compile(
    r"Replacing (?P<taken>\d+)(?: out of (?P<total>\d+))? node\(s\) with delegate "
    r"\((?P<name>[^)]*)\) node, yielding (?P<parts>\d+) partitions?"
    r"(?: for (?P<where>the whole graph|subgraph (?P<subgraph>\d+)))?")
_APPLIED = re.compile(
    r"Explicitly applied (?P<name>\w+) delegate, and the model graph will be "
    r"(?P<how>completely|partially) executed by the delegate"
    r"(?: w/ (?P<parts>\d+) delegate kernels)?")
_NOT_APPLIED = re.compile(r"Though (?P<name>\w+) delegate is explicitly applied, the model graph "
                          r"will not be executed by the delegate")
#: The interpreter's delegate names, and the tool's, as ``--delegate`` names them.
ENGINES = {"tflitexnnpackdelegate": "xnnpack", "xnnpack": "xnnpack",
           "tflitegpudelegatev2": "gpu", "tflitegpudelegate": "gpu", "gpu": "gpu",
           "tflitennapidelegate": "nnapi", "nnapi": "nnapi",
           "tflitehexagondelegate": "hexagon", "hexagon": "hexagon"}


def engine_name(name: str) -> str:
    """A delegate as ``--delegate`` names it (``TfLiteXNNPackDelegate`` is ``xnnpack``);
    one aiot does not know, lower-cased (``vx delegate``)."""
    return ENGINES.get(name.replace(" ", "").lower(), name.strip().lower())


def delegations(text: str) -> list[dict]:
    """Every delegation line of a tool's output, in order: ``{"engine", "line"}`` and, from an
    interpreter line, ``taken``, ``total`` (None in old builds) and ``partitions``; from the
    tool's summary, ``complete`` (True, False) and ``partitions`` where it says."""
    found = []
    for line in text.splitlines():
        if (m := _REPLACING.search(line)) and m["subgraph"] in (None, "0"):
            found.append({"engine": engine_name(m["name"]), "line": m.group(0),
                          "taken": int(m["taken"]),
                          "total": int(m["total"]) if m["total"] else None,
                          "partitions": int(m["parts"])})
        elif m := _APPLIED.search(line):
            found.append({"engine": engine_name(m["name"]), "line": m.group(0),
                          "complete": m["how"] == "completely",
                          "partitions": int(m["parts"]) if m["parts"] else None})
        elif m := _NOT_APPLIED.search(line):
            found.append({"engine": engine_name(m["name"]), "line": m.group(0),
                          "complete": False, "taken": 0, "partitions": 0})
    return found


def native_placement(lines: list[dict], wanted: str | None = None, total: int | None = None,
                     own: int = 0, engine: str | None = None) -> dict | None:
    """The placement of a native run from its :func:`delegations`, or None where the tool
    said nothing of the engine (old builds apply XNNPACK silently).

    Args:
        wanted: the delegate the run asked for (``--delegate``); None: the one the tool
            applied, the first of several (benchmark_model applies what it is asked for first).
        total: the graph's operators (the artifact's own count), for lines without ``out of M``.
        own: operators the tool runs on kernels of its own, not outside the engine (LCE's).
        engine: the name of the engine those and the delegate make (``lce``).
    """
    mine = [d for d in lines if wanted is None or d["engine"] == wanted]
    if not mine:
        return None
    name = wanted or mine[0]["engine"]
    mine = [d for d in mine if d["engine"] == name]
    counted = [d for d in mine if "taken" in d]
    said = mine[-1]
    source = f"{'; '.join(d['line'] for d in mine[-2:])}"
    entry = {"engine": engine or name, "source": f"tool output: {source}"[:300]}
    if counted:
        last = counted[-1]
        graph = last.get("total") or total
        entry.update(partitions=last["partitions"])
        if graph is not None:
            taken = last["taken"] + own
            entry.update(total_nodes=graph, delegated_nodes=taken, outside_nodes=graph - taken,
                         complete=taken == graph)
        if own:
            entry["by_engine"] = {name: last["taken"], engine or "own": own}
        if graph is None and "complete" in said:
            entry["complete"] = said["complete"]
    else:
        entry.update(complete=said["complete"])
        if said.get("partitions") is not None:
            entry["partitions"] = said["partitions"]
    return entry if placement_problem(entry) is None else None
