"""AIoTBench's device scores VIPS and VOPS, from stored runs or from external numbers.

AIoTBench (Luo et al., Sec. VII-D, eq. 1-2) ranks devices by two sums over the tests i a
device ran, a test being one model in one implementation (framework and delegate)::

    VIPS = sum_i accuracy_i / time_i              (Valid Images Per Second)
    VOPS = sum_i accuracy_i * FLOPs_i / time_i    (Valid FLOPs Per Second)

with accuracy_i the test's top-1 accuracy as a fraction, time_i its *average* inference time
per image in seconds, and FLOPs_i the model's multiply-accumulates (AIoTBench's Table II
counts MACs as FLOPs: ResNet50 3800 M, InceptionV3 5000 M, DenseNet121 2800 M, SqueezeNet
833 M, MobileNetV2 300 M, MnasNet 315 M). Both are *sums*, not means: a device that runs
more tests scores higher, so devices are comparable only over the same set of tests. A test
a device did not run is left out of its sum and listed with it (:attr:`DeviceScore.not_run`).

Worked example, Galaxy s10e's ``py-re`` in the paper's Table VI: 74.94 % in 333 ms gives
0.7494 / 0.333 = 2.25 images/s and 2.25 * 3800e6 = 8.55 G ops/s; summing the 24 tests
gives the paper's 140.40 and 151.19G (``tests/unit/test_scores_vips.py``).

From stored runs, a test is the newest scorable ``latency`` record of one (device,
implementation, model); its time is the record's mean per-image latency
(``result["stats_ms"]["mean"]``, AIoTBench's "average"), else its median, and
:attr:`DeviceTest.stat` says which. Binarized runs belong to BiBench (``aiot score
om-infer``) and are not tests here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from aiot.host.store import identity

#: AIoTBench's short model codes (its Table VI) and the zoo models they name.
MODEL_CODES = {"re": "resnet50", "in": "inception_v3", "de": "densenet121", "sq": "squeezenet",
               "mo": "mobilenet_v2", "mn": "mnasnet"}


@dataclass(frozen=True)
class DeviceTest:
    """One test a device ran: a model in one implementation, with accuracy and time.

    ``stat`` is the latency statistic ``time_s`` comes from (``mean``, ``median``, or
    ``csv`` for external numbers); ``flops_source`` where ``flops_m`` comes from
    (``reference``: the paper's; ``counted``: aiot's count of the zoo model; ``csv``);
    ``source`` the record id or the CSV line.
    """

    device: str
    implementation: str
    model: str
    accuracy: float  # top-1, a fraction
    time_s: float  # average seconds per image
    flops_m: float  # multiply-accumulates per image, millions
    stat: str
    flops_source: str
    source: str

    @property
    def vips(self) -> float:
        """This test's term of VIPS, images per second weighted by accuracy."""
        return vips_term(self.accuracy, self.time_s)

    @property
    def vops(self) -> float:
        """This test's term of VOPS, operations per second weighted by accuracy."""
        return vops_term(self.accuracy, self.flops_m, self.time_s)

    def to_dict(self) -> dict:
        return {**asdict(self), "vips": self.vips, "vops": self.vops}


@dataclass(frozen=True)
class NotRun:
    """A test left out of a device's sums, and why."""

    device: str
    implementation: str
    model: str
    reason: str
    source: str | None = None  # the record id or CSV line that says so; None: no data at all

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class DeviceScore:
    """VIPS and VOPS of one device: sums over ``tests`` tests; ``not_run`` lists the others."""

    device: str
    tests: int
    vips: float
    vops: float  # operations per second
    not_run: tuple[NotRun, ...]

    def to_dict(self) -> dict:
        return {"device": self.device, "tests": self.tests, "vips": self.vips,
                "vops": self.vops, "vops_si": si(self.vops),
                "not_run": [n.to_dict() for n in self.not_run]}


@dataclass(frozen=True)
class Selection:
    """The tests found in stored records, those left out, and notes on choices made."""

    tests: list[DeviceTest]
    not_run: list[NotRun]
    notes: list[str]


def vips_term(accuracy: float, time_s: float) -> float:
    """``accuracy / time``: one test's valid images per second (eq. 1).

    Raises:
        ValueError: a time that is not positive.
    """
    if not time_s > 0:
        raise ValueError(f"time per image must be > 0 s, got {time_s}")
    return accuracy / time_s


def vops_term(accuracy: float, flops_m: float, time_s: float) -> float:
    """``accuracy * FLOPs / time``: one test's valid operations per second (eq. 2)."""
    return vips_term(accuracy, time_s) * flops_m * 1e6


def device_scores(tests: Iterable[DeviceTest],
                  not_run: Iterable[NotRun] = ()) -> list[DeviceScore]:
    """VIPS and VOPS per device, sorted by device name.

    A device's ``not_run`` holds the given ``not_run`` entries of that device, then every
    (implementation, model) another device ran and it has no entry for (reason
    ``no result``), so scores over different sets of tests are seen as such.

    Raises:
        ValueError: the same (device, implementation, model) twice in ``tests``.
    """
    by_device: dict[str, dict[tuple[str, str], DeviceTest]] = {}
    for test in tests:
        runs = by_device.setdefault(test.device, {})
        key = (test.implementation, test.model)
        if key in runs:
            raise ValueError(f"{test.device}'s test {test.implementation}/{test.model} given twice")
        runs[key] = test
    listed: dict[str, list[NotRun]] = {}
    for entry in not_run:
        listed.setdefault(entry.device, []).append(entry)
    everything = {key for runs in by_device.values() for key in runs}
    scores = []
    for device in sorted(by_device):
        runs = by_device[device]
        missing = listed.get(device, [])
        named = {(n.implementation, n.model) for n in missing}
        missing += [NotRun(device, impl, model, "no result")
                    for impl, model in sorted(everything - set(runs) - named)]
        scores.append(DeviceScore(device, len(runs), sum(t.vips for t in runs.values()),
                                  sum(t.vops for t in runs.values()), tuple(missing)))
    return scores


def si(value: float, digits: int = 2) -> str:
    """``value`` with an SI prefix, AIoTBench's way of printing VOPS: ``151.19G``."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.{digits}f}{prefix}"
    return f"{value:.{digits}f}"


def aiotbench_model(name: str) -> tuple[str, float | None]:
    """The zoo name of ``name`` and its reference FLOPs (millions), or None where there are none.

    Accepts zoo names and aliases case-insensitively and AIoTBench's codes (``re``, ``mn``...);
    a name the zoo does not know comes back stripped, with None.
    """
    from aiot.models.zoo import ZOO

    key = name.strip()
    key = MODEL_CODES.get(key.lower(), key)
    if key not in ZOO:
        return key, None
    spec = ZOO.get(key)
    return spec.name, spec.reference_flops_m


def zoo_flops_m(model: str) -> tuple[float, str] | None:
    """FLOPs (millions) of a stored run's model and where they come from.

    The paper's reference FLOPs where it gives them, else aiot's own MAC count of the zoo
    model (built once; see :meth:`aiot.models.ModelSpec.complexity`); None for a model the
    zoo does not know.
    """
    from aiot.models.zoo import ZOO

    name, reference = aiotbench_model(model)
    if reference is not None:
        return reference, "reference"
    if name not in ZOO:
        return None
    return ZOO.get(name).complexity().macs / 1e6, "counted"


def implementation_of(record) -> str:
    """A stored run's implementation: its format with its converter options, plus
    ``+delegate`` (``tflite+nnapi``, ``tflite[quant=int8]``: an int8 model is another test
    than the float one, never replaced by it).

    The native tool is not part of it: ``tflite`` timed by the agent or by
    ``benchmark_model`` is the same TFLite CPU implementation.
    """
    fields = identity.key_fields(record)
    delegate = fields["delegate"]
    return identity.format_label(fields) + (f"+{delegate}" if delegate else "")


def time_of(record) -> tuple[float, str] | None:
    """(seconds per image, statistic) of a stored run: its mean, else its median."""
    stats = (record.result or {}).get("stats_ms") or {}
    for stat, value in (("mean", stats.get("mean")), ("median", record.median_ms)):
        if value is not None and value > 0:
            return float(value) / 1000, stat
    return None


def _why_not(record, include_invalid: bool) -> str | None:
    """Why ``record`` cannot be a test, or None when it can."""
    if record.status != "ok":
        return f"{record.status}: {record.reason}" if record.reason else record.status
    if record.validity == "INVALID" and not include_invalid:
        reasons = ((record.result or {}).get("validity") or {}).get("reasons") or []
        return "; ".join(["INVALID (--include-invalid keeps it)", *reasons])
    if record.accuracy is None:
        return "no accuracy: a latency-only run (measure it with a --dataset)"
    if time_of(record) is None:
        return "no latency"
    return None


def select_tests(records, include_invalid: bool = False,
                 flops: Callable[[str], tuple[float, str] | None] = zoo_flops_m) -> Selection:
    """The tests in stored ``latency`` records, one per (device, implementation, model).

    Args:
        records: run records in any order; other kinds and binarized runs are ignored.
        include_invalid: count runs judged INVALID (left out and listed by default).
        flops: model name to (FLOPs in millions, source), or None when unknown.

    Returns:
        the newest scorable record of each (device, implementation, model) as a test;
        for each with none, the newest record's reason as a :class:`NotRun`; and a note for
        every test whose scorable records ran at several thread counts (the newest counts).
    """
    groups: dict[tuple, list] = {}
    for record in sorted(records, key=lambda r: (r.created_at or "", r.finished_at or "")):
        if record.kind == "latency" and not (record.spec or {}).get("binarize"):
            key = (record.device, implementation_of(record), record.model)
            groups.setdefault(key, []).append(record)
    selection = Selection([], [], [])
    for (device, impl, model), group in sorted(groups.items()):
        scorable = [r for r in group if _why_not(r, include_invalid) is None]
        if not scorable:
            newest = group[-1]
            reason = _why_not(newest, include_invalid)
            selection.not_run.append(NotRun(device, impl, model, reason, newest.id))
            continue
        found = flops(model)
        if found is None:
            selection.not_run.append(NotRun(device, impl, model, "no FLOPs: model not in the zoo",
                                            scorable[-1].id))
            continue
        threads = sorted({r.threads for r in scorable if r.threads is not None})
        if len(threads) > 1:
            newest = scorable[-1].threads
            selection.notes.append(f"{device} {impl}/{model}: runs at {threads} threads; the "
                                   f"newest ({newest}) counts (choose with --threads)")
        selection.tests.append(_test(scorable[-1], impl, *found))
    return selection


def _test(record, implementation: str, flops_m: float, flops_source: str) -> DeviceTest:
    time_s, stat = time_of(record)
    return DeviceTest(device=record.device, implementation=implementation, model=record.model,
                accuracy=record.accuracy, time_s=time_s, flops_m=flops_m, stat=stat,
                flops_source=flops_source, source=record.id)
