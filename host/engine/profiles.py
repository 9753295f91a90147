"""Per-operator time of a run (``aiot run/sweep --profile``): taking it, and reading it back.

A run's profile is ``result["profile"]`` of its record, in the shape of the device agent's
``profile`` answer (``device_agent/profiling.py``): from the runtime's own profiler in a
separate pass after the timed one (ONNX Runtime session profiling, the PyTorch profiler for
``.ptl``), or from a native tool's op profiling (TFLite ``benchmark_model
--enable_op_profiling``, :mod:`aiot.host.native.op_profile`). Where a runtime offers none the
profile says so: ``available: false`` and the ``reason``.
"""

from __future__ import annotations

from aiot.core.errors import AgentError

TOP_N = 10  # ops shown per run by the CLI and the report


def agent_profile(session, spec: dict, timeout: float | None) -> dict:
    """The agent's ``profile`` of ``spec``'s model (a fresh process after the timed run).

    A profiling pass that fails leaves the timed run as it is: the profile records why.
    A lost link raises, as for the run itself (the campaign retries it).
    """
    try:
        return session.profile(spec, timeout=timeout)
    except AgentError as exc:
        return {"available": False, "reason": f"the profiling pass failed: {exc.one_line()}"}


def profile_of(record) -> dict | None:
    """A stored record's profile, or None when the run was not profiled."""
    found = (record.result or {}).get("profile") if hasattr(record, "result") else None
    return found if isinstance(found, dict) else None


def top_ops(profile: dict, n: int = TOP_N) -> list[dict]:
    """The ``n`` slowest ops of an available profile (time per inference), slowest first."""
    if not profile.get("available"):
        return []
    return sorted(profile.get("ops") or [], key=lambda op: -(op.get("ms") or 0))[:n]


def summary(profile: dict) -> str:
    """One line: which profiler, over how many runs, and how much of an inference it saw;
    or why there is no profile."""
    if not profile.get("available"):
        return f"no per-operator times: {profile.get('reason') or 'not available'}"
    runs = profile.get("runs")
    shown = len(profile.get("ops") or []) + (profile.get("ops_left_out") or 0)
    total = profile.get("total_ms")
    parts = [str(profile.get("tool") or "profiler"),
             f"{runs} profiled inference(s)" if runs else None,
             f"{shown} op(s)",
             f"{total:.3f} ms of op time per inference" if total is not None else None]
    return ", ".join(p for p in parts if p)
