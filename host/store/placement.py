"""Where a run's operators ran (``result.placement``), as every view and the gate read it.

The device agent reads it from each runtime's own account after the timed loop (LiteRT's
execution plan, ONNX Runtime's session profile, an ExecuTorch program's calls, a lite
module's bytecode: ``device_agent/backends``); a native tool says it in its "Replacing N out
of M node(s) with delegate" line (:mod:`aiot.host.native.tflite`). The fields are the
protocol's (``aiot.device_agent.protocol.PLACEMENT``).

This module is the one reader of them:

* :func:`partly_delegated`: the engine the run asked for took fewer than all operators
  (``complete`` is false). A run whose runtime does not say (LCE's interpreter) is not judged.
* :func:`placement_text`: the one line ``results show``, the report, the CSV and the lab view
  print; a fully delegated run says so.
* :func:`outside_text`: the operators left outside, by type (``CUMSUM ×1``).
* :func:`fallback_failure`: the gate (``results compare``): a candidate where more operators
  fall back than in its baseline, or that ran on another engine, fails, naming them.
"""

from __future__ import annotations

#: Operator types named in one line before the rest are counted ("+ 3 more types").
SHOWN_TYPES = 6


def placement_of(result: dict | None) -> dict | None:
    """A record's placement (its result's ``placement``), or None where it has none."""
    found = (result or {}).get("placement") if isinstance(result, dict) else None
    return found if isinstance(found, dict) and isinstance(found.get("engine"), str) else None


def partly_delegated(result: dict | None) -> bool:
    """Whether the run's engine took fewer than all of its operators."""
    found = placement_of(result)
    return found is not None and found.get("complete") is False


def outside_text(placement: dict) -> str:
    """``CUMSUM ×1, MEAN ×2`` (the operators left outside, most first), or how many when the
    types are not known (a native tool's line counts them only)."""
    outside = placement.get("outside")
    if isinstance(outside, dict) and outside:
        ranked = sorted(outside.items(), key=lambda kv: (-kv[1], kv[0]))
        text = ", ".join(f"{name} ×{count}" for name, count in ranked[:SHOWN_TYPES])
        more = len(ranked) - SHOWN_TYPES
        return text + (f" + {more} more type{'s' if more != 1 else ''}" if more > 0 else "")
    count = placement.get("outside_nodes")
    if isinstance(count, int) and count:
        return f"{count} operator{'s' if count != 1 else ''} (types not reported)"
    return "operators not named by the runtime"


def _share(placement: dict) -> str:
    """``xnnpack took 6 of 7 operators in 2 partitions``, as far as the counts go."""
    engine = placement["engine"]
    total, taken = placement.get("total_nodes"), placement.get("delegated_nodes")
    parts = placement.get("partitions")
    if total is not None and taken is not None:
        text = (f"all {total} operators on {engine}" if taken == total
                else f"{engine} took {taken} of {total} operators")
    else:
        text = f"{engine} took " + ("every operator" if placement.get("complete")
                                    else "part of the graph")
    if parts:
        text += f" in {parts} partition{'s' if parts != 1 else ''}"
    return text


def placement_text(result: dict | None) -> str | None:
    """The one line every view prints of a run's placement, or None without one:
    ``partly delegated: xnnpack took 6 of 7 operators in 2 partitions; outside: CUMSUM ×1
    (execution plan of LiteRT's Interpreter)``, ``fully delegated: …``, or ``not judged: …``."""
    found = placement_of(result)
    if found is None:
        return None
    note = found.get("note")
    complete = found.get("complete")
    if complete is True:
        text = f"fully delegated: {_share(found)}"
    elif complete is False:
        text = f"partly delegated: {_share(found)}; outside: {outside_text(found)}"
    else:
        text = f"not judged: {note or 'the runtime does not say which operators its engine took'}"
        note = None
    if note:
        text += f"; {note}"
    return f"{text} ({found.get('source') or 'source not recorded'})"


def short_text(result: dict | None) -> str | None:
    """``xnnpack left CUMSUM ×1 outside`` for a partly delegated run (a table's footnote, a
    page's cell), None for any other."""
    if not partly_delegated(result):
        return None
    found = placement_of(result)
    return f"{found['engine']} left {outside_text(found)} outside"


def _judged(placement: dict | None) -> bool:
    return placement is not None and placement.get("complete") is not None


def fallback_failure(a_result: dict | None, b_result: dict | None) -> str | None:
    """Why candidate B's placement fails the gate against baseline A, or None.

    B fails when it ran on another engine than A, or when more operators fall back outside the
    engine than in A: by type where both name their types (``CUMSUM +1``), by count where
    either does not, by the verdict alone where neither counts (A fully delegated, B not). A
    run without a placement, or whose runtime does not say (``complete`` null), is not judged.
    """
    pa, pb = placement_of(a_result), placement_of(b_result)
    if not (_judged(pa) and _judged(pb)):
        return None
    if pa["engine"] != pb["engine"]:
        return f"placement: B ran on {pb['engine']}, A on {pa['engine']}"
    oa, ob = pa.get("outside"), pb.get("outside")
    engine = pb["engine"]
    if isinstance(oa, dict) and isinstance(ob, dict):
        more = {name: n - oa.get(name, 0) for name, n in ob.items() if n > oa.get(name, 0)}
        if not more:
            return None
        ranked = sorted(more.items(), key=lambda kv: (-kv[1], kv[0]))
        named = ", ".join(f"{name} +{n}" for name, n in ranked)
        return (f"placement: {sum(more.values())} more operator(s) fall back outside {engine}: "
                f"{named} (A {sum(oa.values())} outside, B {sum(ob.values())})")
    na, nb = pa.get("outside_nodes"), pb.get("outside_nodes")
    if isinstance(na, int) and isinstance(nb, int):
        return (f"placement: {nb - na} more operator(s) fall back outside {engine} "
                f"(A {na} outside, B {nb})") if nb > na else None
    if pa["complete"] and not pb["complete"]:
        return f"placement: A was fully delegated to {engine}, B only partly ({outside_text(pb)})"
    return None
