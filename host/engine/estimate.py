"""An up-front estimate of a long procedure: what must be converted, what is cached, how long.

A paper procedure (BiBench's grid: a dozen LCE conversions of minutes each) gave no word of
its length before it started. :func:`estimate` reads only what is already on disk: the
artifacts' sidecars (which formats are converted already, and how long each conversion took:
``convert_seconds``) and the store's finished runs (how long a run took on that device and
format); the machine's conversion cache counts as on disk. Where nothing is recorded it says
so and uses a stated rough figure. A sidecar found is a likely cache hit, not a promise: the
conversion itself still checks it is the same model.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import aiot
from aiot.converters import conversion_cache
from aiot.converters.sidecar import SUFFIX, read_sidecar
from aiot.core.errors import ArtifactError

#: Rough seconds per conversion where none of that format is recorded here (the LCE figure is
#: a ResNet's on a laptop: TensorFlow's converter took 2.5–5 minutes per model).
ROUGH_CONVERT_S = {"lce": 180.0, "tflite": 60.0, "executorch": 60.0, "dabnn": 30.0}
ROUGH_CONVERT_DEFAULT_S = 20.0
#: Work estimated at this many seconds or more says so before it starts (``aiot sweep``; the
#: paper procedures always do).
LONG_S = 120.0
#: A run's own overhead beyond its timed and warm-up seconds (agent start, load, telemetry).
RUN_OVERHEAD_S = 5.0


@dataclass
class Estimate:
    """What a procedure has left and how long it will likely take.

    Attributes:
        convert: per conversion still needed, ``(label, seconds, recorded)``; ``recorded``
            is False where ``seconds`` is a rough figure.
        cached: conversions whose artifact exists already.
        runs: runs still to measure; ``run_s`` each, from ``run_from`` recorded runs (0: rough).
    """

    convert: list[tuple[str, float, bool]] = field(default_factory=list)
    cached: int = 0
    runs: int = 0
    run_s: float = 0.0
    run_from: int = 0

    @property
    def seconds(self) -> float:
        """The whole estimate: conversions one after another, then every run."""
        return sum(s for _label, s, _recorded in self.convert) + self.runs * self.run_s

    def line(self) -> str:
        """One line for the terminal, before the work starts."""
        parts = [_conversions(self), _runs(self)]
        return (f"estimate: {'; '.join(p for p in parts if p)}: about {duration(self.seconds)} "
                "in all (Ctrl-C stops within seconds; the same command resumes)")


def estimate(requests, artifacts_dir: Path, records=()) -> Estimate:
    """The estimate for ``requests`` (those still to run), from the sidecars in
    ``artifacts_dir`` and finished run ``records`` (any, newest last)."""
    sidecars = _sidecars(artifacts_dir)
    result = Estimate(runs=len(requests))
    seen = set()
    for request in requests:
        key = (request.model, request.format, request.binarize, request.options,
               str(request.weights), request.input_shapes)
        if key in seen or getattr(request.model_ref, "is_artifact", False):
            continue  # converted already, or a user's artifact: measured as it is
        seen.add(key)
        if _cached(request, sidecars):
            result.cached += 1
            continue
        timed = [s for s in sidecars if s.get("format") == request.format and s.get("convert_seconds")]
        # this model's own conversions to the format where there are any (a ResNet converts
        # for minutes, a tiny net in seconds), else the format's
        same = [s for s in timed if (s.get("source") or {}).get("model") == request.model]
        recorded = [s["convert_seconds"] for s in same or timed]
        seconds = statistics.median(recorded) if recorded else ROUGH_CONVERT_S.get(
            request.format, ROUGH_CONVERT_DEFAULT_S)
        result.convert.append((_label(request), float(seconds), bool(recorded)))
    result.run_s, result.run_from = _run_seconds(requests, records)
    return result


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``2.5 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _conversions(est: Estimate) -> str:
    if not est.convert:
        return f"every conversion cached ({est.cached})" if est.cached else ""
    by_format: dict[str, list[tuple[float, bool]]] = {}
    for label, seconds, recorded in est.convert:
        by_format.setdefault(label.rsplit(" ", 1)[-1], []).append((seconds, recorded))
    each = ", ".join(
        f"{len(v)} {fmt} × ~{duration(statistics.mean(s for s, _ in v))}"
        + ("" if all(recorded for _, recorded in v) else " (rough: none recorded here)")
        for fmt, v in by_format.items())
    return f"{len(est.convert)} conversion(s) to do ({each}), {est.cached} cached"


def _runs(est: Estimate) -> str:
    if not est.runs:
        return ""
    source = f"from {est.run_from} recorded run(s)" if est.run_from else "rough"
    return f"{est.runs} run(s) × ~{duration(est.run_s)} ({source})"


def _label(request) -> str:
    model = f"{request.model}_{request.binarize}" if request.binarize else request.model
    return f"{model} {request.format}"


def _sidecars(artifacts_dir: Path) -> list[dict]:
    """This aiot's sidecars in ``artifacts_dir`` and in the machine's conversion cache (which
    a conversion copies from, :mod:`aiot.converters.conversion_cache`); a file that does not
    read is no cache."""
    found = []
    paths = [*sorted(Path(artifacts_dir).glob(f"*{SUFFIX}")), *conversion_cache.sidecar_paths()]
    for path in paths:
        try:
            data = read_sidecar(path.with_name(path.name[:-len(SUFFIX)]))
        except ArtifactError:
            continue
        if data.get("aiot_version") == aiot.__version__:
            found.append(data)
    return found


def _cached(request, sidecars: list[dict]) -> bool:
    """Whether an artifact of this model, binarization, format and options is on disk."""
    wanted = dict(request.options or ())
    for sidecar in sidecars:
        source = sidecar.get("source") or {}
        options = (sidecar.get("converter") or {}).get("options") or {}
        if (sidecar.get("format") == request.format and source.get("model") == request.model
                and source.get("binarize") == request.binarize
                and all(str(options.get(k)) == str(v) for k, v in wanted.items())):
            return True
    return False


def _run_seconds(requests, records) -> tuple[float, int]:
    """Seconds per run: the median of finished ok runs on the same devices and formats, else
    each request's own timed and warm-up seconds plus :data:`RUN_OVERHEAD_S`."""
    wanted = {(r.device, r.format) for r in requests}
    took = [span for r in records if r.status == "ok" and (r.device, r.format) in wanted
            and (span := _span(r)) is not None]
    if took:
        return statistics.median(took), len(took)
    if not requests:
        return 0.0, 0
    params = requests[0].params
    return params.warmup_min_s + params.min_s + RUN_OVERHEAD_S, 0


def _span(record) -> float | None:
    try:
        return (datetime.fromisoformat(record.finished_at)
                - datetime.fromisoformat(record.created_at)).total_seconds()
    except (TypeError, ValueError):
        return None
